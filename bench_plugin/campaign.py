"""Campaign: every arm times every repeat, in an order that spreads drift over all arms.

Interleaved order (ABCABC...) is the default: a machine that warms up, throttles or fills its page
cache over the run then affects every arm alike, instead of biasing whichever arm ran last
(AAABBBCCC, the ``sequential`` order, kept for cases where switching arms is very expensive).
"""

from __future__ import annotations

from dataclasses import dataclass

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
