"""summary.json's adaptive search: each probe, its decision and checks, each ray's result, warm starts."""

from __future__ import annotations

from pydantic import Field

from bench_plugin.results.spread import Model
from bench_plugin.results.summary.classes import PerClass


class ProbeCheck(Model):
    """One criterion of one class in a search probe, as a count: requests beyond the limit out of those judged,
    against the fraction allowed, with the one-sided confidence bounds of the true fraction (analysis/probe.py)."""

    workload: str
    criterion: str
    """``p95``, ``ttft p95``, ``tpot p95`` or ``error rate``."""
    n: int
    """Requests judged: the successful ones for a latency, every one for the error rate."""
    exceeded: int
    """Of those, beyond the SLO (a latency) or failed (the error rate)."""
    allowed: float
    """The fraction allowed: 0.05 for a P95, the error budget for errors."""
    lower: float
    upper: float
    """The true fraction's one-sided confidence bounds (Wilson score)."""
    outcome: str
    """``pass`` (upper bound within ``allowed``), ``fail`` (lower bound beyond it) or ``undecided``."""


class ProbeDecision(Model):
    """How a search probe was decided: every criterion's count, and the outcome (analysis/probe.py)."""

    outcome: str
    """``pass`` when every criterion passed, ``fail`` when any failed, else ``undecided``; ``generator-limited``
    when its load generator fell behind, whatever the counts: not judged."""
    point: bool
    """The decision on the point estimates alone (every fraction within its allowance): what an undecided
    probe falls back to once its extensions are spent."""
    confidence: float
    checks: list[ProbeCheck] = Field(default_factory=list)
    stages: list[int] = Field(default_factory=list)
    """The stages whose samples were pooled: the probe's first run and its extensions."""
    set_aside: list[int] = Field(default_factory=list)
    """Stages of the probe run and not pooled: its load generator fell behind in them and the probe did not pass
    with them (analysis/probe.py), so each was run again; empty before stages were set aside."""
    note: str | None = None
    """Why the probe failed without counts (its stage was rolled back or did not complete), or why its load
    generator fell behind (``generator-limited``), else None."""
    lag_judged: bool = False
    """Whether the load generator's lateness was judged with the probe (analysis/probe.py); stores written before
    that are judged afterwards, from their stages' self-check."""
    futile: bool = False
    """Undecided, and not run again: at its estimates the extensions it had left were not expected to decide it
    (``search.skip_futile_extensions``, analysis/probe.extension_futile)."""


class SearchProbe(Model):
    """One probe of a trial's search: the load it held along a ray and how it was decided."""

    segment: int
    ray: str
    phase: str
    """``probe``, or ``sustain``: the hold of the boundary found."""
    scale: float
    passed: bool
    """What the search took it for (its decision, or its point estimate when undecided)."""
    stages: list[int]
    """The trial's stages (``trials[].stages[].index``) it pooled: its first run and its extensions."""
    decision: ProbeDecision | None = None
    set_aside: list[int] = Field(default_factory=list)
    """The trial's stages it ran and set aside, its load generator behind in them (``decision.set_aside``)."""


class SearchResult(Model):
    """One segment's adaptive search outcome along one ray (analysis/search.py), as the conductor recorded it."""

    segment: int
    classes: list[str]
    """The classes the ray loads in the segment (one, where each class was searched alone)."""
    mix: PerClass
    """Class -> its load at scale 1 (req/s, or users if closed-loop)."""
    status: str
    """``found``, ``above the maximum``, ``below the minimum``, ``generator-limited`` (stopped at a probe its load
    generator could not send: the boundary is at least ``lo``), or ``bracketing``/``bisecting`` if cut short."""
    lo: float | None
    """The highest scale that passed (None: none did)."""
    hi: float | None
    """The lowest scale that failed (None: none did)."""
    estimate: float | None
    """The midpoint of the bracket; the last pass or first fail when the bracket is open."""
    precision: float | None
    """(hi - lo) / hi reached (None while the bracket is open)."""
    runs: int
    """Stage-runs the search used."""
    fixed_sweep_runs: int
    """Stages an evenly spaced sweep would need for the same precision (analysis/search.fixed_sweep_runs)."""
    ray: str = "mix"
    """The ray searched (``search.rays()``): ``mix`` is the scenario's ``search.mix``; absent before rays."""
    sustain: str | None = None
    """The hold of the found boundary for the sustain time: ``confirmed`` (it passed), ``undecided`` (it passed on
    its point estimate only), ``failed`` (it failed twice, and ``lo`` is the last scale that passed a probe), or
    None (no sustain: none asked, none found, or written before sustains)."""
    undecided: int = 0
    """Probes its samples could not decide after every extension, decided by their point estimate."""
    stopped: str | None = None
    """Why the search stopped before its precision (``budget spent``, or where its load generator fell behind),
    else None."""


class BorrowedBracket(Model):
    """Where one ray's search starts in the first repeat of its arm: the bracket an earlier campaign's search of the
    same arm, classes, ray and rates ended with (``--warm-start-from``)."""

    arm: str
    classes: list[str]
    """The classes the ray loads in the segment (one, where the arm measures each class alone)."""
    ray: str
    mix: PerClass
    """Class -> its load at scale 1, the same in both campaigns."""
    lo: float | None
    hi: float | None


class WarmStartFrom(Model):
    """The earlier campaign whose brackets a campaign's searches started from (``--warm-start-from DIR``): only where
    each ray's search first looks; every boundary rests on the campaign's own probes (analysis/search.py, 4)."""

    directory: str
    """The earlier campaign's results directory, as given."""
    campaign: str | None = None
    """Its scenario's name."""
    sha256: str | None = None
    """Its scenario's sha256."""
    started_s: float | None = None
    brackets: list[BorrowedBracket] = Field(default_factory=list)
