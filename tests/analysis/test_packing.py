"""Packing: the fewest GPUs that hold a traffic within an envelope, checked against an exhaustive search of every
way to put classes on GPUs."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from bench_plugin.analysis.packing import arm_plan, best_arm, growth, in_cone, with_costs
from bench_plugin.analysis.statistics import spread
from bench_plugin.results.summary import EnvelopeFit, EnvelopeRay

CLASSES = ("llm", "embedding", "asr")
SUBSETS = [frozenset(s) for k in (1, 2, 3) for s in itertools.combinations(CLASSES, k)]


def fit(cost: dict[str, float], limits: dict[str, float], shared: bool = True,
        held_out_error: float | None = None) -> EnvelopeFit:
    devices = [list(cost)] if shared else [[c] for c in cost]
    return EnvelopeFit(form="test", fitted_on=["mix", "llm", "embedding", "asr", "llm+embedding", "llm+asr",
                                                 "embedding+asr"],
                       devices=devices, cost=cost, criteria={}, busy_limit=limits,
                       limited_by={c: f"{c} p95" for c in cost}, points=100, fit_error=0.01, rays={},
                       held_out_error={} if held_out_error is None else {"held": held_out_error},
                       validated="test")


def ray(name: str, mix: dict[str, float]) -> EnvelopeRay:
    return EnvelopeRay(name=name, mix=mix, status="found", scale=spread([1.0]), lo=spread([1.0]), boundary=mix)


RAYS = [ray("mix", {"llm": 1, "embedding": 4, "asr": 1}), ray("llm", {"llm": 1}), ray("embedding", {"embedding": 4}),
        ray("asr", {"asr": 1}), ray("llm+embedding", {"llm": 1, "embedding": 4}), ray("llm+asr", {"llm": 1, "asr": 1}),
        ray("embedding+asr", {"embedding": 4, "asr": 1})]


def fewest_gpus(work: dict[str, float], limits: dict[str, float], headroom: float) -> int:
    """The truth, by brute force: the least total of GPUs over every subset of classes a GPU may carry, feasible
    when every set of classes fits in the GPUs that may carry one of them (Hall's condition, over all 7 sets)."""
    caps = {s: min(limits[c] for c in s) / (1 + headroom) for s in SUBSETS}
    needed = [c for c in CLASSES if work.get(c, 0) > 0]
    for total in range(0, 200):
        for split in itertools.combinations(range(total + len(SUBSETS) - 1), len(SUBSETS) - 1):
            counts = [b - a - 1 for a, b in zip((-1, *split), (*split, total + len(SUBSETS) - 1), strict=True)]
            ok = True
            for k in range(1, len(needed) + 1):
                for group in itertools.combinations(needed, k):
                    room = sum(n * caps[s] for n, s in zip(counts, SUBSETS, strict=True) if s & set(group))
                    if sum(work[c] for c in group) > room + 1e-9:
                        ok = False
                        break
                if not ok:
                    break
            if ok:
                return total
    raise AssertionError("no plan under 200 GPUs")


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
            assert group.busy <= group.busy_limit / (1 + headroom) + 1e-9, "no GPU beyond its limit less headroom"
            assert group.busy_limit == min(limits[c] for c in group.classes)


def test_segregating_the_strict_class_beats_mixing_it_in() -> None:
    """Embedding's SLO leaves a GPU only 40% busy wherever it runs; the others use 90% on GPUs of their own."""
    cost = {"llm": 0.01, "embedding": 0.01, "asr": 0.01}
    limits = {"llm": 0.9, "embedding": 0.4, "asr": 0.9}
    traffic = {"llm": 45.0, "embedding": 40.0, "asr": 45.0}  # work 0.45 + 0.40 + 0.45
    plan = arm_plan("shared", "mps", fit(cost, limits), RAYS, traffic, 0.0)
    assert plan.gpus == 2 and {tuple(g.classes): g.gpus for g in plan.groups} == {("embedding",): 1,
                                                                                  ("llm", "asr"): 1}
    assert plan.growth == pytest.approx(1.0) and plan.first_limit in ("embedding p95", "llm p95")
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
    assert plan.first_limit == "embedding p95"


def test_growth_is_the_factor_at_which_the_first_group_fills() -> None:
    assert growth([0.5, 0.5], [0.5, 1.0], [1, 1]) == pytest.approx(1.0)
    assert growth([0.25, 0.5], [0.5, 1.0], [1, 1]) == pytest.approx(min(0.5 / 0.25, 1.5 / 0.75))


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
    assert thin.extrapolation == ["the headroom 20% is below the model's held-out error 30%"]


def test_the_cone_of_the_rays() -> None:
    assert in_cone({"llm": 1, "embedding": 1}, [{"llm": 1}, {"embedding": 1}])
    assert not in_cone({"llm": 1, "asr": 1}, [{"llm": 1}, {"embedding": 1}])
    assert in_cone({"llm": 2, "embedding": 8}, [{"llm": 1, "embedding": 4}])
