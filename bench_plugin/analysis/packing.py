"""Packing: how many GPUs hold a traffic within an arm's envelope, how the classes go on them, what it saves.

The envelope model (analysis/envelope_model.py) makes every GPU of an arm a simplex: a GPU whose loaded
classes are ``S`` holds a load ``x`` while ``w · x ≤ U_S``, ``U_S = min_{c ∈ S} U_c``. With headroom
``h`` a plan loads a GPU only to ``U_S / (1 + h)``, so the traffic can grow by ``1 + h`` before any GPU
reaches its boundary. A class's traffic ``T_c`` is divisible over GPUs and needs the work ``W_c = w_c T_c``.

**Exclusive arms** (each class on devices of its own): ``n_c = ⌈W_c (1 + h) / U_c⌉``.

**Shared arms**: order the classes by ``U`` from the strictest, ``U_1 ≤ U_2 ≤ U_3``. A GPU whose strictest
class is ``c_i`` holds ``U_i`` whichever of the looser classes it also carries, so it may as well be able
to carry all of them: only the nested groups ``G_i = {c_i, c_i+1, ...}`` matter. ``n_i`` GPUs of group
``G_i`` hold the traffic exactly when, for every ``i`` (Hall's condition on the staircase of which class
may go where)::

    Σ_{j ≤ i} W_j ≤ Σ_{j ≤ i} n_j U_j / (1 + h)

The plan is the least ``Σ n_i`` over every ``n_1`` from its least to all the work on ``G_1``, every ``n_2``
likewise, and the ``n_3`` the rest needs: an exhaustive search, exact for the model, in at most a few
thousand steps at the sizes teams run (tens of GPUs). Of equal counts, the one that absorbs the most growth.
The classes are then placed from the strictest group up, each group filled with the strictest classes
still unplaced, which the condition above guarantees is feasible.

**Growth** a plan absorbs before it needs another GPU: the largest ``g`` with ``g Σ_{j ≤ i} W_j ≤ Σ_{j ≤ i}
n_j U_j`` for every ``i``; the ``i`` that binds names the criterion that breaks first.

**Validity**: a plan rests on the model. Each group's per-GPU load must lie in the cone of the rays the
model was fit on (restricted to the classes of one device), and keep its GPUs no busier than any stage
measured with each of its classes loaded; else the plan says it is an extrapolation. A headroom below
the model's held-out error is named too.
"""

from __future__ import annotations

import math

import numpy as np

from bench_plugin.results.plan import ArmPlan, GroupPlan, PlanDocument, TrafficPlan
from bench_plugin.results.summary import EnvelopeFit, EnvelopeRay, Summary
from bench_plugin.scenario import class_rank

EPS = 1e-9


def _ceil(x: float) -> int:
    return max(0, math.ceil(x - EPS))


def _shared(work: list[float], limits: list[float], headroom: float) -> tuple[list[int], float]:
    """The least GPUs per nested group (module docstring) for the classes' ``work``, strictest first, and the
    growth that plan absorbs."""
    caps = [u / (1 + headroom) for u in limits]
    best: tuple[int, float, list[int]] | None = None

    def search(i: int, chosen: list[int], room: float) -> None:
        nonlocal best
        done = sum(work[:i])
        if i == len(work) - 1:  # the loosest group takes what is left
            counts = [*chosen, _ceil((sum(work) - room) / caps[i]) if caps[i] > 0 else 10**9]
            total = sum(counts)
            g = growth(work, limits, counts)
            if best is None or total < best[0] or (total == best[0] and g > best[1] + EPS):
                best = (total, g, counts)
            return
        need = max(0.0, done + work[i] - room)  # the work of c_1..c_i that c_1..c_{i-1}'s groups cannot take
        lowest = _ceil(need / caps[i]) if caps[i] > 0 else 10**9
        highest = max(lowest, _ceil(max(0.0, sum(work) - room) / caps[i]) if caps[i] > 0 else lowest)
        for n in range(lowest, highest + 1):
            search(i + 1, [*chosen, n], room + n * caps[i])

    search(0, [], 0.0)
    assert best is not None
    return best[2], best[1]


