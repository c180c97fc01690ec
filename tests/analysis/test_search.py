"""The adaptive boundary search: brackets, bisects, and needs far fewer stages than a fixed sweep."""

from __future__ import annotations

from collections.abc import Callable
from itertools import pairwise

import pytest

from bench_plugin.analysis.search import (
    BUDGET_SPENT,
    MAX_SUSTAINS,
    BoundarySearch,
    RaySearches,
    borrowed_start,
    fixed_sweep_runs,
    judged_result,
    left_bracket,
    prior_bracket,
    segment_rays,
)
from bench_plugin.results.summary import BorrowedBracket, ProbeDecision, SearchProbe, SearchResult
from bench_plugin.results.words import Hold, Phase, SearchStatus


def run(search: BoundarySearch, threshold: float) -> list[float]:
    """Drive the search with a stage that passes iff its scale is below ``threshold``."""
    asked = []
    while (scale := search.propose()) is not None:
        asked.append(scale)
        search.record(scale, scale < threshold)
    return asked


def test_finds_a_known_threshold_within_the_requested_precision() -> None:
    search = BoundarySearch({"llm": 2.0, "embedding": 8.0}, start=1.0, maximum=64.0, precision=0.05)
    asked = run(search, 3.7)
    assert asked[:3] == [1.0, 2.0, 4.0]  # bracketing by doubling, then bisecting [2, 4]
    result = search.result(segment=0)
    assert result.status == SearchStatus.FOUND and result.lo is not None and result.hi is not None
    assert result.lo < 3.7 <= result.hi
    assert result.precision is not None and result.precision <= 0.05
    assert result.estimate == pytest.approx((result.lo + result.hi) / 2)
    assert abs(result.estimate - 3.7) / 3.7 <= 0.05
    assert result.runs == len(asked) == 7
    assert search.offered(result.lo) == {"llm": 2.0 * result.lo, "embedding": 8.0 * result.lo}


def test_uses_fewer_stage_runs_than_the_equivalent_fixed_sweep() -> None:
    for threshold in (1.3, 3.7, 11.0, 50.0):
        search = BoundarySearch({"llm": 1.0}, start=1.0, maximum=64.0, precision=0.05)
        run(search, threshold)
        result = search.result(segment=0)
        assert result.estimate is not None and result.runs < fixed_sweep_runs(1.0, 64.0, 0.05, at=result.estimate)
        assert result.runs < fixed_sweep_runs(1.0, 64.0, 0.05)


def test_fixed_sweep_count_by_hand() -> None:
    # step <= 0.1 * 1 / 0.9 = 1/9: 9 steps per unit over [1, 2] -> 10 stages
    assert fixed_sweep_runs(1.0, 2.0, 0.1) == 10
    # at a boundary of 5, step <= 0.5: [1, 11] in 20 steps -> 21 stages
    assert fixed_sweep_runs(1.0, 11.0, 0.1, at=5.0) == 21


def test_a_boundary_above_the_maximum_or_below_the_minimum_is_said_so() -> None:
    up = BoundarySearch({"asr": 1.0}, start=1.0, maximum=10.0, precision=0.1)
    assert run(up, 100.0) == [1.0, 2.0, 4.0, 8.0, 10.0]
    found = up.result(segment=0)
    assert found.status == SearchStatus.ABOVE_MAXIMUM and found.lo == 10.0 and found.hi is None
    down = BoundarySearch({"asr": 1.0}, start=1.0, maximum=10.0, precision=0.1)
    assert run(down, 0.0) == [1.0, 0.5, 0.25, 0.125]
    assert down.result(segment=0).status == SearchStatus.BELOW_MINIMUM and down.result(segment=0).lo is None


def test_a_failing_start_brackets_downwards_then_bisects() -> None:
    search = BoundarySearch({"llm": 1.0}, start=4.0, maximum=16.0, precision=0.02)
    asked = run(search, 1.5)
    assert asked[:3] == [4.0, 2.0, 1.0]
    result = search.result(segment=0)
    assert result.status == SearchStatus.FOUND and result.lo is not None and result.lo < 1.5 <= (result.hi or 0)


