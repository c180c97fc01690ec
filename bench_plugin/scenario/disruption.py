"""Scenario model of a disruption: what happens to an arm's pods or nodes while a stage runs (kubernetes only).

One ``disruption:`` block applies to every trial of the arms it names (default: every arm, the control
included, so each arm meets the same disruption and their interruptions compare). ``at_s`` seconds into
stage ``stage`` the plugin restarts the classes' Deployments (``rollout-restart``), drains the nodes their
pods run on (``drain``: cordon, evict through the eviction API, uncordon at the stage's end), or runs
``command`` and, ``rejoin_after_s`` later, ``rejoin_command`` (``node-failure``: the plugin cannot fail a
real node itself; a cloud CLI stopping and starting the VM does). The load keeps going throughout.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from bench_plugin.scenario.base import PositiveFloat, StrictModel

DISRUPTION_KINDS: tuple[str, ...] = ("rollout-restart", "drain", "node-failure")


class Disruption(StrictModel):
    """The top-level ``disruption:`` block."""

    kind: Literal["rollout-restart", "drain", "node-failure"]
    at_s: float = Field(ge=0)
    """Seconds into the stage when it happens."""
    stage: int = Field(default=0, ge=0)
    """Index of the stage it happens in (of ``stages:``)."""
    classes: list[str] | None = None
    """Whose pods (rollout-restart, drain) or nodes (node-failure: informational) it hits; unset: every class."""
    arms: list[str] | None = None
    """The arms whose trials are disrupted; unset: every arm."""
    command: list[str] | None = None
    """node-failure: the argv that fails the node (run by the plugin, on the host it runs on)."""
    rejoin_command: list[str] | None = None
    """node-failure: the argv that brings it back."""
    rejoin_after_s: PositiveFloat | None = None
    """node-failure: seconds from ``command`` ending to ``rejoin_command``."""
    command_timeout_s: PositiveFloat = 60.0
    """node-failure: how long each command may run."""
    eviction_timeout_s: PositiveFloat = 30.0
    """drain: how long an eviction refused by a PodDisruptionBudget (HTTP 429) is retried."""

    @model_validator(mode="after")
    def _consistent(self) -> Disruption:
        node_failure = self.kind == "node-failure"
        for name in ("command", "rejoin_command", "rejoin_after_s"):
            value = getattr(self, name)
            if node_failure and value is None:
                raise ValueError(f"disruption.{name} is required for kind node-failure")
            if not node_failure and value is not None:
                raise ValueError(f"disruption.{name} is only for kind node-failure, not {self.kind}")
            if isinstance(value, list) and (not value or not all(value)):
                raise ValueError(f"disruption.{name} must be a non-empty argv list of non-empty strings")
        for name in ("classes", "arms"):
            value = getattr(self, name)
            if value is not None and not value:
                raise ValueError(f"disruption.{name} is empty; leave it out for all")
        return self

    def hits(self, arm: str) -> bool:
        """Whether trials of ``arm`` are disrupted."""
        return self.arms is None or arm in self.arms
