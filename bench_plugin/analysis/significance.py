"""Significance: is an arm-vs-control figure different from "no change", given the spread over repeats?

Each comparison is made per repeat first (repeat r of the arm against repeat r of the control: the
campaign interleaves arms, so they ran close in time and drift hits both alike), then summarised over
those paired values (statistics.spread): a ratio by its geometric mean and log-scale interval
[lo, hi], a difference by its mean and Student-t half-width. The difference is significant when that
95% interval excludes the no-change value (1 for a ratio, 0 for a difference); the call is then
"higher" or "lower", otherwise "no significant difference", which is a result too. One repeat has no
spread, so it is never significant, and the figure says so.
"""

from __future__ import annotations

from collections.abc import Sequence

from bench_plugin.analysis.statistics import DIFFERENCE, RATIO, complement, fixed, interval_text, spread
from bench_plugin.results.spread import Judged, Kind, Spread
from bench_plugin.results.words import Significance

ONE_REPEAT = "one repeat: no spread"
NO_PAIRS = "no paired repeats"


def _judged(s: Spread, no_change: float, significant: bool, call: str, reason: str | None = None) -> Judged:
    return Judged(kind=s.kind, mean=s.mean, ci95=s.ci95, lo=s.lo, hi=s.hi, values=s.values, note=s.note,
                  excluded=s.excluded, no_change=no_change, significant=significant, call=call, reason=reason)


def judge(s: Spread, no_change: float) -> Judged:
    """The call on spread ``s`` against ``no_change``: significant when its 95% interval excludes it."""
    if s.mean is None:  # nothing kept: the spread's note says why when values were left out
        return _judged(s, no_change, False, Significance.NO_DIFFERENCE, None if s.excluded else NO_PAIRS)
    if s.lo is None or s.hi is None:
        return _judged(s, no_change, False, Significance.NO_DIFFERENCE, ONE_REPEAT)
    if s.lo > no_change:
        return _judged(s, no_change, True, Significance.HIGHER)
    if s.hi < no_change:
        return _judged(s, no_change, True, Significance.LOWER)
    return _judged(s, no_change, False, Significance.NO_DIFFERENCE)


def figure(values: Sequence[float | None], no_change: float, kind: Kind = DIFFERENCE) -> Judged:
    """The figure of per-repeat paired ``values`` of this ``kind`` against ``no_change``."""
    return judge(spread(values, kind), no_change)


def ratio_figure(values: Sequence[float | None], no_change: float = 1.0) -> Judged:
    """A figure of per-repeat ratios (positive values; no change = 1 unless told): geometric, log-scale interval."""
    return figure(values, no_change, RATIO)


def complement_figure(ratio: Judged) -> Judged:
    """1 minus a ratio figure (throughput loss from normalised throughput): no change 0, the call turned over."""
    return judge(complement(ratio.spread), 1.0 - ratio.no_change)


def describe(fig: Judged, unit: str = "x", what: str = "") -> str:
    """``1.42x the control's (geometric mean of 3 repeats, 95% CI [1.30, 1.55]: higher)``, or why no call was made."""
    if fig.mean is None:
        return f"not measured ({fig.notes})"
    s = fig.spread
    left_out = f"; {s.note}" if s.note else ""
    if fig.reason == ONE_REPEAT:
        return f"{fixed(fig.mean)}{unit}{what} (one repeat: no spread, so {fig.call}{left_out})"
    over = f"{s.n} repeat{'s' if s.n != 1 else ''}"
    interval = interval_text(s)
    if s.kind == RATIO:
        return f"{fixed(fig.mean)}{unit}{what} (geometric mean of {over}, 95% CI {interval}: {fig.call}{left_out})"
    return f"{fixed(fig.mean)}{unit}{what} (95% CI {interval} over {over}: {fig.call}{left_out})"