def test_only_the_proposed_scale_can_be_recorded_and_bad_settings_are_refused() -> None:
    search = BoundarySearch({"llm": 1.0}, start=1.0, maximum=4.0, precision=0.1)
    assert search.propose() == search.propose() == 1.0
    with pytest.raises(ValueError, match="not proposed"):
        search.record(3.0, True)
    with pytest.raises(ValueError):
        BoundarySearch({"llm": 1.0}, start=2.0, maximum=1.0, precision=0.1)
    with pytest.raises(ValueError):
        BoundarySearch({"llm": 1.0}, start=1.0, maximum=2.0, precision=1.5)


def test_a_found_boundary_is_held_once_and_confirmed() -> None:
    search = BoundarySearch({"llm": 1.0}, start=1.0, maximum=64.0, precision=0.1, sustain=True)
    while (scale := search.propose()) is not None and search.phase == Phase.PROBE:
        search.record(scale, scale < 3.7)
    assert search.phase == Phase.SUSTAIN and scale == search.lo
    search.record(scale, True)
    assert search.propose() is None
    result = search.result(segment=0)
    assert result.status == SearchStatus.FOUND and result.sustain == Hold.CONFIRMED
    assert result.lo is not None and result.lo < 3.7


def test_a_boundary_that_does_not_hold_is_searched_again_below_it() -> None:
    """The probes pass below 3.7, but a longer hold fails above 3.3: the search moves down and holds again."""
    search = BoundarySearch({"llm": 1.0}, start=1.0, maximum=64.0, precision=0.1, sustain=True)
    held = []
    while (scale := search.propose()) is not None:
        if search.phase == Phase.SUSTAIN:
            held.append(scale)
            search.record(scale, scale < 3.3)
        else:
            search.record(scale, scale < 3.7)
    result = search.result(segment=0)
    assert len(held) == 2 and held[0] > 3.3 > held[1]
    assert result.sustain == Hold.CONFIRMED and result.lo == held[1]
    assert result.hi is not None and result.hi <= held[0] and (result.hi - result.lo) / result.hi <= 0.1


def test_a_boundary_that_never_holds_stops_unconfirmed() -> None:
    search = BoundarySearch({"llm": 1.0}, start=1.0, maximum=64.0, precision=0.1, sustain=True)
    holds = 0
    while (scale := search.propose()) is not None:
        holds += search.phase == Phase.SUSTAIN
        search.record(scale, search.phase == Phase.PROBE and scale < 3.7)
    result = search.result(segment=0)
    assert holds == MAX_SUSTAINS and result.sustain == Hold.FAILED


def test_undecided_probes_and_extension_runs_are_counted() -> None:
    search = BoundarySearch({"llm": 1.0}, start=1.0, maximum=2.0, precision=0.1)
    search.record(1.0, True, decided=False, runs=3)
    search.record(2.0, True)
    result = search.result(segment=0)
    assert result.status == SearchStatus.ABOVE_MAXIMUM and result.runs == 4
    assert result.undecided == 1 and result.sustain is None


