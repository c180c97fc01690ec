"""CampaignShape: keeps one driver user per class running for the whole campaign, then ends the test.

Load levels are not expressed as user counts: each stage's rates go to the drivers in a message (see
users/state.py). The shape's only jobs are to spawn the drivers and to end the Locust test once the
conductor has finished, which in --headless mode also ends the process.
"""

from __future__ import annotations

from typing import Any

from locust import LoadTestShape, User


class CampaignShape(LoadTestShape):
    """Drivers for the campaign's classes until the campaign ends."""

    def tick(self) -> tuple[int, float, list[type[User]] | None] | None:
        environment: Any = self.runner.environment if self.runner else None
        plugin = getattr(environment, "bench_plugin", None)
        if plugin is None or plugin.finished:
            return None
        classes: list[type[User]] = list(plugin.user_classes)
        return len(classes), float(len(classes)), classes
