"""summary.json's per-arm figures over repeats and each stage's comparison with the control."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from bench_plugin.results.limits import Limit
from bench_plugin.results.reasons import Reasons, RunFlags
from bench_plugin.results.server_figures import LatencySplit, Sparse
from bench_plugin.results.spread import Judged, Model, Spread
from bench_plugin.results.summary.classes import PerClass
from bench_plugin.results.summary.generators import GeneratorCheck


class ArmClassFigures(Model):
    """One class at one stage of one arm, over its repeats."""

    throughput_rps: Spread
    latency_p50_ms: Spread
    latency_p95_ms: Spread
    error_rate: Spread
    normalised_throughput: Spread | None
    """Throughput over the control's, paired by repeat (a ratio); None for the control."""
    ttft_p95_ms: Spread | None = None
    tpot_p95_ms: Spread | None = None
    itl_p95_ms: Spread | None = None
    """LLM: inter-token latency P95 over repeats (ClassStats.itl_ms); None where no chunk times were kept."""


class ClassDisruptionFigures(Sparse):
    """One class's interruption in a disrupted stage over the arm's repeats (analysis/disruption.py): each a
    Spread of the repeats' ClassInterruption figures, written where some repeat has it."""

    SPARSE: ClassVar[frozenset[str]] = frozenset({"added_ttft_p95_ms", "unavailable_s", "cold_start_s", "survived",
                                                  "checked"})

    failed: Spread
    failed_share: Spread
    added_p95_ms: Spread
    """The latency the disruption added at its worst second (peak 1 s P95 minus the P95 before)."""
    recovered_s: Spread
    """Seconds to recover; a repeat that did not recover within the stage is left out (``unrecovered`` counts it)."""
    unrecovered: int = 0
    added_ttft_p95_ms: Spread | None = None
    unavailable_s: Spread | None = None
    cold_start_s: Spread | None = None
    survived: int | None = None
    """Repeats in which the class came through another's replacement (None where it was never checked)."""
    checked: int | None = None
    """Repeats in which that was checked."""


class DisruptionFigures(Model):
    """A disrupted stage of one arm over its repeats: what was done, and per class what it cost."""

    kind: str
    repeats: int
    """Repeats of the arm in which the stage was disrupted."""
    classes: dict[str, ClassDisruptionFigures] = Field(default_factory=dict)


class ArmStageFigures(Sparse):
    """One stage of one arm: its nominal and realised load and each class's figures over repeats."""

    SPARSE: ClassVar[frozenset[str]] = frozenset({"disruption"})

    index: int
    offered: PerClass
    realised: PerClass = Field(default_factory=dict)
    classes: dict[str, ArmClassFigures] = Field(default_factory=dict)
    disruption: DisruptionFigures | None = None
    """Where the stage was disrupted: its cost over the repeats; absent otherwise."""


class PendingTime(Model):
    """How long pods waited to be scheduled over an arm's repeats: per trial, the longest Pending of its pods."""

    spread: Spread
    """Mean and 95% interval over the repeats; ``values`` has one per trial, in run order."""
    max_s: float | None
    """The longest over every repeat."""


class ArmPods(Model):
    """An arm's scheduling over the repeats whose pods were watched."""

    trials: int
    pending: PendingTime
    classes: dict[str, PendingTime] = Field(default_factory=dict)
    """Class -> the same, over that class's pods."""
    reasons: dict[str, int] = Field(default_factory=dict)
    """Every distinct FailedScheduling reason -> attempts that gave it over every repeat, most first."""
    preempted: int = 0
    """Pods preempted, over every repeat."""
    evicted: int = 0
    """Pods evicted, over every repeat."""
    preempting: int = 0
    """Pods of the cluster's other work that the arm's pods preempted, over every repeat."""


class ArmFigures(Model):
    """One arm's figures, stage by stage."""

    stages: list[ArmStageFigures]
    pods: ArmPods | None = None
    """Its scheduling over repeats; None where no trial of the arm had its pods watched."""


class ClassComparison(Sparse):
    """One class at one stage of one arm against the control."""

    SPARSE: ClassVar[frozenset[str]] = frozenset({"latency_split", "limits"})

    normalised_throughput: Judged | None = None
    throughput_loss: Judged | None = None
    slowdown_p95: Judged | None = None
    slowdown_ttft_p95: Judged | None = None
    slowdown_tpot_p95: Judged | None = None
    slo_attainment: Spread
    goodput_rps: Spread
    meets_slo: bool
    within_error_budget: bool
    breaches: list[str] = Field(default_factory=list)
    limits: list[Limit] | None = None
    """The breaches as typed items (the class, the figure and by how much), which the answer names; written only
    where some breach is, so absent where the class kept every SLO and in files written before it."""
    latency_split: LatencySplit | None = None
    """Where the latency the arm adds goes: client, server queue, server compute, the rest (analysis/queueing.py);
    absent for the control, where the servers said nothing, and in files written before it."""


class StageComparison(Model):
    """One stage of one arm against the control: figures, flags and, for a non-control arm, the verdict."""

    index: int
    offered: PerClass
    """Class -> the load the stage really offered (realised)."""
    repeats: int
    classes: dict[str, ClassComparison]
    generator_limited: RunFlags = Field(default_factory=list)
    """Each run (of this arm or the control) whose load generator fell behind, and why."""
    generator_checks: list[GeneratorCheck] = Field(default_factory=list, exclude=True)
    """What the self-check found in each of those runs, in the same order (an empty check where it found none):
    for the analysis, which words the verdict's advice from it; not written."""
    host_busy: RunFlags = Field(default_factory=list)
    """Each run measured while the host was busy with other work, and why."""
    protocol_failure: RunFlags = Field(default_factory=list)
    """Each run in which some class's requests all failed with one protocol error, and which."""
    goodput_per_device: Spread
    paired_repeats: int = 0
    """Repeats with this stage judged in both the arm and the control."""
    consolidation_gain: Judged | None = None
    fairness: Spread | None = None
    control_goodput_per_device: Spread | None = None
    goodput_per_device_ratio: Judged | None = None
    verdict: str | None = None
    reasons: Reasons = Field(default_factory=list)
    """Why the stage got its verdict (results/reasons.py)."""