def test_the_least_known_ray_runs_next_and_a_budget_stops_every_ray() -> None:
    rays = {"mix": {"llm": 1.0, "embedding": 4.0}, "llm": {"llm": 1.0}}
    searches = RaySearches(rays, 1.0, 64.0, 0.05)
    thresholds = {"mix": 3.0, "llm": 20.0}
    chosen = []
    while (search := searches.propose()) is not None:
        pending = [s.width for s in searches.searches.values() if s.propose() is not None]
        assert search.width == max(pending), "the ray whose boundary is least known goes first"
        chosen.append(search.ray)
        scale = search.propose()
        assert scale is not None
        search.record(scale, scale < thresholds[search.ray])
    assert chosen[:2] == ["mix", "llm"], "both brackets are open: the first ray, then the other (still open)"
    results = {r.ray: r for r in searches.results(segment=0)}
    assert results["mix"].status == results["llm"].status == SearchStatus.FOUND
    budget = RaySearches(rays, 1.0, 64.0, 0.05, budget=5)
    while (search := budget.propose()) is not None:
        scale = search.propose()
        assert scale is not None
        search.record(scale, scale < thresholds[search.ray])
    assert budget.runs == 5
    assert {r.stopped for r in budget.results(segment=0)} == {BUDGET_SPENT}
    assert {r.ray for r in budget.results(segment=0) if r.runs} == {"mix", "llm"}, "runs spread over the rays"


def test_a_segment_searches_each_direction_of_its_classes_once() -> None:
    rays = {"mix": {"llm": 1.0, "embedding": 4.0}, "llm": {"llm": 1.0}, "embedding": {"embedding": 4.0},
            "llm-heavy": {"llm": 3.0, "embedding": 1.0}, "double": {"llm": 2.0, "embedding": 8.0}}
    assert segment_rays(rays, ["llm", "embedding"]) == {
        "mix": {"llm": 1.0, "embedding": 4.0}, "llm": {"llm": 1.0}, "embedding": {"embedding": 4.0},
        "llm-heavy": {"llm": 3.0, "embedding": 1.0}}
    assert segment_rays(rays, ["llm"]) == {"mix": {"llm": 1.0}}
    assert segment_rays(rays, ["asr"]) == {}


BEHIND = "CPU-bound: load generator local used 1.03 cores (limit 0.9)"


def test_a_probe_its_load_generator_left_unjudged_ends_the_search_at_the_bracket_it_had() -> None:
    """Passes to 8, a failure at 16 the lateness may have made: the boundary is at least 8, and not searched on."""
    search = BoundarySearch({"embedding": 15.0}, start=1.0, maximum=64.0, precision=0.1, sustain=True)
    for scale in (1.0, 2.0, 4.0, 8.0):
        search.record(scale, True)
    search.record(16.0, False, runs=2, limited=BEHIND)
    result = search.result(segment=0)
    assert search.propose() is None
    assert (result.status, result.lo, result.hi, result.estimate, result.runs) == \
        (SearchStatus.GENERATOR_LIMITED, 8.0, None, 8.0, 6)
    assert result.stopped == f"the load generator fell behind at x16 ({BEHIND})" and result.sustain is None


def test_a_ray_its_load_generator_stopped_leaves_the_others_searching() -> None:
    rays = RaySearches({"llm": {"llm": 1.0}, "embedding": {"embedding": 10.0}}, 1.0, 4.0, 0.2)
    while (search := rays.propose()) is not None:
        scale = search.propose()
        assert scale is not None
        search.record(scale, scale < 3.0, limited=BEHIND if search.ray == "embedding" and scale >= 2 else None)
    llm, embedding = rays.results(segment=0)
    assert llm.status == SearchStatus.FOUND
    assert embedding.status == SearchStatus.GENERATOR_LIMITED and embedding.lo == 1.0


def probe(scale: float, passed: bool, *, phase: str = Phase.PROBE, outcome: str | None = None,
          note: str | None = None) -> SearchProbe:
    outcome = outcome or ("pass" if passed else "fail")
    return SearchProbe(segment=0, ray="mix", phase=phase, scale=scale, passed=passed, stages=[],
                       decision=ProbeDecision(outcome=outcome, point=passed, confidence=0.95, note=note))


JUDGED = {"status", "lo", "hi", "estimate", "precision", "sustain", "undecided", "stopped"}
"""What judged_result must give as the live search gives it."""


def passes_shorter(scale: float, phase: str) -> bool:
    """A probe passes below 3.7, a hold (a longer stage) below 3.3."""
    return scale < (3.3 if phase == Phase.SUSTAIN else 3.7)


