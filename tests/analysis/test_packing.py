"""Packing: the fewest GPUs that hold a traffic within an envelope, checked against an exhaustive search of every
way to put classes on GPUs."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest
from packing_truth import CLASSES, fewest_gpus, fewest_gpus_lp

from bench_plugin.analysis.packing import arm_plan, best_arm, capacity_plans, held_alone, in_cone, with_costs
from bench_plugin.analysis.statistics import spread
from bench_plugin.results.limits import HIGHEST_TRIED, Limit, limits_text
from bench_plugin.results.summary import CriterionFit, EnvelopeFit, EnvelopeRay, load_summary


def fit(cost: dict[str, float], limits: dict[str, float], shared: bool = True,
        held_out_error: float | None = None, rows: dict[str, tuple[dict[str, float], float]] | None = None,
        measured: float = 1.0) -> EnvelopeFit:
    """A model whose every criterion row is ``cost`` (one busy fraction per device) with the class's limit, or
    the given ``rows`` (class -> its weights and limit)."""
    devices = [list(cost)] if shared else [[c] for c in cost]
    given = rows or {c: (dict(cost) if shared else {c: cost[c]}, limits[c]) for c in cost}
    criteria = {f"{c} p95": CriterionFit(workload=c, slo_ms=1000.0, a=0.0, b=0.0, weights=w, limit=u, measured=measured,
                                         points=10, fit_error=0.0) for c, (w, u) in given.items()}
    return EnvelopeFit(form="test", fitted_on=["mix", "llm", "embedding", "asr", "llm+embedding", "llm+asr",
                                                 "embedding+asr"],
                       devices=devices, criteria=criteria, points=100, fit_error=0.01, rays={},
                       held_out_error={} if held_out_error is None else {"held": held_out_error}, validated="test")


def ray(name: str, mix: dict[str, float]) -> EnvelopeRay:
    return EnvelopeRay(name=name, mix=mix, status="found", scale=spread([1.0]), lo=spread([1.0]), boundary=mix)


RAYS = [ray("mix", {"llm": 1, "embedding": 4, "asr": 1}), ray("llm", {"llm": 1}), ray("embedding", {"embedding": 4}),
        ray("asr", {"asr": 1}), ray("llm+embedding", {"llm": 1, "embedding": 4}), ray("llm+asr", {"llm": 1, "asr": 1}),
        ray("embedding+asr", {"embedding": 4, "asr": 1})]


def test_the_plan_is_as_small_as_every_way_of_packing_allows() -> None:
    rng = random.Random(7)
    for _ in range(40):
        cost = {c: rng.uniform(0.002, 0.03) for c in CLASSES}
        limits = {c: rng.uniform(0.3, 0.95) for c in CLASSES}
        traffic = {c: rng.choice([0.0, rng.uniform(1, 120)]) or rng.uniform(1, 40) for c in CLASSES}
        headroom = rng.choice([0.0, 0.2, 0.5])
        plan = arm_plan("shared", "mps", fit(cost, limits), RAYS, traffic, headroom)
        truth = fewest_gpus({c: cost[c] * traffic[c] for c in CLASSES}, limits, headroom)
        assert plan.gpus == truth, (cost, limits, traffic, headroom)
        carried = {c: sum(g.load.get(c, 0.0) for g in plan.groups) for c in CLASSES}
        assert carried == pytest.approx(traffic), "every request/s placed once"
        for group in plan.groups:
            assert group.used <= 1 / (1 + headroom) + 1e-6, "no GPU beyond its limits less the headroom"


def test_segregating_the_strict_class_beats_mixing_it_in() -> None:
    """Embedding's SLO leaves a GPU only 40% busy wherever it runs; the others use 90% on GPUs of their own."""
    cost = {"llm": 0.01, "embedding": 0.01, "asr": 0.01}
    limits = {"llm": 0.9, "embedding": 0.4, "asr": 0.9}
    traffic = {"llm": 45.0, "embedding": 40.0, "asr": 45.0}  # work 0.45 + 0.40 + 0.45
    plan = arm_plan("shared", "mps", fit(cost, limits), RAYS, traffic, 0.0)
    assert plan.gpus == 2 and {tuple(g.classes): g.gpus for g in plan.groups} == {("embedding",): 1,
                                                                                  ("llm", "asr"): 1}
    assert plan.growth == pytest.approx(1.0) and Limit(workload="embedding", figure="p95") in plan.first_limit
    mixed_only = 0.45 + 0.40 + 0.45
    assert math.ceil(mixed_only / 0.4) == 4, "all three on every GPU would take 4"


