"""Statistics on exact samples and over repeats.

Percentiles are computed from every sample (numpy's default linear interpolation between order
statistics), never from histogram buckets: Locust's own buckets round to 10 ms above 100 ms and to
100 ms above 1 s, which is fine for a live view and too coarse for a comparison.

A figure over repeats (:class:`Spread`) says which kind of figure it is, because that decides how it
is summarised:

- ``value`` (a figure of one arm: throughput, a P95, goodput per device) and ``difference`` (arm minus
  control): the arithmetic mean and a 95% confidence interval from Student's t (n - 1 degrees of
  freedom), ``mean ± ci95``, so ``lo = mean - ci95`` and ``hi = mean + ci95``;
- ``ratio`` (arm over control: normalised throughput, slowdowns, goodput per device ratio): ratios
  multiply, so they are summarised on the log scale: the geometric mean ``exp(m)`` of the per-repeat
  ratios, where ``m`` is the mean of their logarithms, and the asymmetric interval
  ``[exp(m - t·sem), exp(m + t·sem)]`` (Student's t on the logs, n - 1 degrees of freedom, sem the
  standard error of the logs). Both ends are positive: the interval of a ratio of positive values
  cannot reach zero. There is no half-width, so ``ci95`` is None. A ratio that is zero, negative,
  infinite or missing has no logarithm; it is left out and the spread's ``note`` says so;
- ``complement`` (1 minus a ratio: throughput loss): 1 minus the ratio's geometric mean, with the
  ratio's interval turned over, ``[1 - hi, 1 - lo]``; ``ci95`` is None too.

With one repeat there is no interval (``ci95``, ``lo`` and ``hi`` are None), and the report says so.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

# np.percentile imports numpy.ma at its first call (through np.unique): 8-18 ms of a running stage's event
# loop when the rollback guard first judged a P95 on an H200 host. Imported with this module instead.
import numpy.ma

from bench_plugin.results.spread import Kind, Spread

PERCENTILES: tuple[int, ...] = (50, 90, 95, 99)

VALUE: Kind = "value"
DIFFERENCE: Kind = "difference"
RATIO: Kind = "ratio"
COMPLEMENT: Kind = "complement"
KINDS: tuple[Kind, ...] = (VALUE, DIFFERENCE, RATIO, COMPLEMENT)


def percentiles(values: Sequence[float]) -> dict[str, float | None]:
    """P50/P90/P95/P99 and the mean of ``values`` (all None when there are none)."""
    if len(values) == 0:
        return {**{f"p{p}": None for p in PERCENTILES}, "mean": None}
    arr = np.asarray(values, dtype=float)
    out: dict[str, float | None] = {f"p{p}": float(v) for p, v in zip(PERCENTILES, np.percentile(arr, PERCENTILES),
                                                                       strict=True)}
    out["mean"] = float(arr.mean())
    return out


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile of ``values`` (linear interpolation, as every figure here); None when there are none."""
    return float(np.percentile(np.asarray(values, dtype=float), q)) if len(values) else None


def _t95(n: int) -> float:
    from scipy import special  # imported when first needed: a load generator that never analyses anything
    # (a worker) should not pay for it at start-up; special.stdtrit is Student's t quantile

    return float(special.stdtrit(n - 1, 0.975))


def spread(values: Sequence[float | None], kind: Kind = VALUE) -> Spread:
    """The spread of the non-missing ``values``: arithmetic for values and differences, geometric for ratios."""
    if kind == RATIO:
        return ratio_spread(values)
    if kind not in (VALUE, DIFFERENCE):
        raise ValueError(f"spread of kind {kind!r}: use ratio_spread and complement for ratios")
    kept = [float(v) for v in values if v is not None and not math.isnan(v)]
    if not kept:
        return Spread(kind=kind, mean=None, ci95=None, values=[])
    mean = float(np.mean(kept))
    if len(kept) < 2:
        return Spread(kind=kind, mean=mean, ci95=None, values=kept)
    ci = _t95(len(kept)) * float(np.std(kept, ddof=1)) / math.sqrt(len(kept))
    return Spread(kind=kind, mean=mean, ci95=ci, lo=mean - ci, hi=mean + ci, values=kept)


def _excluded_note(excluded: Sequence[float | None], total: int) -> str | None:
    """``2 of 4 repeats left out (a geometric mean needs positive ratios): 0 not positive; 1 missing``."""
    if not excluded:
        return None
    bad = [v for v in excluded if v is not None]
    missing = len(excluded) - len(bad)
    why = ([f"{', '.join(f'{v:g}' for v in bad)} not positive"] if bad else []) + \
        ([f"{missing} missing"] if missing else [])
    return f"{len(excluded)} of {total} repeats left out (a geometric mean needs positive ratios): {'; '.join(why)}"


def ratio_spread(values: Sequence[float | None]) -> Spread:
    """Geometric mean and log-scale Student-t 95% interval of the positive ``values`` (the rest left out)."""
    kept: list[float] = []
    excluded: list[float | None] = []
    for v in values:
        if v is None or math.isnan(v) or math.isinf(v):
            excluded.append(None)
        elif v <= 0:
            excluded.append(float(v))
        else:
            kept.append(float(v))
    note = _excluded_note(excluded, len(values))
    if not kept:
        return Spread(kind=RATIO, mean=None, ci95=None, values=[], note=note, excluded=tuple(excluded))
    logs = np.log(kept)
    if min(kept) == max(kept):  # exactly one value: keep it exact rather than exp(log(x))
        mean, sd = kept[0], 0.0
    else:
        mean, sd = float(np.exp(logs.mean())), float(np.std(logs, ddof=1))
    if len(kept) < 2:
        return Spread(kind=RATIO, mean=mean, ci95=None, values=kept, note=note, excluded=tuple(excluded))
    half = _t95(len(kept)) * sd / math.sqrt(len(kept))
    lo, hi = (mean, mean) if half == 0 else (float(np.exp(logs.mean() - half)), float(np.exp(logs.mean() + half)))
    return Spread(kind=RATIO, mean=mean, ci95=None, lo=lo, hi=hi, values=kept, note=note, excluded=tuple(excluded))


def complement(ratio: Spread) -> Spread:
    """1 minus a ratio's spread: mean 1 - geometric mean, interval [1 - hi, 1 - lo], per-repeat 1 - r."""
    if ratio.kind != RATIO:
        raise ValueError(f"complement of a {ratio.kind} spread: only a ratio has one")
    def flip(v: float | None) -> float | None:
        return None if v is None else 1.0 - v

    return Spread(kind=COMPLEMENT, mean=flip(ratio.mean), ci95=None, values=[1.0 - v for v in ratio.values],
                  lo=flip(ratio.hi), hi=flip(ratio.lo), note=ratio.note, excluded=ratio.excluded)


def fixed(value: float, digits: int = 2) -> str:
    """``value`` with ``digits`` decimals, or ``digits`` significant digits when that would show a non-zero as 0."""
    if value != 0 and abs(value) < 0.5 * 10.0 ** -digits:
        return f"{value:.{digits}g}"
    return f"{value:.{digits}f}"


def interval_text(s: Spread, digits: int = 2, unit: str = "") -> str | None:
    """The 95% interval as shown: ``± 0.05`` for a half-width, ``[0.90, 3.20]`` for a ratio; None without one."""
    if s.ci95 is not None:
        return f"±{fixed(s.ci95, digits)}{unit}"
    if s.lo is None or s.hi is None:
        return None
    return f"[{fixed(s.lo, digits)}, {fixed(s.hi, digits)}]"