def judged_and_live(make: Callable[[], BoundarySearch], unjudged_at: int
                    ) -> tuple[SearchResult, SearchResult, BoundarySearch, list[SearchProbe]]:
    """A search from ``make`` run to its end (``passes_shorter``), then judged afterwards with its probe ``unjudged_at``
    unjudged, and the same search live, stopped there: (judged, live, the search run, its probes)."""
    old, probes = make(), []
    while (scale := old.propose()) is not None:
        phase = old.phase
        probes.append(probe(scale, passes_shorter(scale, phase), phase=phase))
        old.record(scale, passes_shorter(scale, phase))
    assert len(probes) > unjudged_at
    live = make()
    for i, p in enumerate(probes[:unjudged_at + 1]):
        assert live.propose() == p.scale
        live.record(p.scale, p.passed, limited=BEHIND if i == unjudged_at else None)
    unjudged = probes[unjudged_at].model_copy(update={"passed": False, "decision": ProbeDecision(
        outcome="generator-limited", point=False, confidence=0.95, note=BEHIND)})
    after = judged_result(old.result(segment=0), [*probes[:unjudged_at], unjudged, *probes[unjudged_at + 1:]])
    return after, live.result(segment=0), old, probes


@pytest.mark.parametrize("unjudged_at", [0, 2, 4, 5, 6, 7, 8])
def test_a_search_judged_afterwards_ends_as_the_live_search_ends(unjudged_at: int) -> None:
    """judged_result on a search recorded before probes were judged so gives what the search gives live, wherever
    the first unjudged probe is: bracketing, bisecting, at the hold, after a failed hold."""
    after, expected, old, _ = judged_and_live(
        lambda: BoundarySearch({"llm": 1.0}, start=1.0, maximum=64.0, precision=0.1, sustain=True), unjudged_at)
    assert after.model_dump(include=JUDGED) == expected.model_dump(include=JUDGED)
    assert after.runs == old.runs, "every stage-run it took stays counted"


def test_a_search_without_unjudged_probes_is_left_as_recorded() -> None:
    search = BoundarySearch({"llm": 1.0}, start=1.0, maximum=8.0, precision=0.1)
    probes = []
    while (scale := search.propose()) is not None:
        probes.append(probe(scale, scale < 3.0))
        search.record(scale, scale < 3.0)
    result = search.result(segment=0)
    assert judged_result(result, probes) == result


def test_a_warm_start_that_still_holds_closes_its_bracket_in_two_probes() -> None:
    cold = BoundarySearch({"llm": 1.0}, start=1.0, maximum=64.0, precision=0.1)
    run(cold, 5.3)
    first = cold.result(segment=0)
    assert first.status == SearchStatus.FOUND and first.lo is not None and first.hi is not None
    warm = BoundarySearch({"llm": 1.0}, start=1.0, maximum=64.0, precision=0.1, prior=(first.lo, first.hi))
    assert run(warm, 5.3) == [first.lo, first.hi]
    assert warm.result(segment=0).model_dump() == {**first.model_dump(), "runs": 2}


@pytest.mark.parametrize("threshold", [0.05, 0.3, 1.7, 4.1, 4.9, 5.6, 9.0, 40.0, 100.0])
def test_a_warm_start_rests_on_its_own_probes_wherever_the_boundary_moved(threshold: float) -> None:
    """Started from a bracket near 5 while the boundary is now elsewhere (a faster or slower repeat): the search goes
    on from its own first two probes and ends as a cold search would, within its precision of the new boundary."""
    warm = BoundarySearch({"llm": 1.0}, start=1.0, maximum=64.0, precision=0.1, prior=(4.6, 5.0))
    asked = run(warm, threshold)
    cold = BoundarySearch({"llm": 1.0}, start=1.0, maximum=64.0, precision=0.1)
    run(cold, threshold)
    result, reference = warm.result(segment=0), cold.result(segment=0)
    assert asked[0] == 4.6 and result.status == reference.status
    if result.status == SearchStatus.FOUND:
        assert result.lo is not None and result.hi is not None and result.precision is not None
        assert result.lo < threshold <= result.hi and result.precision <= 0.1
    if threshold >= 4.6:
        assert asked[1] == 5.0, "the prior hi is looked at once the prior lo passed"
    else:
        assert 5.0 not in asked, "a failing prior lo brackets down"


