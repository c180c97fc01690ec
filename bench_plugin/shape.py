"""CampaignShape: runs the Locust test for as long as the campaign runs, then ends it.

Load levels are not user counts: each stage's rates go to the load generators in a message
(loadgen/fleet.py), and each process sends its shares through senders of its own (loadgen/state.py).
So the shape asks Locust for no users at all; its one job is to end the Locust test once the
conductor has finished, which in --headless mode also ends the process (and the workers).
"""

from __future__ import annotations

from locust import LoadTestShape, User


class CampaignShape(LoadTestShape):
    """No users, until the campaign ends."""

    def tick(self) -> tuple[int, float, list[type[User]] | None] | None:
        from bench_plugin.plugin import plugin_of

        plugin = plugin_of(self.runner.environment if self.runner else None)
        if plugin is None or plugin.finished:
            return None
        return 0, 1.0, None