def growth(work: list[float], limits: list[float], counts: list[int]) -> float:
    """The largest factor on every class's work that the nested groups ``counts`` still hold at their limits."""
    g = math.inf
    for i in range(len(work)):
        need = sum(work[:i + 1])
        if need > 0:
            g = min(g, sum(n * u for n, u in zip(counts[:i + 1], limits[:i + 1], strict=True)) / need)
    return g


def _binding(work: list[float], limits: list[float], counts: list[int]) -> int:
    """The prefix of classes whose groups fill first as the traffic grows (the last class of it)."""
    ratios = [sum(n * u for n, u in zip(counts[:i + 1], limits[:i + 1], strict=True)) / sum(work[:i + 1])
              if sum(work[:i + 1]) > 0 else math.inf for i in range(len(work))]
    return int(np.argmin(ratios))


def in_cone(direction: dict[str, float], rays: list[dict[str, float]]) -> bool:
    """Whether ``direction`` is a non-negative combination of ``rays`` (each a class -> rate mix)."""
    from scipy.optimize import nnls  # imported when first needed: analysis only

    classes = sorted({c for r in [direction, *rays] for c in r})
    if not rays:
        return False
    matrix = np.array([[r.get(c, 0.0) / max(sum(r.values()), EPS) for r in rays] for c in classes])
    target = np.array([direction.get(c, 0.0) for c in classes]) / max(sum(direction.values()), EPS)
    _, residual = nnls(matrix, target)
    return bool(residual <= 1e-6)


def arm_plan(arm: str, sharing: str | None, fit: EnvelopeFit | None, rays: list[EnvelopeRay],
             traffic: dict[str, float], headroom: float) -> ArmPlan:
    """How the arm holds ``traffic`` with ``headroom`` (module docstring); ``gpus`` None with a note when its
    envelope has no model, or the model does not cover a class of the traffic."""
    if fit is None:
        return ArmPlan(arm=arm, sharing=sharing, gpus=None, note="no envelope model: too few probes to fit one")
    wanted = {c: t for c, t in traffic.items() if t > 0}
    missing = [c for c in wanted if c not in fit.cost or c not in fit.busy_limit]
    if missing:
        return ArmPlan(arm=arm, sharing=sharing, gpus=None,
                       note=f"its envelope model does not cover {', '.join(missing)}")
    fitted = [r.mix for r in rays if r.name in fit.fitted_on]
    groups: list[GroupPlan] = []
    grow, first = math.inf, None
    for device in fit.devices:
        classes = sorted((c for c in device if c in wanted), key=lambda c: (fit.busy_limit[c], c))
        if not classes:
            continue
        work = [fit.cost[c] * wanted[c] for c in classes]
        limits = [fit.busy_limit[c] for c in classes]
        counts, g = _shared(work, limits, headroom)
        if g < grow:
            grow = g
            first = fit.limited_by.get(classes[_binding(work, limits, counts)])
        groups += _place(classes, work, limits, counts, headroom, fit, wanted)
    extrapolation = []
    for group in groups:
        device = next(d for d in fit.devices if group.classes[0] in d)
        mine = [{c: r for c, r in ray.items() if c in device and r > 0} for ray in fitted]
        if not in_cone(group.load, [m for m in mine if m]):
            extrapolation.append(f"{' + '.join(group.classes)} in the proportions "
                                 f"{':'.join(f'{group.load[c]:.3g}' for c in group.classes)} lies outside the rays "
                                 f"the model was fit on")
    for group in groups:
        least = min(group.classes, key=lambda c: fit.measured_busy.get(c, 0.0))
        reached = fit.measured_busy.get(least, 0.0)
        if fit.measured_busy and group.busy > reached + EPS:
            extrapolation.append(f"{' + '.join(group.classes)} would keep each GPU {group.busy:.2f} busy, beyond the "
                                 f"{reached:.2f} measured with {least} loaded")
    held = [abs(e) for e in fit.held_out_error.values() if e is not None]
    if held and max(held) > headroom:
        extrapolation.append(f"the headroom {headroom:.0%} is below the model's held-out error {max(held):.0%}")
    return ArmPlan(arm=arm, sharing=sharing, gpus=sum(g.gpus for g in groups), groups=groups,
                   growth=None if math.isinf(grow) else grow, first_limit=first, extrapolation=extrapolation)