def test_a_warm_start_that_misses_steps_by_the_precision_then_faster() -> None:
    """Past a prior bracket that no longer holds the boundary, the first step is one precision's width (x 1/0.9 at
    10%), each next step the square of the last, up to ``growth``: a boundary 5% below the prior lo is bracketed at
    the first step, one far below in a few more, as is one far above."""
    near = BoundarySearch({"llm": 1.0}, start=1.0, maximum=64.0, precision=0.1, prior=(4.6, 5.0))
    assert run(near, 4.4) == [4.6, pytest.approx(4.6 * 0.9)] and near.result(segment=0).status == SearchStatus.FOUND
    far = BoundarySearch({"llm": 1.0}, start=1.0, maximum=64.0, precision=0.1, prior=(4.6, 5.0))
    asked = run(far, 1.0)
    ratios = [b / a for a, b in pairwise(asked)]
    assert ratios[:4] == [pytest.approx(0.9), pytest.approx(0.9 ** 2), pytest.approx(0.9 ** 4), 0.5], asked
    result = far.result(segment=0)
    assert result.lo is not None and result.hi is not None and result.lo < 1.0 <= result.hi
    up = BoundarySearch({"llm": 1.0}, start=1.0, maximum=64.0, precision=0.1, prior=(4.6, 5.0))
    assert run(up, 5.4)[:3] == [4.6, 5.0, pytest.approx(5.0 / 0.9)]


def test_a_warm_start_from_an_open_bracket_looks_at_its_one_end() -> None:
    above = BoundarySearch({"llm": 1.0}, start=1.0, maximum=8.0, precision=0.1, prior=(8.0, None))
    assert run(above, 100.0) == [8.0] and above.result(segment=0).status == SearchStatus.ABOVE_MAXIMUM
    below = BoundarySearch({"llm": 1.0}, start=1.0, maximum=8.0, precision=0.1, prior=(None, 0.125))
    asked = run(below, 0.01)
    assert asked[0] == 0.125 and below.result(segment=0).status == SearchStatus.BELOW_MINIMUM


def test_the_bracket_borrowed_is_the_latest_of_a_search_that_ended_on_its_own() -> None:
    def ended(status: str, lo: float | None, hi: float | None) -> SearchResult:
        return SearchResult(segment=0, classes=["llm"], mix={"llm": 1.0}, status=status, lo=lo, hi=hi,
                            estimate=None, precision=None, runs=3, fixed_sweep_runs=9)

    assert prior_bracket([]) is None
    assert prior_bracket([ended(SearchStatus.FOUND, 2.0, 2.2), ended(SearchStatus.FOUND, 2.4, 2.6)]) == (2.4, 2.6)
    stopped = ended(SearchStatus.GENERATOR_LIMITED, 2.4, None)
    assert prior_bracket([ended(SearchStatus.FOUND, 2.0, 2.2), stopped]) == (2.0, 2.2)
    assert prior_bracket([ended(SearchStatus.FOUND, 2.0, 2.2), ended("bisecting", 2.4, 3.0)]) == (2.0, 2.2)
    assert prior_bracket([ended(SearchStatus.BELOW_MINIMUM, None, 0.125)]) == (None, 0.125)


