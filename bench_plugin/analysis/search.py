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

3. sustain (``sustain=True``): once found (or passed up to the maximum), hold ``lo`` for a longer stage.
   If it holds, the boundary is confirmed. If not, ``lo`` becomes the new ``hi``, the highest scale that
   passed below it becomes ``lo``, and the search goes on (bisecting, or bracketing down) to a new
   ``lo`` that is held in turn; after ``MAX_SUSTAINS`` failed holds it stops, unconfirmed.

4. warm start (``prior``, the bracket an earlier repeat ended with): the search starts at the prior ``lo``,
   then, if it passes, tries the prior ``hi``; a fail there closes the bracket at once, often already within
   ``precision``. Whatever these two probes give, the search goes on from them as above (a failing ``lo``
   brackets down, a passing ``hi`` up), so the boundary still rests on this repeat's own probes alone; only
   where it looks first is borrowed. Where the prior bracket no longer holds the boundary, the search steps from it by
   one precision's width (``1 / (1 - precision)``) and squares the step after each one, up to ``growth``: a boundary
   that moved a little is bracketed in a step or two, one that moved far in a few more than a cold search's.
   :func:`prior_bracket` picks the bracket to borrow. With ``sustain``, the
   prior ``lo`` is held first: its probe is the hold (the longer stage, decided as a hold is). If it holds, it
   is the search's ``lo`` and its hold both, so a search that ends with that ``lo`` is not held again; if not,
   it is a failed probe there, and the search goes on (and holds the ``lo`` it ends with) as it would have.

Several rays (load mixes) are searched in one segment by :class:`RaySearches`: each ray has its own
search, and each next stage goes to the ray whose boundary is least known (the widest relative bracket,
a ray not yet bracketed first; of equals, the one run least), so a ``budget`` of stage-runs, where one
is set, is spent evenly over the frontier rather than on the first rays.

A probe that its load generator's lateness leaves unjudged (analysis/probe.py: a failure that the lateness
may have made) ends the search there (``record(..., limited=why)``): status ``generator-limited``, keeping the
bracket its judged probes gave, so the boundary is at least ``lo``. :func:`judged_result` applies the same
rule afterwards to a search recorded before probes were judged so.

