"""Significance: is an arm-vs-control figure different from "no change", given the spread over repeats?

Each comparison is made per repeat first (repeat r of the arm against repeat r of the control: the
campaign interleaves arms, so they ran close in time and drift hits both alike), then summarised by
the mean and Student-t 95% CI of those paired values (statistics.spread). The difference is
significant when that interval excludes the no-change value (1 for a ratio, 0 for a difference); the
call is then "higher" or "lower", otherwise "no significant difference", which is a result too. One
repeat has no spread, so it is never significant, and the figure says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bench_plugin.analysis.statistics import Spread, spread

HIGHER = "higher"
LOWER = "lower"
NO_DIFFERENCE = "no significant difference"
ONE_REPEAT = "one repeat: no spread"
NO_PAIRS = "no paired repeats"


@dataclass(frozen=True)
class Figure:
    """A paired arm-vs-control figure: its spread over repeats and the significance call."""

    spread: Spread
    no_change: float
    """The value meaning "same as the control" (1 for ratios, 0 for differences)."""
    significant: bool
    call: str
    """``higher``, ``lower`` or ``no significant difference``."""
    note: str | None = None
    """Why no call could be made (one repeat, no pairs), or None."""

    @property
    def mean(self) -> float | None:
        """The mean of the paired values."""
        return self.spread.mean

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form: the spread's keys plus the call."""
        return {**self.spread.to_dict(), "no_change": self.no_change, "significant": self.significant,
                "call": self.call, "note": self.note}


def figure(values: Sequence[float | None], no_change: float) -> Figure:
    """The figure of per-repeat paired ``values`` against ``no_change``."""
    s = spread(values)
    if s.mean is None:
        return Figure(s, no_change, False, NO_DIFFERENCE, NO_PAIRS)
    if s.ci95 is None:
        return Figure(s, no_change, False, NO_DIFFERENCE, ONE_REPEAT)
    if s.mean - s.ci95 > no_change:
        return Figure(s, no_change, True, HIGHER)
    if s.mean + s.ci95 < no_change:
        return Figure(s, no_change, True, LOWER)
    return Figure(s, no_change, False, NO_DIFFERENCE)


def ratio_figure(values: Sequence[float | None]) -> Figure:
    """A figure of per-repeat ratios (no change = 1)."""
    return figure(values, 1.0)


def describe(fig: Figure, unit: str = "x", what: str = "") -> str:
    """``1.42x the control's (95% CI ±0.08 over 3 repeats: higher)``, or why no call was made."""
    if fig.mean is None:
        return f"not measured ({fig.note})"
    n = len(fig.spread.values)
    over = f"{n} repeat{'s' if n != 1 else ''}"
    ci = f"one repeat: no spread, so {fig.call}" if fig.note == ONE_REPEAT else \
        f"95% CI ±{fig.spread.ci95:.2f} over {over}: {fig.call}"
    return f"{fig.mean:.2f}{unit}{what} ({ci})"
