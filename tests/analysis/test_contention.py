"""Contention metrics against the control at the same stage, paired by repeat, with their significance."""

from __future__ import annotations

import math

import pytest
from analysis_builders import objectives, stage, stats, trial

from bench_plugin.analysis.contention import jain, stage_contention
from bench_plugin.analysis.significance import NO_PAIRS, ONE_REPEAT, describe, figure, ratio_figure
from bench_plugin.analysis.statistics import COMPLEMENT, RATIO
from bench_plugin.results.words import Significance

OBJ = objectives(p95=1000.0, budget=0.05)


def two_classes(arm: str, repeat: int, llm_thr: float, emb_thr: float, p95: float = 100.0,
                devices: int = 1) -> list:
    return [trial(arm, repeat, [stage(0, {"llm": stats(llm_thr, p95), "embedding": stats(emb_thr, p95)},
                                      offered={"llm": 10.0, "embedding": 10.0})], devices)]


def test_normalised_throughput_gain_fairness_and_loss_by_hand() -> None:
    control = [t for r in (1, 2, 3) for t in two_classes("exclusive", r, 10.0, 10.0, p95=100.0, devices=2)]
    arm = [t for r in (1, 2, 3) for t in two_classes("shared", r, 7.0, 5.0, p95=250.0)]
    s = stage_contention(0, arm, control, OBJ)
    llm, emb = s.classes["llm"], s.classes["embedding"]
    assert llm.normalised_throughput and emb.normalised_throughput and llm.throughput_loss and llm.slowdown_p95
    assert llm.normalised_throughput.mean == pytest.approx(0.7)
    assert emb.normalised_throughput.mean == pytest.approx(0.5)
    assert llm.throughput_loss.mean == pytest.approx(0.3)
    assert llm.slowdown_p95.mean == pytest.approx(2.5)
    assert s.consolidation_gain and s.consolidation_gain.mean == pytest.approx(1.2)
    assert s.fairness and s.fairness.mean == pytest.approx(1.2**2 / (2 * (0.49 + 0.25)))
    # goodput (every success within the SLO here) per device: arm 12 / 1, control 20 / 2
    assert s.goodput_per_device.mean == pytest.approx(12.0)
    assert s.control_goodput_per_device and s.control_goodput_per_device.mean == pytest.approx(10.0)
    assert s.goodput_per_device_ratio and s.goodput_per_device_ratio.mean == pytest.approx(1.2)
    # identical repeats: a zero-width interval that excludes no change
    assert llm.normalised_throughput.call == Significance.LOWER and llm.throughput_loss.call == Significance.HIGHER
    assert s.goodput_per_device_ratio.call == Significance.HIGHER
    assert s.consolidation_gain.no_change == 2.0 and s.consolidation_gain.call == Significance.LOWER
    assert llm.slowdown_ttft_p95 is not None and llm.slowdown_ttft_p95.mean is None  # no TTFT measured
    assert emb.slowdown_ttft_p95 is None  # not an llm


def test_arms_that_differ_only_by_noise_show_no_significant_difference() -> None:
    noise = [(10.2, 9.8), (9.7, 10.1), (10.1, 10.3), (9.9, 9.6)]
    control = [t for r, (a, b) in enumerate(noise, 1) for t in two_classes("a", r, a, b)]
    arm = [t for r, (a, b) in enumerate(reversed(noise), 1) for t in two_classes("b", r, a, b)]
    s = stage_contention(0, arm, control, OBJ)
    for c in s.classes.values():
        assert c.normalised_throughput and c.normalised_throughput.call == Significance.NO_DIFFERENCE
        assert not c.normalised_throughput.significant
    assert s.goodput_per_device_ratio and s.goodput_per_device_ratio.call == Significance.NO_DIFFERENCE


