"""Statistics: exact percentiles, the Student-t spread over repeats, and ratios on the log scale, by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bench_plugin.analysis.statistics import (
    COMPLEMENT,
    DIFFERENCE,
    RATIO,
    VALUE,
    complement,
    fixed,
    interval_text,
    percentiles,
    ratio_spread,
    spread,
)


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


def test_geometric_mean_of_2_and_8_is_4_with_the_log_scale_interval() -> None:
    s = ratio_spread([2.0, 8.0])
    assert s.kind == RATIO and s.mean == pytest.approx(4.0) and s.ci95 is None
    # logs ln 2 and ln 8: mean ln 4, sd (ln 8 - ln 2) / sqrt(2), sem = sd / sqrt(2) = ln 2; t(0.975, 1) = 12.7062
    t = 12.706205
    assert s.lo == pytest.approx(4.0 * 2.0 ** -t, rel=1e-5) and s.hi == pytest.approx(4.0 * 2.0 ** t, rel=1e-5)
    assert spread([2.0, 8.0], RATIO) == s


def test_the_three_repeats_that_gave_an_interval_below_zero() -> None:
    values = [0.14, 4.70, 0.29]
    arithmetic = spread(values)
    assert arithmetic.ci95 is not None and arithmetic.mean - arithmetic.ci95 < 0  # the old "1.71x (95% CI ±6.43)"
    s = ratio_spread(values)
    logs = [math.log(v) for v in values]
    m = sum(logs) / 3
    sd = math.sqrt(sum((x - m) ** 2 for x in logs) / 2)
    half = 4.302653 * sd / math.sqrt(3)
    assert s.mean == pytest.approx(math.exp(m)) and s.mean == pytest.approx(0.5757, rel=1e-3)
    assert (s.lo, s.hi) == (pytest.approx(math.exp(m - half), rel=1e-5), pytest.approx(math.exp(m + half), rel=1e-5))
    assert s.lo is not None and 0 < s.lo < 1 < s.hi  # wide, honest, and above zero


@pytest.mark.parametrize("seed", range(200))
def test_a_ratio_interval_never_reaches_zero_and_is_symmetric_in_logs(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 9))
    values = [float(v) for v in rng.lognormal(rng.normal(0.0, 1.0), rng.uniform(0.01, 3.0), n)]
    if seed % 5 == 0:
        values[0] = float(rng.uniform(1e-6, 1e-3))  # a near-starved class: a tiny ratio, still positive
    s = ratio_spread(values)
    assert s.mean is not None and s.lo is not None and s.hi is not None
    assert 0 < s.lo <= s.mean <= s.hi
    assert math.log(s.hi) - math.log(s.mean) == pytest.approx(math.log(s.mean) - math.log(s.lo), rel=1e-9, abs=1e-12)
    assert s.mean == pytest.approx(math.exp(float(np.mean(np.log(values)))))
    assert min(values) <= s.mean <= max(values)


def test_ratios_that_are_not_positive_or_missing_are_left_out_with_a_note() -> None:
    s = ratio_spread([2.0, 0.0, None, 8.0, -1.0, float("nan")])
    assert s.values == [2.0, 8.0] and s.mean == pytest.approx(4.0)
    assert s.excluded == (0.0, None, -1.0, None)
    assert s.note == "4 of 6 repeats left out (a geometric mean needs positive ratios): 0, -1 not positive; 2 missing"
    nothing = ratio_spread([0.0, None])
    assert nothing.mean is None and nothing.lo is None and nothing.note and nothing.note.startswith("2 of 2")
    assert ratio_spread([3.0, 3.0, 3.0]).note is None


def test_identical_ratios_keep_their_exact_value_and_a_zero_width_interval() -> None:
    s = ratio_spread([0.9, 0.9])
    assert (s.mean, s.lo, s.hi) == (0.9, 0.9, 0.9)
    one = ratio_spread([1.7])
    assert (one.mean, one.lo, one.hi, one.ci95) == (1.7, None, None, None)


def test_every_spread_says_its_kind_and_interval_in_json() -> None:
    s = spread([10.0, 12.0, 14.0])
    value = s.model_dump(mode="json")
    assert list(value) == ["kind", "mean", "ci95", "lo", "hi", "values", "note", "n"]  # not "excluded"
    assert s.ci95 is not None and value["kind"] == VALUE
    assert (value["lo"], value["hi"]) == (pytest.approx(12.0 - s.ci95), pytest.approx(12.0 + s.ci95))
    assert spread([1.0, 2.0], DIFFERENCE).model_dump()["kind"] == DIFFERENCE
    ratio = ratio_spread([2.0, 8.0]).model_dump(mode="json")
    assert ratio["kind"] == RATIO and ratio["ci95"] is None and ratio["n"] == 2
    assert spread([5.0]).model_dump()["lo"] is None


def test_complement_turns_the_ratio_interval_over() -> None:
    r = ratio_spread([0.5, 0.8])
    c = complement(r)
    assert r.lo is not None and r.hi is not None and r.mean is not None
    assert c.kind == COMPLEMENT and c.mean == pytest.approx(1 - r.mean)
    assert (c.lo, c.hi) == (pytest.approx(1 - r.hi), pytest.approx(1 - r.lo))
    assert c.values == [pytest.approx(0.5), pytest.approx(0.2)]
    with pytest.raises(ValueError, match="only a ratio"):
        complement(spread([1.0]))


def test_small_bounds_are_not_shown_as_zero() -> None:
    assert fixed(1.234) == "1.23" and fixed(0.0004) == "0.0004" and fixed(0.0) == "0.00"
    assert interval_text(ratio_spread([2.0, 2.0])) == "[2.00, 2.00]"
    assert interval_text(spread([10.0, 12.0, 14.0])) == "±4.97"
    assert interval_text(spread([1.0])) is None