def test_an_exclusive_arm_gives_each_class_gpus_of_its_own() -> None:
    cost = {"llm": 0.02, "embedding": 0.005, "asr": 0.01}
    limits = {"llm": 0.8, "embedding": 0.5, "asr": 0.9}
    plan = arm_plan("exclusive", "exclusive", fit(cost, limits, shared=False), RAYS,
                    {"llm": 50.0, "embedding": 150.0, "asr": 20.0}, 0.2)
    # llm: 1.0 work / (0.8 / 1.2) -> 2 GPUs; embedding 0.75 / (0.5 / 1.2) -> 2; asr 0.2 / 0.75 -> 1
    assert plan.gpus == 5 and all(len(g.classes) == 1 for g in plan.groups)
    assert {g.classes[0]: g.gpus for g in plan.groups} == {"llm": 2, "embedding": 2, "asr": 1}
    assert plan.growth == pytest.approx(min(2 * 0.8 / 1.0, 2 * 0.5 / 0.75, 0.9 / 0.2))
    assert plan.first_limit == [Limit(workload="embedding", figure="p95")]


def test_a_class_that_held_the_searchs_maximum_alone_is_counted_at_that_load() -> None:
    """The control's asr search passed even its maximum (48 req/s held): no criterion row, but a floor of what one GPU
    holds. Its GPUs are counted at that load, outside the model (never an extrapolation); a class with neither
    stays unplanned."""
    cost = {"llm": 0.02, "embedding": 0.005}
    model = fit(cost, {"llm": 0.8, "embedding": 0.5}, shared=False)
    traffic = {"llm": 20.0, "embedding": 40.0, "asr": 50.0}
    plan = arm_plan("exclusive", "exclusive", model, RAYS, traffic, 0.2, floors={"asr": 48.0})
    # asr: 50 x 1.2 / 48 -> 2 GPUs, each at 25 / 48 of the floor; llm 0.4 / (0.8 / 1.2) -> 1; embedding 0.2 -> 1
    assert {g.classes[0]: g.gpus for g in plan.groups} == {"asr": 2, "llm": 1, "embedding": 1} and plan.gpus == 4
    (asr,) = [g for g in plan.groups if g.classes == ["asr"]]
    assert asr.floor == 48.0 and asr.used == pytest.approx(25 / 48) and asr.load == {"asr": 50.0}
    assert plan.growth == pytest.approx(min(2 * 48 / 50, 0.8 / 0.4, 0.5 / 0.2))
    assert plan.first_limit == [Limit(workload="asr", note=HIGHEST_TRIED)] and not plan.extrapolation
    assert limits_text(plan.first_limit) == "asr at its highest load tried"
    unplanned = arm_plan("exclusive", "exclusive", model, RAYS, traffic, 0.2)
    assert unplanned.gpus is None and unplanned.note == "its envelope model does not cover asr"


def test_interference_that_is_not_one_busy_fraction_is_packed_exactly() -> None:
    """Asr weighs on the llm five times what it weighs on itself (time-slicing): the least GPUs, checked against
    a brute force of every count of GPUs per set of classes, each split found by a linear program."""
    rng = random.Random(5)
    for _ in range(12):
        rows = {"llm": ({"llm": rng.uniform(0.02, 0.05), "embedding": rng.uniform(0.0, 0.01),
                         "asr": rng.uniform(0.03, 0.08)}, rng.uniform(0.4, 0.8)),
                "embedding": ({"llm": rng.uniform(0.0, 0.004), "embedding": rng.uniform(0.002, 0.006),
                               "asr": rng.uniform(0.0, 0.004)}, rng.uniform(0.5, 0.9)),
                "asr": ({"llm": rng.uniform(0.005, 0.02), "embedding": rng.uniform(0.0, 0.005),
                         "asr": rng.uniform(0.01, 0.03)}, rng.uniform(0.6, 0.95))}
        traffic = {"llm": rng.uniform(2, 25), "embedding": rng.uniform(10, 150), "asr": rng.uniform(2, 25)}
        headroom = rng.choice([0.0, 0.2])
        plan = arm_plan("ts", "time-slicing", fit({c: 0.0 for c in CLASSES}, {}, rows=rows), RAYS, traffic,
                        headroom)
        truth = fewest_gpus_lp(traffic, [(c, w, u) for c, (w, u) in rows.items()], headroom)
        assert plan.gpus == truth, (rows, traffic, headroom)
        assert plan.growth is not None and plan.growth >= 1 + headroom - 1e-6
        carried = {c: sum(g.load.get(c, 0.0) for g in plan.groups) for c in CLASSES}
        assert carried == pytest.approx(traffic)


