"""Statistics: exact percentiles and the Student-t spread over repeats, checked against hand values."""

from __future__ import annotations

import math

import pytest

from bench_plugin.analysis.statistics import percentiles, spread


def test_percentiles_are_exact_not_bucketed() -> None:
    values = [101.0 + i for i in range(100)]  # 101..200 ms: Locust's buckets would round to 10 ms
    out = percentiles(values)
    assert out["p50"] == pytest.approx(150.5)
    assert out["p95"] == pytest.approx(195.05)
    assert out["mean"] == pytest.approx(150.5)


def test_percentiles_of_nothing_are_none() -> None:
    assert percentiles([]) == {"p50": None, "p90": None, "p95": None, "p99": None, "mean": None}


def test_spread_uses_student_t() -> None:
    s = spread([10.0, 12.0, 14.0])
    # mean 12, sd 2, sem 2/sqrt(3), t(0.975, 2) = 4.302653
    assert s.mean == pytest.approx(12.0)
    assert s.ci95 == pytest.approx(4.302653 * 2 / math.sqrt(3), rel=1e-5)


def test_spread_of_one_value_has_no_interval_and_missing_values_are_dropped() -> None:
    s = spread([5.0, None, float("nan")])
    assert s.mean == 5.0 and s.ci95 is None and s.values == [5.0]
    assert spread([]).mean is None