``fixed_sweep_runs`` says how many stages an evenly spaced sweep over the same range would need for
the same relative precision, so a report can state what the search saved.
"""

from __future__ import annotations

import math

from bench_plugin.results.summary import BorrowedBracket, SearchProbe, SearchResult
from bench_plugin.results.words import Hold, Phase, ProbeOutcome, SearchStatus

BUDGET_SPENT = "budget spent"
"""A search's ``stopped`` where its segment's budget of stage-runs (``search.budget``) was spent."""
MAX_SUSTAINS = 2
"""Failed holds after which a search stops, its boundary unconfirmed."""


class BoundarySearch:
    """Proposes stage scales that bracket and then bisect the boundary; see the module docstring."""

    def __init__(self, mix: dict[str, float], start: float, maximum: float, precision: float, *,
                 growth: float = 2.0, minimum: float | None = None, sustain: bool = False, ray: str = "mix",
                 prior: tuple[float | None, float | None] | None = None) -> None:
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
        self.ray = ray
        self.sustain = sustain
        self.held: Hold | None = None
        """How the hold of the boundary went (Hold), or None (not yet / none)."""
        self.undecided = 0
        self.stopped: str | None = None
        self._passes: list[float] = []
        self._failed_holds = 0
        self._phase: Phase = Phase.PROBE
        self._prior = [scale for scale in (prior or (None, None)) if scale is not None and 0 < scale <= maximum]
        """Where a warm start looks first (module docstring, 4), in order; emptied as the search goes."""
        self._held_at: float | None = None
        """The prior ``lo`` a warm start's opening hold held, and how (confirmed or undecided)."""
        self._held_as: Hold | None = None
        self._opening = bool(sustain and prior and prior[0] is not None and self._prior
                             and self._prior[0] == prior[0])
        """The pending proposal is a warm start's hold of the prior ``lo`` (module docstring, 4)."""
        if self._opening:
            self._phase = Phase.SUSTAIN
        self._step = min(growth, 1 / (1 - precision)) if self._prior else growth
        """The factor of the next bracketing step: ``growth``, or after a warm start one precision's step, squared
        after each step up to ``growth`` (module docstring, 4)."""
        self._pending: float | None = self._prior.pop(0) if self._prior else start
        self._status: SearchStatus = SearchStatus.BRACKETING

    def offered(self, scale: float) -> dict[str, float]:
        """The per-class loads of a stage at ``scale``."""
        return {name: rate * scale for name, rate in self.mix.items()}

    def propose(self) -> float | None:
        """The next scale to run, or None when the search is done; the same until it is recorded."""
        return self._pending

    @property
    def phase(self) -> Phase:
        """What the pending proposal is: a probe, or a sustain (the hold of the boundary found)."""
        return self._phase

    @property
    def width(self) -> float:
        """How little is known of the boundary: the bracket's relative width, infinite while it is open."""
        if self.lo is None or self.hi is None:
            return math.inf
        return (self.hi - self.lo) / self.hi

    def record(self, scale: float, passed: bool, *, decided: bool = True, runs: int = 1,
               limited: str | None = None) -> None:
        """The outcome of running the proposed ``scale`` (``decided``: by its confidence bounds, not only its point
        estimate; ``runs``: the stage-runs it took, extensions included; ``limited``: why the load generator could
        not send it, which ends the search unjudged there)."""
        if self._pending is None or not math.isclose(scale, self._pending, rel_tol=1e-12):
            raise ValueError(f"scale {scale} was not proposed (the pending proposal is {self._pending})")
        self.runs += runs
        if limited is not None:
            self._status, self._pending = SearchStatus.GENERATOR_LIMITED, None
            self.stopped = generator_stop(scale, limited)
            return
        self.undecided += not decided
        opening, self._opening = self._opening, False
        if self._phase == Phase.SUSTAIN and passed:
            if not opening:
                self.held, self._pending = Hold.CONFIRMED if decided else Hold.UNDECIDED, None
                return
            # a warm start's opening hold: also its scale's probe; the hold's outcome is the search's once it ends there
            self._held_at, self._held_as = scale, Hold.CONFIRMED if decided else Hold.UNDECIDED
            self.lo = scale
            self._passes.append(scale)
        elif self._phase == Phase.SUSTAIN and not opening:
            self._failed_holds += 1
            self._passes = [p for p in self._passes if p < scale]
            self.hi = scale
            self.lo = max(self._passes) if self._passes else None
            self.held = Hold.FAILED
        elif passed:
            self.lo = scale
            self._passes.append(scale)
        else:
            self.hi = scale
        self._phase = Phase.PROBE
        self._pending = self._next()
        found = self._status in (SearchStatus.FOUND, SearchStatus.ABOVE_MAXIMUM) and self.lo is not None
        if self._pending is None and found and self._held_at is not None and self._held_at == self.lo:
            self.held = self._held_as  # the opening hold held this lo: it is not held again
        elif self._pending is None and self.sustain and found and self._failed_holds < MAX_SUSTAINS:
            self._phase, self._pending = Phase.SUSTAIN, self.lo

    def stop(self, why: str) -> None:
        """End the search where it stands (its budget is spent)."""
        if self._pending is not None:
            self.stopped, self._pending = why, None

    def _next(self) -> float | None:
        lo, hi = self.lo, self.hi
        while self._prior:  # a warm start's next look, where it is still inside the bracket
            scale = self._prior.pop(0)
            if (lo is None or scale > lo) and (hi is None or scale < hi):
                return scale
        if lo is not None and hi is not None:
            if (hi - lo) / hi <= self.precision:
                self._status = SearchStatus.FOUND
                return None
            self._status = SearchStatus.BISECTING
            return (lo + hi) / 2
        step = self._step
        if hi is None:
            assert lo is not None
            if lo >= self.maximum:
                self._status = SearchStatus.ABOVE_MAXIMUM
                return None
            self._step = min(self.growth, step * step)
            return min(lo * step, self.maximum)
        if hi / step < self.minimum:
            self._status = SearchStatus.BELOW_MINIMUM
            return None
        self._status = SearchStatus.BRACKETING
        self._step = min(self.growth, step * step)
        return hi / step

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
            ray=self.ray, sustain=self.held, undecided=self.undecided, stopped=self.stopped,
        )