def test_costs_savings_and_the_best_arm() -> None:
    cost = {"llm": 0.01, "embedding": 0.01, "asr": 0.01}
    limits = {"llm": 0.9, "embedding": 0.4, "asr": 0.9}
    traffic = {"llm": 45.0, "embedding": 40.0, "asr": 45.0}
    plans = [arm_plan("exclusive", "exclusive", fit(cost, limits, shared=False), RAYS, traffic, 0.0),
             arm_plan("mps", "mps", fit(cost, limits), RAYS, traffic, 0.0),
             arm_plan("none", "mps", None, RAYS, traffic, 0.0)]
    priced = with_costs(plans, "exclusive", 2.5)
    assert [p.gpus for p in priced] == [3, 2, None]
    assert priced[1].saved_gpus == 1 and priced[1].saved_cost == pytest.approx(2.5) and priced[1].cost == 5.0
    assert priced[2].note and "no envelope model" in priced[2].note
    assert best_arm(priced) == "mps"


def test_a_plan_outside_the_fit_rays_or_thinner_than_the_model_error_is_an_extrapolation() -> None:
    cost = {"llm": 0.01, "embedding": 0.01, "asr": 0.01}
    limits = {"llm": 0.9, "embedding": 0.9, "asr": 0.9}
    only_mix = [RAYS[0]]
    plan = arm_plan("mps", "mps", fit(cost, limits), only_mix, {"llm": 10.0, "embedding": 10.0, "asr": 10.0}, 0.2)
    assert plan.extrapolation and "outside the rays" in plan.extrapolation[0]
    assert best_arm([plan]) is None
    inside = arm_plan("mps", "mps", fit(cost, limits), only_mix, {"llm": 10.0, "embedding": 40.0, "asr": 10.0}, 0.2)
    assert not inside.extrapolation
    thin = arm_plan("mps", "mps", fit(cost, limits, held_out_error=-0.3), RAYS, {"llm": 10.0}, 0.2)
    beyond = arm_plan("mps", "mps", fit(cost, limits, rows={c: ({c: 0.05}, 0.9) for c in cost}, measured=0.5),
                      RAYS, {"llm": 15.0}, 0.0)
    assert beyond.gpus == 1 and beyond.extrapolation == ["llm would take llm p95 to u 0.75, beyond the 0.50 measured"]
    assert thin.extrapolation == ["the headroom 20% is below the model's held-out error 30%"]


def test_the_cone_of_the_rays() -> None:
    assert in_cone({"llm": 1, "embedding": 1}, [{"llm": 1}, {"embedding": 1}])
    assert not in_cone({"llm": 1, "asr": 1}, [{"llm": 1}, {"embedding": 1}])
    assert in_cone({"llm": 2, "embedding": 8}, [{"llm": 1, "embedding": 4}])


def test_the_published_h200_control_held_asr_alone_at_its_maximum() -> None:
    """docs/results/h200-envelope: the control's asr search passed x16 (48 req/s) in both repeats, so its plan counts
    asr at that load, where without it the control (and every saving against it) had no plan for a day with asr."""
    summary = load_summary(Path(__file__).resolve().parents[2] / "docs/results/h200-envelope/summary.json")
    assert held_alone(summary, "exclusive") == {"asr": 48.0}
    assert held_alone(summary, "mps") == {}
    document = capacity_plans(summary, "h200-envelope", [{"llm": 3.0, "embedding": 6.0, "asr": 30.0}], 0.2, None)
    control = next(a for a in document.plans[0].arms if a.arm == "exclusive")
    assert control.gpus == 3 and [g.floor for g in control.groups if g.classes == ["asr"]] == [48.0]
    assert all(a.saved_gpus is not None for a in document.plans[0].arms if a.gpus is not None)
