"""summary.json's trial: an arm run once, its placement, stages, search and pods."""

from __future__ import annotations

from pydantic import Field

from bench_plugin.results.placement import ClassPlacement
from bench_plugin.results.spread import Model
from bench_plugin.results.summary.search import SearchProbe, SearchResult
from bench_plugin.results.summary.stages import StageSummary
from bench_plugin.results.words import JUDGED_STATUSES


class PodSummary(Model):
    """One workload pod of a trial, as the cluster reported it (analysis/pods.py); times are epoch seconds."""

    pod: str
    uid: str
    workload: str | None
    """Its workload class (the bench-plugin/class label)."""
    node: str | None
    requests: dict[str, str] = Field(default_factory=dict)
    """Extended resource -> what the pod asked of it (``nvidia.com/gpu``: ``1``), when it was scheduled."""
    created_s: float | None
    scheduled_s: float | None
    ready_s: float | None
    """When its Ready condition first turned True (kwok fakes it: the model's readiness is the placement's)."""
    deleted_s: float | None
    """When its deletion was asked for."""
    pending_s: float | None
    """scheduled - created; for a pod never scheduled, from its creation until it was deleted or the trial ended."""
    pending_until: str | None = None
    """What ended the Pending time: ``scheduled``, ``deleted`` or ``trial end``."""
    failed_scheduling: dict[str, int] = Field(default_factory=dict)
    """FailedScheduling reason (the scheduler's filter reason, node counts left out) -> attempts that gave it."""
    first_failed_scheduling: str | None = None
    """The scheduler's first FailedScheduling message in full."""
    preempted_s: float | None = None
    preempted_by: str | None = None
    """The preemptor: its pod name where the watch saw it too, else its uid."""
    evicted_s: float | None = None
    evicted: str | None = None
    """Why: ``EvictionByEvictionAPI: Eviction API: evicting`` (a drain), ``DeletionByTaintManager: ...``."""
    preempting: list[str] = Field(default_factory=list)
    """The pods of the cluster's other work this pod preempted: ``preempted pod <ns>/<name> on node <node>``."""


class PlacedClass(ClassPlacement):
    """Where a class's server ran in a trial (its last segment's placement), the segment and when it was ready."""

    segment: int
    ready: float | None
    """Epoch seconds when it first answered its own real request; None where it never did."""


class TrialSummary(Model):
    """One trial: an arm run once."""

    id: int
    arm: str
    repeat: int
    status: str
    reason: str | None
    placement: dict[str, PlacedClass]
    """Class -> where its server ran (device, node, pid, url, ...), its segment and when it was ready."""
    stages: list[StageSummary]
    devices_charged: int = 0
    """Sum over the trial's segments of the distinct devices each used (see summary.devices_charged)."""
    search: list[SearchResult] = Field(default_factory=list)
    """Adaptive campaigns: each segment's search result (bounds, estimate, stage-runs; see conductor)."""
    probes: list[SearchProbe] = Field(default_factory=list)
    """Adaptive campaigns: each probe in run order, with its decision (absent in files written before them)."""
    pods: list[PodSummary] | None = None
    """The trial's workload pods in order of creation, as the cluster reported them; None where nothing was
    watched (the local and manual backends)."""

    def stage(self, index: int) -> StageSummary | None:
        """The stage with this index, or None when the trial has no such stage."""
        return next((s for s in self.stages if s.index == index), None)

    def judged_stage(self, index: int) -> StageSummary | None:
        """The stage if it can be judged: it ran to its end, was rolled back, or was skipped after a rollback.

        A stage cut short by Ctrl-C (``interrupted``), one whose load was not the stated one
        (``invalid``: a load generator lost, a sample missing) or one never reached says nothing
        about the load, so it is left out rather than counted as a failure. A class of a judged stage
        that has an offered load but no figures was skipped after a rollback, and counts as failing.
        """
        stage = self.stage(index)
        if stage is None or stage.status not in JUDGED_STATUSES:
            return None
        return stage