class RaySearches:
    """One BoundarySearch per ray of a segment, the next stage going to the least known ray (module docstring)."""

    def __init__(self, rays: dict[str, dict[str, float]], start: float, maximum: float, precision: float, *,
                 growth: float = 2.0, minimum: float | None = None, sustain: bool = False,
                 budget: int | None = None,
                 priors: dict[str, tuple[float | None, float | None]] | None = None) -> None:
        """``priors``: ray -> the bracket to start it from (a warm start, BoundarySearch's ``prior``)."""
        if not rays:
            raise ValueError("no ray to search")
        priors = priors or {}
        self.searches = {name: BoundarySearch(mix, start, maximum, precision, growth=growth, minimum=minimum,
                                              sustain=sustain, ray=name, prior=priors.get(name))
                         for name, mix in rays.items()}
        self.budget = budget

    @property
    def runs(self) -> int:
        """Stage-runs used over every ray."""
        return sum(s.runs for s in self.searches.values())

    def propose(self) -> BoundarySearch | None:
        """The search whose pending scale runs next (its ``propose()``, ``phase``), or None when all are done."""
        if self.budget is not None and self.runs >= self.budget:
            for search in self.searches.values():
                search.stop(BUDGET_SPENT)
        pending = [s for s in self.searches.values() if s.propose() is not None]
        if not pending:
            return None
        # the widest bracket; of equals, the ray with the fewest runs; then the first (``max`` keeps the first)
        return max(pending, key=lambda s: (s.width, -s.runs))

    def results(self, segment: int) -> list[SearchResult]:
        """Each ray's result, in the rays' order."""
        return [search.result(segment) for search in self.searches.values()]


def prior_bracket(results: list[SearchResult]) -> tuple[float | None, float | None] | None:
    """The bracket a warm start borrows from a ray's earlier results (in the order they ended): the latest one
    whose search ended with a bracket judged on its own (found, above the maximum or below the minimum); None
    where there is none (a search cut short, or stopped by its load generator, tells too little)."""
    for result in reversed(results):
        judged = result.status in (SearchStatus.FOUND, SearchStatus.ABOVE_MAXIMUM, SearchStatus.BELOW_MINIMUM)
        if judged and (result.lo, result.hi) != (None, None):
            return result.lo, result.hi
    return None


def left_bracket(results: list[SearchResult],
                 probes: list[tuple[float, bool]]) -> tuple[float | None, float | None] | None:
    """Where a ray's search in an earlier campaign left its boundary, for another campaign to start from
    (``--warm-start-from``): the bracket of the latest of its ``results`` that has one (however the search ended),
    else the one its ``probes`` (scale, taken as passed) gave, cut short: the lowest failure and the highest pass
    below it. None where neither says anything. Only a start: the boundary rests on the new campaign's probes."""
    for result in reversed(results):
        if (result.lo, result.hi) != (None, None):
            return result.lo, result.hi
    fails = [scale for scale, passed in probes if not passed]
    hi = min(fails) if fails else None
    passes = [scale for scale, passed in probes if passed and (hi is None or scale < hi)]
    lo = max(passes) if passes else None
    return (lo, hi) if (lo, hi) != (None, None) else None


