"""Contention metrics against the control at the same stage, paired by repeat, with their significance."""

from __future__ import annotations

import pytest
from analysis_builders import objectives, stage, stats, trial

from bench_plugin.analysis.contention import jain, stage_contention
from bench_plugin.analysis.significance import HIGHER, LOWER, NO_DIFFERENCE, ONE_REPEAT, figure

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
    assert llm.normalised_throughput.call == LOWER and llm.throughput_loss.call == HIGHER
    assert s.goodput_per_device_ratio.call == HIGHER
    assert s.consolidation_gain.no_change == 2.0 and s.consolidation_gain.call == LOWER
    assert llm.slowdown_ttft_p95 is not None and llm.slowdown_ttft_p95.mean is None  # no TTFT measured
    assert emb.slowdown_ttft_p95 is None  # not an llm


def test_arms_that_differ_only_by_noise_show_no_significant_difference() -> None:
    noise = [(10.2, 9.8), (9.7, 10.1), (10.1, 10.3), (9.9, 9.6)]
    control = [t for r, (a, b) in enumerate(noise, 1) for t in two_classes("a", r, a, b)]
    arm = [t for r, (a, b) in enumerate(reversed(noise), 1) for t in two_classes("b", r, a, b)]
    s = stage_contention(0, arm, control, OBJ)
    for c in s.classes.values():
        assert c.normalised_throughput and c.normalised_throughput.call == NO_DIFFERENCE
        assert not c.normalised_throughput.significant
    assert s.goodput_per_device_ratio and s.goodput_per_device_ratio.call == NO_DIFFERENCE


def test_pairs_by_repeat_number_not_by_position() -> None:
    control = [*two_classes("a", 1, 10.0, 10.0), *two_classes("a", 2, 20.0, 20.0)]
    arm = [*two_classes("b", 2, 10.0, 10.0), *two_classes("b", 1, 5.0, 5.0)]
    s = stage_contention(0, arm, control, OBJ)
    fig = s.classes["llm"].normalised_throughput
    assert fig and sorted(fig.spread.values) == [0.5, 0.5]
    assert s.paired == 2


def test_one_repeat_is_never_significant_and_says_so() -> None:
    s = stage_contention(0, two_classes("b", 1, 5.0, 5.0), two_classes("a", 1, 10.0, 10.0), OBJ)
    fig = s.classes["llm"].normalised_throughput
    assert fig and fig.mean == pytest.approx(0.5)
    assert (fig.significant, fig.call, fig.note) == (False, NO_DIFFERENCE, ONE_REPEAT)


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
    assert figure([1.18, 1.2, 1.22], 1.0).call == HIGHER  # mean 1.2 ± 0.05
    assert figure([0.8, 0.9, 0.85], 1.0).call == LOWER
    assert figure([0.9, 1.1, 1.0], 1.0).call == NO_DIFFERENCE
    assert figure([-0.2, -0.1, -0.15], 0.0).call == LOWER
    assert figure([], 1.0).mean is None
