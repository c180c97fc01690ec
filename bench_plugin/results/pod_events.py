"""Pod events as stored: one thing the cluster did to one workload pod, at the cluster's time of it.

The record the kubernetes backend's pod watch makes (sharing/kubernetes/podevents.py says how each kind is
read from the API's objects), the store keeps (table ``pod_events``) and the analysis and the report read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

POD_EVENT_KINDS: tuple[str, ...] = ("created", "failed_scheduling", "preempting", "scheduled", "started", "ready",
                                    "not_ready", "preempted", "evicted", "killing", "deleted")
"""Every kind, in a pod's lifecycle order (the tie-break between transitions at the same time)."""

@dataclass(frozen=True)
class PodEvent:
    """One thing the cluster did to one pod, at the cluster's time of it."""

    t: float
    """Epoch seconds."""
    kind: str
    """One of POD_EVENT_KINDS."""
    pod: str
    """The pod's name."""
    uid: str
    workload: str | None = None
    """The pod's workload class (its bench-plugin/class label)."""
    node: str | None = None
    """The node the pod was bound to (or is preempted on), when it has one."""
    reason: str | None = None
    """Kubernetes' own reason: FailedScheduling, Preempted, EvictionByEvictionAPI, Killing, a Ready reason."""
    message: str | None = None
    """The cluster's message (the scheduler's, the eviction's), one line."""
    requests: Mapping[str, str] = field(default_factory=dict)
    """``scheduled`` only: extended resource -> what the pod asks of it (``{"nvidia.com/gpu": "1"}``)."""
    count: int = 1
    """How many occurrences this record stands for (an Event series reported several at once)."""

    @property
    def rank(self) -> int:
        """Position of ``kind`` in a pod's lifecycle (POD_EVENT_KINDS), for ordering equal times."""
        return POD_EVENT_KINDS.index(self.kind) if self.kind in POD_EVENT_KINDS else len(POD_EVENT_KINDS)


def in_order(events: list[PodEvent]) -> list[PodEvent]:
    """``events`` by time, lifecycle order at equal times, then pod name."""
    return sorted(events, key=lambda e: (e.t, e.rank, e.pod, e.uid))