def test_pairs_by_repeat_number_not_by_position() -> None:
    control = [*two_classes("a", 1, 10.0, 10.0), *two_classes("a", 2, 20.0, 20.0)]
    arm = [*two_classes("b", 2, 10.0, 10.0), *two_classes("b", 1, 5.0, 5.0)]
    s = stage_contention(0, arm, control, OBJ)
    fig = s.classes["llm"].normalised_throughput
    assert fig and sorted(fig.spread.values) == [0.5, 0.5]
    assert s.paired_repeats == 2


def test_one_repeat_is_never_significant_and_says_so() -> None:
    s = stage_contention(0, two_classes("b", 1, 5.0, 5.0), two_classes("a", 1, 10.0, 10.0), OBJ)
    fig = s.classes["llm"].normalised_throughput
    assert fig and fig.mean == pytest.approx(0.5)
    assert (fig.significant, fig.call, fig.reason) == (False, Significance.NO_DIFFERENCE, ONE_REPEAT)


def test_the_control_gets_its_own_figures_and_no_ratios() -> None:
    s = stage_contention(0, two_classes("a", 1, 10.0, 10.0, devices=2), None, OBJ)
    assert s.goodput_per_device.mean == pytest.approx(10.0)
    assert s.consolidation_gain is None and s.goodput_per_device_ratio is None
    assert s.classes["llm"].normalised_throughput is None and s.classes["llm"].meets_slo


def test_slo_and_error_budget_are_judged_in_every_repeat() -> None:
    runs = [trial("b", 1, [stage(0, {"llm": stats(10.0, 900.0), "embedding": stats(10.0, 100.0)})]),
            trial("b", 2, [stage(0, {"llm": stats(10.0, 1200.0), "embedding": stats(10.0, 100.0, errors=10)})])]
    s = stage_contention(0, runs, None, OBJ)
    assert not s.classes["llm"].meets_slo and s.classes["llm"].within_error_budget
    assert s.classes["embedding"].meets_slo and not s.classes["embedding"].within_error_budget
    assert any("llm p95 1.05x its SLO" in b and "1 of 2 repeats" in b for b in s.classes["llm"].breaches)


def test_a_class_skipped_after_a_rollback_fails() -> None:
    runs = [trial("b", 1, [stage(0, {"llm": stats(10.0, 100.0)}, skipped=("embedding",), status="skipped")])]
    s = stage_contention(0, runs, None, OBJ)
    assert not s.classes["embedding"].meets_slo and not s.classes["embedding"].within_error_budget
    assert s.goodput_per_device.mean is None  # incomplete: not a lower number


def test_jain_index_by_hand() -> None:
    assert jain([1.0, 1.0, 1.0]) == pytest.approx(1.0)
    assert jain([1.0, 0.0, 0.0]) == pytest.approx(1 / 3)
    assert jain([]) is None and jain([0.0, 0.0]) is None


def test_significance_follows_the_interval() -> None:
    assert figure([1.18, 1.2, 1.22], 1.0).call == Significance.HIGHER  # mean 1.2 ± 0.05
    assert figure([0.8, 0.9, 0.85], 1.0).call == Significance.LOWER
    assert figure([0.9, 1.1, 1.0], 1.0).call == Significance.NO_DIFFERENCE
    assert figure([-0.2, -0.1, -0.15], 0.0).call == Significance.LOWER
    assert figure([], 1.0).mean is None


