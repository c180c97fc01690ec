"""How far a percentile of exact samples can be trusted: distribution-free order-statistic intervals.

For the q-quantile ξ of a continuous distribution, the number B of samples at or below ξ is
Binomial(n, q). With the samples sorted, x_(l) <= ξ < x_(u) exactly when l <= B < u, so the interval
[x_(l), x_(u)] covers ξ with probability P(l <= B < u), whatever the distribution (ties, as with
discrete values, only make it more likely). The ranks are equal-tailed: l is the largest with
P(B < l) <= (1 - confidence) / 2 and u the smallest with P(B >= u) <= (1 - confidence) / 2; then one rank
at a time is moved inwards while the coverage P(l <= B < u) stays at least ``confidence``. Rank 0 stands
for -inf and rank n + 1 for +inf: with too few samples the upper rank does not exist and the interval is
not bounded above (``hi`` None, ``bounded`` False).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from bench_plugin.results.summary import Interval

CONFIDENCE: float = 0.95
"""A percentile is bounded when an equal-tailed 95% order-statistic interval exists.

That is, when both P(B = 0) = (1 - q)^n and P(B = n) = q^n are at most (1 - 0.95) / 2 = 0.025, for
B ~ Binomial(n, q): then x_(1) and x_(n) can serve as the ranks, and an interval is found within them.
"""

QUANTILES: tuple[float, ...] = (0.5, 0.95, 0.99)

TIE: float = 1e-12
"""Coverages closer than this are equal: the binomial tails are sums in floating point."""

IntArray = NDArray[np.int64]


def order_ranks(n: ArrayLike, q: float, confidence: float = CONFIDENCE) -> tuple[IntArray, IntArray]:
    """The 1-based ranks (l, u) of the interval [x_(l), x_(u)] for each sample count in ``n`` (each >= 1).

    l is 0 where no lower rank exists and u is n + 1 where no upper rank exists. Where both exist, the
    coverage P(l <= B < u), B ~ Binomial(n, q), is at least ``confidence``.
    """
    _check(q, confidence)
    counts = np.atleast_1d(np.asarray(n, dtype=np.int64))
    if (counts < 1).any():
        raise ValueError(f"sample counts must be at least 1, got {int(counts.min())}")
    half = (1.0 - confidence) / 2.0
    lo = _lower_rank(counts, q, half)
    hi = _upper_rank(counts, q, half)
    return _narrow(counts, q, confidence, lo, hi)


def percentile_interval(values: Sequence[float], q: float, confidence: float = CONFIDENCE) -> Interval:
    """The q-quantile of ``values`` (numpy's linear interpolation) and its order-statistic interval."""
    _check(q, confidence)
    n = len(values)
    if n == 0:
        return Interval(q=q, n=0, estimate=None, lo=None, hi=None, bounded=False, confidence=confidence)
    ordered = np.sort(np.asarray(values, dtype=float))
    lo_rank, hi_rank = _ranks_of(n, q, confidence)
    lo = float(ordered[lo_rank - 1]) if lo_rank >= 1 else None
    hi = float(ordered[hi_rank - 1]) if hi_rank <= n else None
    estimate = float(np.quantile(ordered, q))
    return Interval(q=q, n=n, estimate=estimate, lo=lo, hi=hi, bounded=lo is not None and hi is not None,
                    confidence=confidence)


def intervals(values: Sequence[float], qs: Sequence[float] = QUANTILES,
              confidence: float = CONFIDENCE) -> dict[str, Interval]:
    """``percentile_interval`` for each of ``qs``, keyed "p50", "p95", "p99"."""
    return {quantile_key(q): percentile_interval(values, q, confidence) for q in qs}


def quantile_key(q: float) -> str:
    """The key of quantile ``q`` in tables: 0.95 -> "p95", 0.999 -> "p99.9"."""
    return f"p{round(q * 100, 6):g}"


def samples_needed(q: float, confidence: float = CONFIDENCE) -> int:
    """The fewest samples for which an equal-tailed two-sided interval for the q-quantile exists.

    Rule: the smallest n with q^n <= (1 - confidence) / 2 and (1 - q)^n <= (1 - confidence) / 2, i.e.
    n = ceil(ln((1 - confidence) / 2) / ln(max(q, 1 - q))); at 95%: 6 for P50, 72 for P95, 368 for P99.
    """
    _check(q, confidence)
    half = (1.0 - confidence) / 2.0

    def bounded(k: int) -> bool:  # the rule itself: no binomial quantiles (and no scipy import) needed
        return (1.0 - q) ** k <= half and q ** k <= half

    n = max(1, math.ceil(math.log(half) / math.log(max(q, 1.0 - q))))
    while n > 1 and bounded(n - 1):  # the closed form may be off by one in floating point
        n -= 1
    while not bounded(n):
        n += 1
    return n


def duration_needed_s(q: float, rate_per_s: float, confidence: float = CONFIDENCE) -> float | None:
    """How long a stage at ``rate_per_s`` must run to gather ``samples_needed`` (None for no rate)."""
    if rate_per_s <= 0:
        return None
    return samples_needed(q, confidence) / rate_per_s


def _check(q: float, confidence: float) -> None:
    if not 0.0 < q < 1.0:
        raise ValueError(f"quantile must be between 0 and 1 (exclusive), got {q}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be between 0 and 1 (exclusive), got {confidence}")


@lru_cache(maxsize=4096)
def _ranks_of(n: int, q: float, confidence: float) -> tuple[int, int]:
    lo, hi = order_ranks(n, q, confidence)
    return int(lo[0]), int(hi[0])


def _special() -> Any:
    """scipy.special, imported when first needed (a load generator that never computes an interval, a
    worker, should not pay for it at start-up); the binomial tails come from its incomplete beta functions,
    which import in a third of scipy.stats' time."""
    from scipy import special

    return special


def _below(k: IntArray, n: IntArray, q: float) -> NDArray[np.float64]:
    """P(B <= k): the lower tail left out by a lower rank k + 1 (0 below k = 0, 1 from k = n)."""
    k, n = np.broadcast_arrays(np.asarray(k, dtype=np.int64), np.asarray(n, dtype=np.int64))
    inside = np.asarray(_special().bdtr(np.clip(k, 0, n), n, q), dtype=float)
    return np.where(k < 0, 0.0, np.where(k >= n, 1.0, inside))


def _above(k: IntArray, n: IntArray, q: float) -> NDArray[np.float64]:
    """P(B >= k): the upper tail left out by an upper rank k (1 up to k = 0, 0 past k = n)."""
    k, n = np.broadcast_arrays(np.asarray(k, dtype=np.int64), np.asarray(n, dtype=np.int64))
    inside = np.asarray(_special().bdtrc(np.clip(k - 1, 0, n), n, q), dtype=float)
    return np.where(k <= 0, 1.0, np.where(k > n, 0.0, inside))


def _tail_rank(p: float, n: IntArray, q: float) -> IntArray:
    """A first guess at the binomial p-quantile: the continuous solution of P(B <= k) = p, rounded up;
    the rank searches below step from it to the exact rank."""
    guess = np.nan_to_num(np.asarray(_special().bdtrik(p, n, q), dtype=float), nan=0.0)
    return np.ceil(guess).astype(np.int64)


def _lower_rank(n: IntArray, q: float, half: float) -> IntArray:
    """The largest l in 0..n with P(B < l) <= half (l = 0 always qualifies: x_(0) is -inf)."""
    rank = np.clip(_tail_rank(half, n, q), 0, n)
    while (up := (rank < n) & (_below(rank, n, q) <= half)).any():
        rank = rank + up
    while (down := (rank > 0) & (_below(rank - 1, n, q) > half)).any():
        rank = rank - down
    return rank


def _upper_rank(n: IntArray, q: float, half: float) -> IntArray:
    """The smallest u in 1..n + 1 with P(B >= u) <= half (u = n + 1 always qualifies: x_(n+1) is +inf)."""
    rank = np.clip(_tail_rank(1.0 - half, n, q) + 1, 1, n + 1)
    while (down := (rank > 1) & (_above(rank - 1, n, q) <= half)).any():
        rank = rank - down
    while (up := (rank <= n) & (_above(rank, n, q) > half)).any():
        rank = rank + up
    return rank


def _coverage(n: IntArray, q: float, lo: IntArray, hi: IntArray) -> NDArray[np.float64]:
    """P(lo <= B < hi)."""
    return 1.0 - _below(lo - 1, n, q) - _above(hi, n, q)


def _narrow(n: IntArray, q: float, confidence: float, lo: IntArray, hi: IntArray) -> tuple[IntArray, IntArray]:
    """Move bounded ranks inwards one at a time, the move keeping more coverage first
    (the lower rank on a tie), while it stays >= confidence."""
    bounded = (lo >= 1) & (hi <= n)
    while True:
        raise_lo = _coverage(n, q, lo + 1, hi)
        drop_hi = _coverage(n, q, lo, hi - 1)
        room = bounded & (hi - lo >= 2)
        can_lo = room & (raise_lo >= confidence)
        can_hi = room & (drop_hi >= confidence)
        if not (can_lo | can_hi).any():
            return lo, hi
        # equal coverage (the median's symmetric ranks) up to rounding: raise the lower rank, whatever the noise
        take_lo = can_lo & (~can_hi | (raise_lo >= drop_hi - TIE))
        lo = lo + take_lo
        hi = hi - (can_hi & ~take_lo)