def borrowed_start(brackets: list[BorrowedBracket], arm: str, ray: str,
                   mix: dict[str, float]) -> tuple[float | None, float | None] | None:
    """The bracket an earlier campaign left ``arm``'s ``ray`` in (``--warm-start-from``, launch/warm_from.py), where
    the ray loads ``mix`` (class -> rate at scale 1) in both; None where it left none."""
    for bracket in brackets:
        if bracket.arm == arm and bracket.ray == ray and bracket.mix == mix:
            return bracket.lo, bracket.hi
    return None


def generator_stop(scale: float, why: str) -> str:
    """A search's ``stopped`` where its load generator fell behind at ``scale``."""
    return f"the load generator fell behind at x{scale:.4g} ({why})"


def judged_result(result: SearchResult, probes: list[SearchProbe]) -> SearchResult:
    """``result`` as the search would have ended had it stopped at its first probe left unjudged because its load
    generator fell behind (analysis/probe.py; ``probes``: the search's, in the order run): the bracket of its judged
    probes before that one (``hi`` the lowest failure, ``lo`` the highest pass below it), status
    ``generator-limited``. ``result`` itself where no probe went unjudged, or where the search already stopped there."""
    first = next((i for i, p in enumerate(probes)
                  if p.decision is not None and p.decision.outcome == ProbeOutcome.GENERATOR_LIMITED), None)
    if first is None or result.status == SearchStatus.GENERATOR_LIMITED:
        return result
    judged, probe = probes[:first], probes[first]
    fails = [p.scale for p in judged if not p.passed]
    hi = min(fails) if fails else None
    passes = [p.scale for p in judged if p.passed and (hi is None or p.scale < hi)]
    lo = max(passes) if passes else None
    # a first probe held is a warm start's opening hold, whose outcome the search takes for its own only where it
    # ends at that lo, which one stopped so never does
    holds = [p for p in judged[1:] if p.phase == Phase.SUSTAIN]
    held = None
    if holds:
        last = holds[-1]
        outcome = last.decision.outcome if last.decision is not None else ProbeOutcome.PASS
        held = (Hold.FAILED if not last.passed else Hold.UNDECIDED if outcome == ProbeOutcome.UNDECIDED
                else Hold.CONFIRMED)
    assert probe.decision is not None
    return result.model_copy(update={
        "status": SearchStatus.GENERATOR_LIMITED, "lo": lo, "hi": hi,
        "estimate": (lo + hi) / 2 if lo is not None and hi is not None else lo if lo is not None else hi,
        "precision": (hi - lo) / hi if lo is not None and hi is not None else None, "sustain": held,
        "undecided": sum(1 for p in judged if p.decision is not None and p.decision.outcome == ProbeOutcome.UNDECIDED),
        "stopped": generator_stop(probe.scale, probe.decision.note or "")})


def segment_rays(rays: dict[str, dict[str, float]], classes: list[str]) -> dict[str, dict[str, float]]:
    """The rays a segment measuring ``classes`` searches: each ray restricted to those classes, a ray that loads
    none of them left out, and a ray along the same direction as an earlier one left out (its boundary follows
    from the earlier one's; analysis/envelope.py). An exclusive arm's segment of one class keeps one ray."""
    out: dict[str, dict[str, float]] = {}
    seen: list[dict[str, float]] = []
    for name, mix in rays.items():
        mine = {c: r for c, r in mix.items() if c in classes and r > 0}
        if not mine:
            continue
        if any(same_direction(mine, other) for other in seen):
            continue
        seen.append(mine)
        out[name] = mine
    return out


def same_direction(a: dict[str, float], b: dict[str, float]) -> bool:
    """Whether two mixes load the same classes in the same proportions (one is the other scaled)."""
    if set(a) != set(b):
        return False
    first = next(iter(a))
    factor = b[first] / a[first]
    return all(math.isclose(a[c] * factor, b[c], rel_tol=1e-9) for c in a)


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