def test_ratio_significance_is_judged_on_the_log_scale() -> None:
    # Right-skewed ratios: the arithmetic interval reaches below 1, the log-scale one does not.
    values = [2.23, 1.45, 2.0]
    assert figure(values, 1.0).call == Significance.NO_DIFFERENCE
    fig = ratio_figure(values)
    logs = [math.log(v) for v in values]
    m = sum(logs) / 3
    half = 4.302653 * math.sqrt(sum((x - m) ** 2 for x in logs) / 2) / math.sqrt(3)
    assert fig.spread.lo == pytest.approx(math.exp(m - half), rel=1e-5) and math.exp(m - half) > 1
    assert (fig.call, fig.significant, fig.no_change) == (Significance.HIGHER, True, 1.0)
    # And the other way: arithmetically "lower", but on the log scale the interval still holds 1.
    assert figure([0.52, 0.79, 0.64], 1.0).call == Significance.LOWER
    assert ratio_figure([0.52, 0.79, 0.64]).call == Significance.NO_DIFFERENCE
    assert ratio_figure([0.5, 2.0]).mean == pytest.approx(1.0)  # halving and doubling cancel out
    assert ratio_figure([0.14, 4.70, 0.29]).call == Significance.NO_DIFFERENCE


def test_ratio_figures_are_geometric_and_the_loss_follows_from_them() -> None:
    # llm: 5 then 20 req/s against 10 and 10: ratios 0.5 and 2, geometric mean 1 (the arithmetic mean says 1.25).
    control = [*two_classes("a", 1, 10.0, 10.0, p95=100.0), *two_classes("a", 2, 10.0, 10.0, p95=100.0)]
    arm = [*two_classes("b", 1, 5.0, 10.0, p95=400.0), *two_classes("b", 2, 20.0, 10.0, p95=100.0)]
    s = stage_contention(0, arm, control, OBJ)
    norm, loss, slow = (s.classes["llm"].normalised_throughput, s.classes["llm"].throughput_loss,
                        s.classes["llm"].slowdown_p95)
    assert norm and loss and slow and s.consolidation_gain and s.goodput_per_device_ratio
    assert norm.spread.kind == RATIO and norm.mean == pytest.approx(1.0) and norm.spread.ci95 is None
    assert slow.spread.kind == RATIO and slow.mean == pytest.approx(2.0)  # sqrt(4 x 1)
    assert loss.spread.kind == COMPLEMENT and loss.mean == pytest.approx(0.0) and loss.no_change == 0.0
    assert norm.spread.lo is not None and norm.spread.hi is not None
    assert (loss.spread.lo, loss.spread.hi) == (pytest.approx(1 - norm.spread.hi), pytest.approx(1 - norm.spread.lo))
    assert s.consolidation_gain.spread.kind == RATIO and s.consolidation_gain.no_change == 2.0
    assert s.consolidation_gain.mean == pytest.approx(math.sqrt(1.5 * 3.0))
    assert s.goodput_per_device_ratio.spread.kind == RATIO
    d = norm.model_dump(mode="json")
    assert (d["kind"], d["ci95"], d["n"], d["call"]) == ("ratio", None, 2, Significance.NO_DIFFERENCE)
    assert 0 < d["lo"] < 1 < d["hi"]
    assert describe(norm).startswith("1.00x (geometric mean of 2 repeats, 95% CI [0.00")


def test_a_zero_ratio_is_left_out_of_the_geometric_mean_with_a_note() -> None:
    control = [*two_classes("a", 1, 10.0, 10.0), *two_classes("a", 2, 10.0, 10.0), *two_classes("a", 3, 10.0, 10.0)]
    arm = [*two_classes("b", 1, 0.0, 10.0), *two_classes("b", 2, 5.0, 10.0), *two_classes("b", 3, 5.0, 10.0)]
    fig = stage_contention(0, arm, control, OBJ).classes["llm"].normalised_throughput
    assert fig and fig.spread.values == [0.5, 0.5] and fig.spread.excluded == (0.0,)
    assert fig.model_dump(mode="json")["note"] == ("1 of 3 repeats left out (a geometric mean needs positive ratios): "
                                                   "0 not positive")
    assert "1 of 3 repeats left out" in describe(fig)
    none = ratio_figure([None, None])
    assert none.mean is None and none.reason is None and none.notes == "2 of 2 repeats left out (a geometric mean "\
        "needs positive ratios): 2 missing"
    assert ratio_figure([]).reason == NO_PAIRS
