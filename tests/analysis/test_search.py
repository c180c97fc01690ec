"""The adaptive boundary search: brackets, bisects, and needs far fewer stages than a fixed sweep."""

from __future__ import annotations

import pytest

from bench_plugin.analysis.search import ABOVE_MAXIMUM, BELOW_MINIMUM, FOUND, BoundarySearch, fixed_sweep_runs


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
    assert result.status == FOUND and result.lo is not None and result.hi is not None
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
    assert found.status == ABOVE_MAXIMUM and found.lo == 10.0 and found.hi is None
    down = BoundarySearch({"asr": 1.0}, start=1.0, maximum=10.0, precision=0.1)
    assert run(down, 0.0) == [1.0, 0.5, 0.25, 0.125]
    assert down.result(segment=0).status == BELOW_MINIMUM and down.result(segment=0).lo is None


def test_a_failing_start_brackets_downwards_then_bisects() -> None:
    search = BoundarySearch({"llm": 1.0}, start=4.0, maximum=16.0, precision=0.02)
    asked = run(search, 1.5)
    assert asked[:3] == [4.0, 2.0, 1.0]
    result = search.result(segment=0)
    assert result.status == FOUND and result.lo is not None and result.lo < 1.5 <= (result.hi or 0)


def test_only_the_proposed_scale_can_be_recorded_and_bad_settings_are_refused() -> None:
    search = BoundarySearch({"llm": 1.0}, start=1.0, maximum=4.0, precision=0.1)
    assert search.propose() == search.propose() == 1.0
    with pytest.raises(ValueError, match="not proposed"):
        search.record(3.0, True)
    with pytest.raises(ValueError):
        BoundarySearch({"llm": 1.0}, start=2.0, maximum=1.0, precision=0.1)
    with pytest.raises(ValueError):
        BoundarySearch({"llm": 1.0}, start=1.0, maximum=2.0, precision=1.5)
