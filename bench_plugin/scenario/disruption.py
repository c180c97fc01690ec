"""Scenario model of a disruption: what happens to an arm's servers, pods or nodes while a stage runs.

A ``disruption:`` block (or a list of them, at most one per stage) applies to every trial of the arms it
names (default: every arm, the control included, so each arm meets the same disruption and their
interruptions compare). ``at_s`` seconds into stage ``stage``, for each class it names in turn:

- ``rollout-restart`` (both backends): a new server is started beside the old one and, once it answers,
  takes the new connections; the old one is then stopped (SIGTERM, ``grace_s`` to drain, then SIGKILL).
  On kubernetes, the classes' Deployments are restarted as ``kubectl rollout restart`` does;
- ``restart`` (local): the old server stops taking connections and is stopped (SIGTERM, ``grace_s`` to
  drain, then SIGKILL), then a new one is started: a Recreate rollout;
- ``kill`` (local): the old server is killed (SIGKILL) mid-work, then a new one is started: a crash;
- ``drain`` (kubernetes): cordon the nodes the pods run on, evict through the eviction API, uncordon at
  the stage's end;
- ``node-failure`` (kubernetes): run ``command`` and, ``rejoin_after_s`` later, ``rejoin_command`` (the
  plugin cannot fail a real node itself; a cloud CLI stopping and starting the VM does).

The load keeps going throughout. On the local backend each class's requests go through a front
(sharing/front.py) that moves to the new server when it is ready, as a Service does.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Discriminator, Field, Tag, model_validator

from bench_plugin.scenario.base import PositiveFloat, StrictModel

DISRUPTION_KINDS: tuple[str, ...] = ("rollout-restart", "restart", "kill", "drain", "node-failure")
BACKEND_KINDS: dict[str, tuple[str, ...]] = {
    "local": ("rollout-restart", "restart", "kill"),
    "kubernetes": ("rollout-restart", "drain", "node-failure"),
}
"""The disruptions each backend can carry out."""


class Disruption(StrictModel):
    """The top-level ``disruption:`` block."""

    kind: Literal["rollout-restart", "restart", "kill", "drain", "node-failure"]
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
    grace_s: PositiveFloat = 30.0
    """local restart and rollout-restart: how long the old server may drain after SIGTERM before SIGKILL
    (Kubernetes' default terminationGracePeriodSeconds)."""

    @model_validator(mode="after")
    def _consistent(self) -> Disruption:
        node_failure = self.kind == "node-failure"
        for name in ("command", "rejoin_command", "rejoin_after_s"):
            value = getattr(self, name)
            if node_failure and value is None:
                raise ValueError(f"disruption.{name} is required for kind node-failure")
            if not node_failure and value is not None:
                raise ValueError(f"disruption.{name} is only for kind node-failure, not {self.kind}")
            if isinstance(value, list) and (not value or not all(value)):  # an argv
                raise ValueError(f"disruption.{name} must be a non-empty argv list of non-empty strings")
        for name in ("classes", "arms"):
            value = getattr(self, name)
            if value is not None and not value:
                raise ValueError(f"disruption.{name} is empty; leave it out for all")
        return self

    def backends(self) -> list[str]:
        """The backends that can carry this disruption out."""
        return [name for name, kinds in BACKEND_KINDS.items() if self.kind in kinds]

    def hits(self, arm: str) -> bool:
        """Whether trials of ``arm`` are disrupted."""
        return self.arms is None or arm in self.arms


def _one_or_many(value: Any) -> str:
    return "many" if isinstance(value, list) else "one"


UNION_TAGS = frozenset({"one", "many"})
"""The tags of :data:`Disruptions` that a validation error's location carries (the loader leaves them out)."""

Disruptions = Annotated[Annotated[Disruption, Tag("one")] | Annotated[list[Disruption], Tag("many")],
                        Discriminator(_one_or_many)]
"""The ``disruption:`` key: one block, or a list of blocks (validated as the one its value is)."""