def _place(classes: list[str], work: list[float], limits: list[float], counts: list[int], headroom: float,
           fit: EnvelopeFit, traffic: dict[str, float]) -> list[GroupPlan]:
    """Each nested group's share of each class: filled from the strictest group up with the strictest classes
    still unplaced."""
    left = list(work)
    out = []
    for i, n in enumerate(counts):
        if n == 0:
            continue
        room = n * limits[i] / (1 + headroom)
        taken: dict[str, float] = {}
        for j in range(i, len(classes)):
            share = min(left[j], room)
            if share > EPS:
                taken[classes[j]] = share
                left[j] -= share
                room -= share
        if not taken:
            continue
        strictest = min(taken, key=lambda c: fit.busy_limit[c])
        ordered = sorted(taken, key=class_rank)
        out.append(GroupPlan(
            classes=ordered, gpus=n,
            load={c: traffic[c] * taken[c] / work[classes.index(c)] for c in ordered},
            busy=sum(taken.values()) / n, busy_limit=fit.busy_limit[strictest],
            limited_by=fit.limited_by.get(strictest, strictest)))
    return out


def with_costs(plans: list[ArmPlan], control: str | None, gpu_cost: float | None) -> list[ArmPlan]:
    """The plans with their cost and what each saves against the control's (each class on its own GPUs)."""
    base = next((p.gpus for p in plans if p.arm == control), None)
    out = []
    for plan in plans:
        update: dict[str, float | int | None] = {}
        if plan.gpus is not None:
            update["cost"] = None if gpu_cost is None else plan.gpus * gpu_cost
            if base is not None:
                update["saved_gpus"] = base - plan.gpus
                update["saved_cost"] = None if gpu_cost is None else (base - plan.gpus) * gpu_cost
        out.append(plan.model_copy(update=update))
    return out


def best_arm(plans: list[ArmPlan]) -> str | None:
    """The arm with the fewest GPUs (of equals, the most growth) among plans that rest on validated ground."""
    sound = [p for p in plans if p.gpus is not None and not p.extrapolation]
    if not sound:
        return None
    return min(sound, key=lambda p: (p.gpus, -(p.growth or 0.0))).arm


def capacity_plans(summary: Summary, campaign: str, traffics: list[dict[str, float]], headroom: float,
                   gpu_cost: float | None) -> PlanDocument:
    """Every arm's plan for each traffic, from the campaign's envelopes: plan.json's document."""
    comparison = summary.comparison
    plans = []
    for traffic in traffics:
        arms = []
        for name, arm in (comparison.arms.items() if comparison else []):
            envelope = arm.envelope
            arms.append(arm_plan(name, arm.sharing, envelope.model if envelope else None,
                                 envelope.rays if envelope else [], traffic, headroom))
        arms = with_costs(arms, comparison.control if comparison else None, gpu_cost)
        plans.append(TrafficPlan(traffic=dict(traffic), arms=arms, best=best_arm(arms)))
    return PlanDocument(campaign=campaign, headroom=headroom, gpu_cost=gpu_cost, method=METHOD, plans=plans)


METHOD = ("Each arm's envelope model makes a GPU a simplex w·x <= U_S (U_S the busy limit of its strictest loaded "
          "class); a GPU is loaded to U_S / (1 + headroom). Exclusive arms: each class on GPUs of its own, "
          "ceil(w_c T_c (1 + h) / U_c). Shared arms: an exhaustive search over the nested groups of classes (the "
          "strictest with every looser one), exact for the model with traffic divisible over GPUs; of equal GPU "
          "counts, the plan that absorbs the most growth. Savings are against the control arm's plan. A plan "
          "whose per-GPU mix lies outside the rays the model was fit on, or whose headroom is below the model's "
          "held-out error, is marked as an extrapolation (analysis/packing.py; docs/analysis.md).")