def test_the_bracket_another_campaign_starts_from_is_any_the_search_left() -> None:
    """``--warm-start-from``: the latest result with a bracket, however it ended (a generator-limited ``lo`` is a
    start too); a search cut short gives the bracket of its probes (lowest failure, highest pass below it)."""
    def ended(status: str, lo: float | None, hi: float | None) -> SearchResult:
        return SearchResult(segment=0, classes=["llm"], mix={"llm": 1.0}, status=status, lo=lo, hi=hi,
                            estimate=None, precision=None, runs=3, fixed_sweep_runs=9)

    stopped = ended(SearchStatus.GENERATOR_LIMITED, 2.4, None)
    assert left_bracket([ended(SearchStatus.FOUND, 2.0, 2.2), stopped], []) == (2.4, None)
    assert left_bracket([ended(SearchStatus.FOUND, 2.0, 2.2)], [(8.0, False)]) == (2.0, 2.2)
    assert left_bracket([], [(1.0, True), (2.0, True), (4.0, False), (3.0, False), (2.5, True), (5.0, True)]) \
        == (2.5, 3.0)
    assert left_bracket([], [(1.0, False), (0.5, False)]) == (None, 0.5)
    assert left_bracket([], []) is None


def test_a_borrowed_bracket_starts_only_the_same_arm_ray_and_rates() -> None:
    brackets = [BorrowedBracket(arm="mps", classes=["llm"], ray="mix", mix={"llm": 3.0}, lo=4.0, hi=5.0),
                BorrowedBracket(arm="mps", classes=["asr", "llm"], ray="mix", mix={"llm": 3.0, "asr": 3.0}, lo=1.5,
                                hi=1.75)]
    assert borrowed_start(brackets, "mps", "mix", {"llm": 3.0}) == (4.0, 5.0)
    assert borrowed_start(brackets, "mps", "mix", {"llm": 3.0, "asr": 3.0}) == (1.5, 1.75)
    assert borrowed_start(brackets, "mps", "mix", {"llm": 6.0}) is None
    assert borrowed_start(brackets, "time-slicing", "mix", {"llm": 3.0}) is None
    assert borrowed_start(brackets, "mps", "llm", {"llm": 3.0}) is None


def run_phased(search: BoundarySearch, threshold: float, hold_threshold: float) -> list[tuple[float, str]]:
    """Drive the search: a probe passes below ``threshold``, a hold (a longer stage) below ``hold_threshold``."""
    asked = []
    while (scale := search.propose()) is not None:
        phase = search.phase
        asked.append((scale, phase))
        search.record(scale, scale < (hold_threshold if phase == Phase.SUSTAIN else threshold))
    return asked


def test_a_warm_start_holds_its_prior_lo_first_and_does_not_hold_it_again() -> None:
    """With holds on, the prior lo is held first: where the boundary has not moved, that hold and one probe of the
    prior hi end the search, held, in two stage-runs (a cold search takes its probes and then the hold)."""
    cold = BoundarySearch({"llm": 1.0}, start=1.0, maximum=64.0, precision=0.1, sustain=True)
    asked = run_phased(cold, 5.3, 5.3)
    first = cold.result(segment=0)
    assert asked[-1] == (first.lo, Phase.SUSTAIN) and first.sustain == Hold.CONFIRMED
    warm = BoundarySearch({"llm": 1.0}, start=1.0, maximum=64.0, precision=0.1, sustain=True,
                          prior=(first.lo, first.hi))
    assert warm.propose() == first.lo and warm.phase == Phase.SUSTAIN
    assert warm.result(segment=0).sustain is None, "not held until the search ends there"
    assert run_phased(warm, 5.3, 5.3) == [(first.lo, Phase.SUSTAIN), (first.hi, Phase.PROBE)]
    assert warm.result(segment=0).model_dump() == {**first.model_dump(), "runs": 2}


@pytest.mark.parametrize(("threshold", "hold_threshold"), [
    (0.3, 0.3), (1.7, 1.5), (4.1, 3.9), (4.9, 4.9), (4.9, 4.3), (5.6, 5.6), (5.6, 5.1), (9.0, 8.0), (40.0, 40.0),
    (100.0, 100.0)])
