"""Records: the typed figures of one trial, stage and class, as summary.py reads them from the store.

Every later step (contention metrics, the operating boundary, the verdict) reads these records, never
the JSON they are written as, so a figure has one definition and one type.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class ClassStats:
    """One class in one stage of one trial."""

    requests: int
    errors: int
    errors_by_kind: dict[str, int]
    duration_s: float
    throughput_rps: float
    latency_ms: dict[str, float | None]
    queue_ms: dict[str, float | None]
    ttft_ms: dict[str, float | None] | None = None
    tpot_ms: dict[str, float | None] | None = None
    output_tokens_per_s: float | None = None
    inputs_per_s: float | None = None
    audio_s_per_s: float | None = None
    slo_met: int | None = None
    """Requests that succeeded within every SLO of the class (None: the store names no SLO)."""
    slo_attainment: float | None = None
    """slo_met / requests (None without requests or without an SLO)."""
    goodput_rps: float | None = None
    """slo_met per second of stage time."""
    send_lag_ms: dict[str, float | None] = field(default_factory=dict)
    """How late the load generator sent the requests (Sample.send_lag_ms): p50/p90/p95/p99/mean."""
    slot_waits: int = 0
    """Requests that waited for a free ``max_in_flight`` slot before they could be sent."""
    latency_ci_ms: dict[str, dict[str, Any]] = field(default_factory=dict)
    """p50/p95/p99 -> the order-statistic 95% interval of the latency percentile (intervals.py, to_dict)."""
    ttft_ci_ms: dict[str, dict[str, Any]] | None = None
    tpot_ci_ms: dict[str, dict[str, Any]] | None = None
    p95_note: str | None = None
    """Set when the P95 rests on too few samples to be bounded: how many it had and needs, how long would do."""

    @property
    def error_rate(self) -> float | None:
        """Failed requests / requests (None without requests)."""
        return self.errors / self.requests if self.requests else None


@dataclass
class StageSummary:
    """One stage of one trial."""

    index: int
    name: str | None
    offered: dict[str, float]
    arrival: dict[str, str]
    duration_s: float | None
    status: str
    reason: str | None
    classes: dict[str, ClassStats] = field(default_factory=dict)
    planned_s: float | None = None
    """How long the stage was meant to send (its ``duration_s``); None in stores written before it was kept."""
    arrivals: dict[str, int] = field(default_factory=dict)
    """Open-loop class -> the arrivals the stage sent (its seeded sequence), whether or not all completed."""
    realised: dict[str, float] = field(default_factory=dict)
    """Open-loop class -> realised offered rate: arrivals / planned duration (req/s)."""
    generators: dict[str, dict[str, float]] = field(default_factory=dict)
    """Load generator -> ``cpu_s``, ``wall_s`` and ``cores`` it used while sending the stage."""
    generator_limited: str | None = None
    """Why the load generator could not keep up (selfcheck.py), or None when it did."""
    host: dict[str, Any] | None = None
    """The host's own load over the stage (hostload.HostLoad), where it was measured."""
    host_busy: str | None = None
    """Why the host was busy with other work during the stage, or None."""
    gpu: dict[str, Any] | None = None
    """Per device utilisation and VRAM, per class VRAM and SM utilisation (gpu.StageGpu.to_dict); None unsampled."""

    @property
    def load(self) -> dict[str, float]:
        """Class -> the load the stage really offered: the realised rate where known, else the nominal one."""
        return {name: self.realised.get(name, value) for name, value in self.offered.items()}


@dataclass
class TrialSummary:
    """One trial: an arm run once."""

    id: int
    arm: str
    repeat: int
    status: str
    reason: str | None
    placement: dict[str, Any]
    stages: list[StageSummary]
    devices_charged: int = 0
    """Sum over the trial's segments of the distinct devices each used (see summary.devices_charged)."""
    search: list[dict[str, Any]] = field(default_factory=list)
    """Adaptive campaigns: each segment's search result (bounds, estimate, stage-runs; see conductor)."""

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


JUDGED_STATUSES: frozenset[str] = frozenset({"completed", "aborted", "skipped"})
"""Stage statuses that say something about the load (see TrialSummary.judged_stage)."""
