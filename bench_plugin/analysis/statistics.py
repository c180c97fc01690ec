"""Statistics on exact samples and over repeats.

Percentiles are computed from every sample (numpy's default linear interpolation between order
statistics), never from histogram buckets: Locust's own buckets round to 10 ms above 100 ms and to
100 ms above 1 s, which is fine for a live view and too coarse for a comparison. Figures over repeats
carry a mean and a 95% confidence interval from Student's t (n - 1 degrees of freedom); with one
repeat there is no interval, and the report says so.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as scipy_stats

PERCENTILES: tuple[int, ...] = (50, 90, 95, 99)


def percentiles(values: Sequence[float]) -> dict[str, float | None]:
    """P50/P90/P95/P99 and the mean of ``values`` (all None when there are none)."""
    if len(values) == 0:
        return {**{f"p{p}": None for p in PERCENTILES}, "mean": None}
    arr = np.asarray(values, dtype=float)
    out: dict[str, float | None] = {f"p{p}": float(v) for p, v in zip(PERCENTILES, np.percentile(arr, PERCENTILES),
                                                                       strict=True)}
    out["mean"] = float(arr.mean())
    return out


@dataclass(frozen=True)
class Spread:
    """A figure over repeats: its mean, the 95% CI half-width (None below two values) and the values."""

    mean: float | None
    ci95: float | None
    values: list[float]

    def to_dict(self) -> dict[str, object]:
        """JSON-ready form."""
        return {"mean": self.mean, "ci95": self.ci95, "n": len(self.values), "values": self.values}


def spread(values: Sequence[float | None]) -> Spread:
    """Mean and Student-t 95% CI half-width of the non-missing ``values``."""
    kept = [float(v) for v in values if v is not None and not math.isnan(v)]
    if not kept:
        return Spread(None, None, [])
    mean = float(np.mean(kept))
    if len(kept) < 2:
        return Spread(mean, None, kept)
    sem = float(np.std(kept, ddof=1)) / math.sqrt(len(kept))
    return Spread(mean, float(scipy_stats.t.ppf(0.975, len(kept) - 1)) * sem, kept)
