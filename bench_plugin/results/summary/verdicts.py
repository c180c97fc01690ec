"""summary.json's comparison: each arm's boundary, capacity, verdict and answer against the control."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from bench_plugin.results.limits import CommaLimits
from bench_plugin.results.server_figures import LatencyGrowth, Sparse
from bench_plugin.results.spread import Judged, Model, Spread
from bench_plugin.results.summary.arms import StageComparison
from bench_plugin.results.summary.campaign import Conditions
from bench_plugin.results.summary.classes import PerClass
from bench_plugin.results.summary.envelope import Envelope
from bench_plugin.results.summary.generators import GeneratorCheck


class RepeatBoundary(Model):
    """One repeat's boundary."""

    repeat: int
    status: str
    stage_position: float
    offered: PerClass
    limiting: CommaLimits = Field(default_factory=list)
    """What failed first: the worst criterion at the first failing stage (empty where none failed)."""
    between: list[int] | None = None
    note: str | None = None


class Boundary(Model):
    """An arm's operating boundary: the highest load where every class meets its SLOs and error budget."""

    status: str
    """``reached``, ``not reached`` (every stage passed), ``below the lowest stage`` or ``not measured``."""
    text: str
    stage_position: Spread
    offered: PerClass
    limiting: CommaLimits = Field(default_factory=list)
    """What limits it: the criterion most repeats name, or (each class searched alone) the classes whose
    boundary is the lowest; empty where nothing does (no boundary)."""
    stage_order: list[int] = Field(default_factory=list)
    per_repeat: list[RepeatBoundary] = Field(default_factory=list)


class RepeatCapacity(Model):
    """One trial's search outcome."""

    repeat: int
    status: str
    scale: float | None
    runs: int
    fixed_sweep_runs: int
    capacity_per_device: float | None
    limited: str | None = None
    """Where its load generator fell behind before the boundary (status ``generator-limited``: ``scale`` is
    only a lower bound), else None."""
    generator_checks: list[GeneratorCheck] = Field(default_factory=list, exclude=True)
    """What the self-check found in the stages where it fell behind (an empty check where it found none): for
    the analysis, which words the verdict's advice from it; not written."""


class Capacity(Model):
    """An adaptive arm's searched boundary and capacity per device."""

    mix: PerClass
    scale: Spread
    offered: PerClass
    capacity_per_device: Spread
    capacity_per_device_ratio: Judged | None
    per_repeat: list[RepeatCapacity]


class Verdict(Model):
    """An arm's overall call, as a sentence a platform engineer can act on."""

    call: str
    text: str
    worth_it_up_to_stage: int | None
    conditions: Conditions


class Answer(Sparse):
    """An arm's answer in a few words (analysis/answer.py): what the terminal and the report open with."""

    SPARSE: ClassVar[frozenset[str]] = frozenset({"growth"})

    call: str
    """The arm's verdict call; ``control`` for the control arm."""
    at: str | None
    """Where ``per_device`` was measured: ``the searched boundary``, or the stage its verdict rests on."""
    per_device: Spread | None
    """Requests per second within SLO per device there: the capacity within SLOs per device (a search) or
    the goodput per device at that stage."""
    control_per_device: Spread | None = None
    """The control's figure at the same load (a sharing arm); None for the control itself."""
    ratio: Judged | None = None
    """``per_device`` over the control's, paired by repeat."""
    limiting: CommaLimits = Field(default_factory=list)
    """What limits the arm there: the classes and figures past their SLOs at that stage, or the boundary's."""
    next_step: str
    """What would make the answer firmer or wider, or that none is needed (the rule: analysis/answer.py)."""
    growth: LatencyGrowth | None = None
    """Where the latency the arm adds goes (a sharing arm whose servers said it); absent otherwise and in files
    written before it."""


class ArmComparison(Model):
    """One arm: its boundary, its stages against the control, its verdict."""

    sharing: str | None
    is_control: bool
    devices_charged: Spread
    boundary: Boundary
    stages: list[StageComparison] = Field(default_factory=list)
    search: Capacity | None = None
    verdict: Verdict | None = None
    answer: Answer | None = None
    """The arm's answer in short (absent in files written before it)."""
    envelope: Envelope | None = None
    """Searched along several rays (``search.mixes``): the arm's envelope; None otherwise."""


class Comparison(Model):
    """Every arm against the control arm, and how the figures were computed."""

    control: str | None
    method: dict[str, str]
    arms: dict[str, ArmComparison]
