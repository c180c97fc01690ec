"""Search: an adaptive plan of stage loads that finds the operating boundary in few stage-runs.

A fixed sweep spends most of its stages far from the boundary. This planner scales a fixed load mix
(per-class rates at scale 1.0) and asks for one stage at a time:

1. bracket: run the start scale, then multiply by ``growth`` (default 2) after every pass, until a
   stage fails or the maximum passes (the boundary is then above the maximum). If the start itself
   fails, divide by ``growth`` until a stage passes or the scale would fall below ``minimum`` (the
   boundary is then below it).
2. bisect: run the midpoint of the last pass ``lo`` and the first fail ``hi`` until
   ``(hi - lo) / hi <= precision``; the estimate is the midpoint of the final bracket.

It is pure: no I/O, no clock. The caller runs each proposed scale as one stage (loads from
``offered(scale)``), judges it (every class within its SLOs and error budget) and records the result::

    search = BoundarySearch({"llm": 1.0, "embedding": 4.0}, start=1.0, maximum=32.0, precision=0.05)
    while (scale := search.propose()) is not None:
        search.record(scale, run_stage(search.offered(scale)))
    result = search.result(segment=0)

``fixed_sweep_runs`` says how many stages an evenly spaced sweep over the same range would need for
the same relative precision, so a report can state what the search saved.
"""

from __future__ import annotations

import math

from bench_plugin.results.summary import SearchResult

BRACKETING = "bracketing"
BISECTING = "bisecting"
FOUND = "found"
ABOVE_MAXIMUM = "above the maximum"
BELOW_MINIMUM = "below the minimum"


class BoundarySearch:
    """Proposes stage scales that bracket and then bisect the boundary; see the module docstring."""

    def __init__(self, mix: dict[str, float], start: float, maximum: float, precision: float, *,
                 growth: float = 2.0, minimum: float | None = None) -> None:
        if start <= 0 or maximum < start:
            raise ValueError(f"need 0 < start <= maximum (got start={start}, maximum={maximum})")
        if not 0 < precision < 1:
            raise ValueError(f"precision is a fraction between 0 and 1 (got {precision})")
        if growth <= 1:
            raise ValueError(f"growth must be above 1 (got {growth})")
        self.mix = dict(mix)
        self.start, self.maximum, self.precision, self.growth = start, maximum, precision, growth
        self.minimum = minimum if minimum is not None else start / growth**3
        """Lowest scale tried when the start already fails (default: three growth steps down)."""
        self.lo: float | None = None
        self.hi: float | None = None
        self.runs = 0
        self._pending: float | None = start
        self._status = BRACKETING

    def offered(self, scale: float) -> dict[str, float]:
        """The per-class loads of a stage at ``scale``."""
        return {name: rate * scale for name, rate in self.mix.items()}

    def propose(self) -> float | None:
        """The next scale to run, or None when the search is done; the same until it is recorded."""
        return self._pending

    def record(self, scale: float, passed: bool) -> None:
        """The outcome of running the proposed ``scale``."""
        if self._pending is None or not math.isclose(scale, self._pending, rel_tol=1e-12):
            raise ValueError(f"scale {scale} was not proposed (the pending proposal is {self._pending})")
        self.runs += 1
        if passed:
            self.lo = scale
        else:
            self.hi = scale
        self._pending = self._next()

    def _next(self) -> float | None:
        lo, hi = self.lo, self.hi
        if lo is not None and hi is not None:
            if (hi - lo) / hi <= self.precision:
                self._status = FOUND
                return None
            self._status = BISECTING
            return (lo + hi) / 2
        if hi is None:
            assert lo is not None
            if lo >= self.maximum:
                self._status = ABOVE_MAXIMUM
                return None
            return min(lo * self.growth, self.maximum)
        if hi / self.growth < self.minimum:
            self._status = BELOW_MINIMUM
            return None
        return hi / self.growth

    def result(self, segment: int) -> SearchResult:
        """Where the search stands, as the campaign records it for ``segment``: the bracket, the estimate,
        the precision reached, the stage-runs used and what an even sweep would have needed."""
        lo, hi = self.lo, self.hi
        estimate = (lo + hi) / 2 if lo is not None and hi is not None else lo if lo is not None else hi
        return SearchResult(
            segment=segment, classes=list(self.mix), mix=self.offered(1.0), status=self._status, lo=lo, hi=hi,
            estimate=estimate, precision=(hi - lo) / hi if lo is not None and hi is not None else None,
            runs=self.runs,
            fixed_sweep_runs=fixed_sweep_runs(self.start, self.maximum, self.precision, at=estimate),
        )


def fixed_sweep_runs(start: float, maximum: float, precision: float, at: float | None = None) -> int:
    """Stages an evenly spaced sweep from ``start`` to ``maximum`` needs to reach ``precision``.

    A sweep brackets the boundary between neighbouring stages ``lo`` and ``hi = lo + step``; for
    ``(hi - lo) / hi <= precision`` wherever the boundary may lie, the step must suit the lowest
    possible ``hi`` (``start + step``): ``step <= precision * start / (1 - precision)``. Given ``at``,
    the boundary already found, the step only has to suit it: ``step <= precision * at``, a fairer
    count when the search's own estimate is known. Every stage is counted: a sweep plans them ahead.
    """
    if start <= 0 or maximum < start or not 0 < precision < 1:
        raise ValueError("need 0 < start <= maximum and 0 < precision < 1")
    step = precision * at if at is not None else precision * start / (1 - precision)
    # The small tolerance keeps a step that divides the range exactly from adding a stage through rounding.
    return math.ceil((maximum - start) / step - 1e-9) + 1