def test_a_warm_start_that_holds_first_ends_held_wherever_the_boundary_moved(threshold: float,
                                                                             hold_threshold: float) -> None:
    """From a bracket near 5 while the boundary (and the lower one a longer stage shows) moved: the search ends as a
    cold one does, with its lo held once: by the opening hold where it ends there, by a hold of its own elsewhere."""
    warm = BoundarySearch({"llm": 1.0}, start=1.0, maximum=64.0, precision=0.1, sustain=True, prior=(4.6, 5.0))
    asked = run_phased(warm, threshold, hold_threshold)
    cold = BoundarySearch({"llm": 1.0}, start=1.0, maximum=64.0, precision=0.1, sustain=True)
    run_phased(cold, threshold, hold_threshold)
    result, reference = warm.result(segment=0), cold.result(segment=0)
    assert asked[0] == (4.6, Phase.SUSTAIN) and result.status == reference.status
    holds = [scale for scale, phase in asked if phase == Phase.SUSTAIN]
    assert len(holds) == len(set(holds)), "no scale is held twice"
    if result.status == SearchStatus.FOUND:
        assert result.lo is not None and result.hi is not None and result.precision is not None
        assert result.precision <= 0.1 and result.hi >= min(threshold, hold_threshold)
    if result.sustain == Hold.CONFIRMED:  # its lo held: by the opening hold or by its own
        assert result.lo in holds and result.lo is not None and result.lo < hold_threshold
    else:  # as a cold search does, it stops unconfirmed after two failed holds of its own (the opening one aside)
        assert result.sustain == Hold.FAILED and sum(s >= hold_threshold for s in holds[1:]) == MAX_SUSTAINS
    if result.status == SearchStatus.ABOVE_MAXIMUM:
        assert result.lo == 64.0 and holds[-1] == 64.0


def test_an_opening_hold_that_fails_is_a_failed_probe_not_a_failed_hold() -> None:
    """The prior lo no longer holds: the search brackets down from it and holds the lo it ends with; the opening
    hold counts neither as the search's hold nor among the failed holds that stop it unconfirmed."""
    warm = BoundarySearch({"llm": 1.0}, start=1.0, maximum=64.0, precision=0.1, sustain=True, prior=(4.6, 5.0))
    asked = run_phased(warm, 2.1, 2.1)
    result = warm.result(segment=0)
    assert asked[:2] == [(4.6, Phase.SUSTAIN), (pytest.approx(4.6 * 0.9), Phase.PROBE)]
    assert asked[-1][1] == Phase.SUSTAIN
    assert result.status == SearchStatus.FOUND and result.sustain == Hold.CONFIRMED
    assert result.lo is not None and result.lo < 2.1


def test_a_warm_start_above_the_maximum_is_held_once() -> None:
    above = BoundarySearch({"llm": 1.0}, start=1.0, maximum=8.0, precision=0.1, sustain=True, prior=(8.0, None))
    assert run_phased(above, 100.0, 100.0) == [(8.0, Phase.SUSTAIN)]
    result = above.result(segment=0)
    assert result.status == SearchStatus.ABOVE_MAXIMUM and result.sustain == Hold.CONFIRMED and result.runs == 1


@pytest.mark.parametrize("unjudged_at", [1, 2, 3])
def test_a_warm_search_judged_afterwards_ends_as_the_live_search_ends(unjudged_at: int) -> None:
    """judged_result after a warm start's opening hold passed: the hold is not the search's until it ends there."""
    after, expected, _, probes = judged_and_live(
        lambda: BoundarySearch({"llm": 1.0}, start=1.0, maximum=64.0, precision=0.1, sustain=True, prior=(3.0, 4.0)),
        unjudged_at)
    assert probes[0].phase == Phase.SUSTAIN and probes[0].passed
    assert after.model_dump(include=JUDGED) == expected.model_dump(include=JUDGED)
