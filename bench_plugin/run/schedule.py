"""Campaign: every arm times every repeat, in an order that spreads drift over all arms.

Interleaved order (ABCABC...) is the default: a machine that warms up, throttles or fills its page
cache over the run then affects every arm alike, instead of biasing whichever arm ran last
(AAABBBCCC, the ``sequential`` order, kept for cases where switching arms is very expensive).

A resumed campaign runs the same schedule, less what it already ran to its end (``Done``, worked out
from the results directory by launch/resume.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from bench_plugin.results.summary import SearchResult
from bench_plugin.scenario import Arm, Scenario


@dataclass(frozen=True)
class Trial:
    """One arm run once: its position in the campaign and its repeat number (1-based)."""

    id: int
    position: int
    arm: Arm
    repeat: int


def plan_trials(scenario: Scenario) -> list[Trial]:
    """The campaign's trials in run order."""
    pairs: list[tuple[Arm, int]]
    if scenario.order == "interleaved":
        pairs = [(arm, r) for r in range(1, scenario.repeats + 1) for arm in scenario.arms]
    else:
        pairs = [(arm, r) for arm in scenario.arms for r in range(1, scenario.repeats + 1)]
    return [Trial(id=i + 1, position=i, arm=arm, repeat=r) for i, (arm, r) in enumerate(pairs)]


@dataclass(frozen=True)
class Done:
    """What of the schedule already ran to its end and is kept: the conductor runs the rest.

    A segment (one application of an arm and its stages in order: ``(trial id, segment index)``) is
    the unit; a trial is done when every one of its segments is and its end was recorded.
    """

    trials: frozenset[int] = field(default_factory=frozenset)
    segments: frozenset[tuple[int, int]] = field(default_factory=frozenset)
    probes: Mapping[tuple[int, int], tuple[KeptProbe, ...]] = field(default_factory=dict)
    """A search segment that runs again -> the probes its earlier attempt decided, in order: kept, and replayed
    into its searches, which go on from there."""
    rays: Mapping[tuple[int, int], frozenset[str]] = field(default_factory=dict)
    """A search segment that runs again -> its rays whose search had ended (their result already recorded)."""
    next_stage: Mapping[tuple[int, int], int] = field(default_factory=dict)
    """A search segment that runs again with kept probes -> the index its first new stage takes (after theirs)."""
    searched: tuple[tuple[int, int, SearchResult], ...] = ()
    """Every ray's search that ended in the store, ``(trial id, segment, result)``: where a warm start looks first
    (``search.warm_start``)."""


@dataclass(frozen=True)
class KeptProbe:
    """One probe a resume keeps: what its search needs to be replayed (results.timeline.SearchStep)."""

    ray: str
    scale: float
    passed: bool
    decided: bool
    stages: tuple[int, ...]
    """Every stage it ran: those pooled and those set aside (analysis/probe.py), which count as runs too."""
    limited: str | None = None
    """Why its load generator fell behind (the probe went unjudged and its search stopped), else None."""
