"""summary.json's stage: its figures per class, its GPU, its disruption and its interruptions."""

from __future__ import annotations

from typing import ClassVar

from pydantic import ConfigDict, Field

from bench_plugin.results.facts import Recorded
from bench_plugin.results.server_figures import Sparse
from bench_plugin.results.spread import MeanPeak, Model
from bench_plugin.results.summary.classes import ClassStats, PerClass
from bench_plugin.results.summary.generators import GeneratorCheck, GeneratorUse, HostLoad


class StageGpu(Model):
    """A stage's GPU figures (analysis/gpu.py)."""

    devices: dict[str, dict[str, MeanPeak]] = Field(default_factory=dict)
    """Device -> ``util_pct`` / ``vram_used_mib`` -> figures."""
    classes: dict[str, dict[str, MeanPeak]] = Field(default_factory=dict)
    """Class -> ``vram_mib`` / ``sm_util_pct`` -> figures (its processes summed at each poll)."""


class ClassInterruption(Sparse):
    """One class's interruption in a disrupted stage, as its requests saw it (analysis/disruption.py), and, on the
    local backend, what its server's replacement took (from the recorded steps). The fields after
    ``recovered_s`` are written only where known, so a summary written before them reads as it was."""

    SPARSE: ClassVar[frozenset[str]] = frozenset({
        "added_p95_ms", "ttft_p95_before_ms", "ttft_peak_p95_ms", "added_ttft_p95_ms", "survived",
        "unavailable_s", "cold_start_s", "stopped_after_s"})

    requests: int
    """Requests of the class sent (intended) from the disruption's start to the stage's end, and those in flight at
    its start that failed after it."""
    failed: int
    failed_share: float | None
    p95_before_ms: float | None
    """P95 latency of the successful requests intended before the disruption."""
    peak_p95_ms: float | None
    """Highest P95 of the successful requests over 1 s windows (0.5 s apart) from the disruption on."""
    spike: float | None
    """peak_p95_ms / p95_before_ms."""
    recovered_s: float | None
    """Seconds from the disruption to recovery (RECOVERY_RULE); None: not recovered within the stage."""
    added_p95_ms: float | None = None
    """peak_p95_ms - p95_before_ms: the latency the disruption added at its worst second."""
    ttft_p95_before_ms: float | None = None
    """LLM: TTFT P95 of the successful requests intended before the disruption."""
    ttft_peak_p95_ms: float | None = None
    """LLM: the highest TTFT P95 over the same 1 s windows."""
    added_ttft_p95_ms: float | None = None
    """LLM: ttft_peak_p95_ms - ttft_p95_before_ms."""
    survived: bool | None = None
    """A class whose server was not replaced: whether it came through (its ``co-tenant`` step: still running and
    answering); None where it was not checked."""
    unavailable_s: float | None = None
    """A class whose server was replaced (local backend): seconds from its front refusing (or the kill) to its
    front moving to the new server; 0 for a rollout, which never refuses; None where it never moved."""
    cold_start_s: float | None = None
    """A replaced class: seconds from the new server's spawn to its first answer (``ready``)."""
    stopped_after_s: float | None = None
    """A replaced class: seconds from the old server's stop (or kill) to its exit (its drain)."""


class DisruptionStep(Recorded):
    """One step of a disruption as the backend did it: the action, its target, how it went and when, and the
    action's own facts (``node``, ``refusals``, ...); each written only where it was recorded."""

    model_config = ConfigDict(extra="allow")

    # In the order of their names, as the store keeps them.
    action: str
    result: str | None = None
    t: float | None = None
    """Epoch seconds of the step, where the backend timed it."""
    target: str


class SecondFigures(Model):
    """One class's requests in one second of a disrupted stage, placed by their intended send time."""

    t: float
    """The second's start, in seconds from the disruption's start (negative before it)."""
    sent: int
    ok: int
    failed: int
    p95_ms: float | None
    """P95 latency of the second's successful requests; None without any."""


class StageDisruption(Sparse):
    """The disruption of one stage: what was done, when, the interruption per class and its series per second."""

    SPARSE: ClassVar[frozenset[str]] = frozenset({"series"})

    kind: str
    at_s: float
    started_s: float | None
    """When it began (epoch seconds); None: it never did."""
    actions: list[DisruptionStep] = Field(default_factory=list)
    """Each recorded step, in time order."""
    classes: dict[str, ClassInterruption] = Field(default_factory=dict)
    rule: str = ""
    """How recovery is decided, in words."""
    series: dict[str, list[SecondFigures]] | None = None
    """Class -> its requests second by second from the stage's start to its end, before, during and after the
    disruption (the timeline of the cost); absent in summaries written before it."""


class StageSummary(Model):
    """One stage of one trial."""

    index: int
    name: str | None
    offered: PerClass
    """Class -> the nominal load (req/s, or request loops for a closed-loop class)."""
    arrival: dict[str, str]
    duration_s: float | None
    status: str
    reason: str | None
    classes: dict[str, ClassStats] = Field(default_factory=dict)
    planned_s: float | None = None
    """How long the stage was meant to send (its ``duration_s``)."""
    arrivals: dict[str, int] = Field(default_factory=dict)
    """Open-loop class -> the arrivals the stage sent (its seeded sequence), whether or not all completed."""
    realised: PerClass = Field(default_factory=dict)
    """Open-loop class -> realised offered rate: arrivals / planned duration (req/s)."""
    generators: dict[str, GeneratorUse] = Field(default_factory=dict)
    """Load generator -> the CPU it used while sending the stage."""
    generator_limited: str | None = None
    """Why the load generator could not keep up (analysis/selfcheck.py), or None when it did."""
    generator_check: GeneratorCheck | None = None
    """The kind of generator limit and the stalls note (analysis/selfcheck.py); None: nothing to say."""
    host: HostLoad | None = None
    """The host's own load over the stage, where it was measured."""
    host_busy: str | None = None
    """Why the host was busy with other work during the stage, or None."""
    protocol_failure: str | None = None
    """Set when some class's requests all failed with one error that load does not cause (ClassStats.sole_error):
    the stage measured nothing about capacity, and its verdict names the error instead."""
    gpu: StageGpu | None = None
    """Per device utilisation and VRAM, per class VRAM and SM utilisation; None where nothing was sampled."""
    disruption: StageDisruption | None = None
    """The scenario's disruption where it happened in this stage (kubernetes backend), else None."""

    @property
    def load(self) -> PerClass:
        """Class -> the load the stage really offered: the realised rate where known, else the nominal one."""
        return {name: self.realised.get(name, value) for name, value in self.offered.items()}
