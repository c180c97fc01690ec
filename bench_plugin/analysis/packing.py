"""Packing: how many GPUs hold a traffic within an arm's envelope, how the classes go on them, what it saves.

The envelope model (analysis/envelope_model.py) makes every GPU a polytope: a GPU carrying the classes
``S`` at the per-class load ``x`` keeps every SLO while ``w_j · x ≤ U_j`` for each criterion ``j`` of ``S``.
A plan chooses ``n_S`` GPUs for each set of classes ``S`` (every nonempty subset of the classes that share
a device in the arm; each class alone where the arm runs them apart) and the traffic ``y_S`` they carry,
spread evenly over their GPUs. With headroom ``h`` every GPU is loaded to at most ``1 / (1 + h)`` of its
limits, which is the same as holding ``(1 + h) T`` at the limits themselves. The least GPUs is then the
mixed-integer linear program::

    minimise Σ_S n_S   subject to   Σ_{S ∋ c} y_{S,c} = (1 + h) T_c   for every class c,
                                    w_j · y_S ≤ U_j n_S               for every S and criterion j of S,
                                    n_S integer ≥ 0, y ≥ 0

solved exactly (scipy's milp, HiGHS branch and bound, with no optimality gap): exact for the model, with
traffic divisible over GPUs. Of the plans with that many GPUs, the one that absorbs the most growth is
taken: a second program fixes ``Σ n_S`` and maximises ``g`` with ``Σ_{S ∋ c} y_{S,c} = g T_c`` at the limits;
``g ≥ 1 + h`` by the first. ``g`` is the **growth** the plan absorbs before it needs another GPU, and the
constraints that bind at ``g`` name the criterion that breaks first. The groups shown carry ``y_S / g``.

**Validity**: a plan rests on the model. Each group's per-GPU mix must lie in the cone of the rays the
model was fit on (restricted to the classes of one device), and keep every criterion's ``u_j`` within
the busiest stage it was fit on; else the plan says it is an extrapolation. A headroom below the model's
held-out error is named too. **Savings** are against the control arm's plan.
"""

from __future__ import annotations

import math
from itertools import combinations

import numpy as np

from bench_plugin.analysis.envelope_model import criterion_of
from bench_plugin.results.limits import HIGHEST_TRIED, Limit
from bench_plugin.results.plan import ArmPlan, GroupPlan, PlanDocument, TrafficPlan
from bench_plugin.results.summary import CriterionFit, EnvelopeFit, EnvelopeRay, Summary
from bench_plugin.results.words import ENDED_SEARCHES, SearchStatus
from bench_plugin.scenario import class_rank

EPS = 1e-9


class Infeasible(Exception):
    """The model says no number of GPUs holds the traffic (a class that misses its SLO even alone)."""


def _subsets(classes: list[str]) -> list[tuple[str, ...]]:
    return [s for k in range(1, len(classes) + 1) for s in combinations(classes, k)]


class Program:
    """The packing programs of one device's classes (module docstring)."""

    def __init__(self, classes: list[str], rows: list[CriterionFit]) -> None:
        self.classes = classes
        self.rows = rows
        self.sets = _subsets(classes)
        self.y_index: dict[tuple[tuple[str, ...], str], int] = {}
        for s in self.sets:
            for c in s:
                self.y_index[(s, c)] = len(self.sets) + len(self.y_index)
        self.size = len(self.sets) + len(self.y_index)

    def _limits(self, extra: int) -> tuple[np.ndarray, list[tuple[tuple[str, ...], CriterionFit]]]:
        """The rows w_j · y_S - U_j n_S <= 0, one per set and criterion of its classes."""
        out, which = [], []
        for i, s in enumerate(self.sets):
            for row in self.rows:
                if row.workload not in s:
                    continue
                line = np.zeros(self.size + extra)
                line[i] = -row.limit
                for c in s:
                    line[self.y_index[(s, c)]] = row.weights.get(c, 0.0)
                out.append(line)
                which.append((s, row))
        return np.array(out), which

    def _serve(self, extra: int) -> np.ndarray:
        """Per class, the sum of its y over the sets that carry it."""
        out = np.zeros((len(self.classes), self.size + extra))
        for (_, c), j in self.y_index.items():
            out[self.classes.index(c), j] = 1.0
        return out

    def least(self, traffic: dict[str, float], headroom: float) -> int:
        """The least GPUs that hold ``(1 + headroom) * traffic``; Infeasible when none does."""
        from scipy.optimize import Bounds, LinearConstraint, milp  # imported when first needed: analysis only

        limits, _ = self._limits(0)
        demand = np.array([(1 + headroom) * traffic[c] for c in self.classes])
        cost = np.concatenate([np.ones(len(self.sets)), np.zeros(len(self.y_index))])
        found = milp(cost, constraints=[LinearConstraint(limits, -np.inf, 0.0),
                                        LinearConstraint(self._serve(0), demand, demand)],
                     integrality=np.concatenate([np.ones(len(self.sets)), np.zeros(len(self.y_index))]),
                     bounds=Bounds(0, np.inf), options={"mip_rel_gap": 0.0})
        if not found.success:
            raise Infeasible(found.message)
        return round(found.fun)

    def most_growth(self, traffic: dict[str, float], gpus: int) -> tuple[float, dict[tuple[str, ...], int],
                                                                         dict[tuple[str, ...], dict[str, float]]]:
        """With ``gpus`` GPUs: the largest g that holds g * traffic, the GPUs per set and each set's traffic at g."""
        from scipy.optimize import Bounds, LinearConstraint, milp

        limits, _ = self._limits(1)
        serve = self._serve(1)
        serve[:, -1] = [-traffic[c] for c in self.classes]  # Σ y - g T = 0
        total = np.concatenate([np.ones(len(self.sets)), np.zeros(len(self.y_index) + 1)])
        cost = np.zeros(self.size + 1)
        cost[-1] = -1.0
        found = milp(cost, constraints=[LinearConstraint(limits, -np.inf, 0.0),
                                        LinearConstraint(serve, 0.0, 0.0),
                                        LinearConstraint(total[None, :], gpus, gpus)],
                     integrality=np.concatenate([np.ones(len(self.sets)), np.zeros(len(self.y_index) + 1)]),
                     bounds=Bounds(0, np.concatenate([np.full(self.size, np.inf), [1e6]])),
                     options={"mip_rel_gap": 0.0})
        if not found.success:
            raise Infeasible(found.message)
        x = found.x
        counts = {s: round(x[i]) for i, s in enumerate(self.sets) if round(x[i]) > 0}
        carried = {s: {c: float(x[self.y_index[(s, c)]]) for c in s} for s in counts}
        return float(x[-1]), counts, carried

    def binding(self, counts: dict[tuple[str, ...], int], carried: dict[tuple[str, ...], dict[str, float]]
                ) -> list[CriterionFit]:
        """The criteria whose limit the sets' traffic reaches (within rounding): what breaks first."""
        out: list[CriterionFit] = []
        for s, n in counts.items():
            for row in self.rows:
                used = sum(row.weights.get(c, 0.0) * carried[s][c] for c in s)
                if row.workload in s and used >= row.limit * n * (1 - 1e-6) - 1e-9 and row not in out:
                    out.append(row)
        return out


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
             traffic: dict[str, float], headroom: float, floors: dict[str, float] | None = None) -> ArmPlan:
    """How the arm holds ``traffic`` with ``headroom`` (module docstring); ``gpus`` None with a note when its
    envelope has no model, the model covers not every class of the traffic, or no GPUs would do. ``floors``: class
    -> the load it held alone on a GPU of its own at the search's maximum (:func:`held_alone`), for a class the
    model does not cover: its GPUs are counted at that load (a floor of what one holds, so at most as many)."""
    if fit is None:
        return ArmPlan(arm=arm, sharing=sharing, gpus=None, note="no envelope model: too few probes to fit one")
    wanted = {c: t for c, t in traffic.items() if t > 0}
    rows = fit.criteria
    missing = [c for c in wanted if not any(r.workload == c for r in rows.values())
               or not any(c in d for d in fit.devices)]
    held = floors or {}
    floored = {c: held[c] for c in missing if held.get(c, 0.0) > 0}
    if unknown := [c for c in missing if c not in floored]:
        return ArmPlan(arm=arm, sharing=sharing, gpus=None,
                       note=f"its envelope model does not cover {', '.join(unknown)}")
    labels = {id(row): name for name, row in rows.items()}
    groups: list[GroupPlan] = []
    first: list[Limit]
    grow, first = math.inf, []
    for c, floor in sorted(floored.items(), key=lambda kv: class_rank(kv[0])):
        n = max(1, math.ceil(wanted[c] * (1 + headroom) / floor - EPS))
        groups.append(GroupPlan(classes=[c], gpus=n, load={c: wanted[c]}, used=wanted[c] / n / floor,
                                limited_by=f"{c} held alone at {floor:.3g} req/s", floor=floor))
        if (g := n * floor / wanted[c]) < grow - EPS:
            grow, first = g, [Limit(workload=c, note=HIGHEST_TRIED)]
        del wanted[c]
    for device in fit.devices:
        classes = sorted((c for c in device if c in wanted), key=class_rank)
        if not classes:
            continue
        mine = [r for r in rows.values() if r.workload in classes]
        program = Program(classes, mine)
        try:
            gpus = program.least({c: wanted[c] for c in classes}, headroom)
            g, counts, carried = program.most_growth({c: wanted[c] for c in classes}, gpus)
        except Infeasible:
            return ArmPlan(arm=arm, sharing=sharing, gpus=None,
                           note=f"by its model no number of GPUs holds {', '.join(classes)} within the SLOs")
        if g < grow - EPS:
            grow, first = g, [_criterion(labels[id(r)], r) for r in sorted(program.binding(counts, carried),
                                                                            key=lambda r: labels[id(r)])]
        groups += _groups(counts, carried, g, mine, labels)
    extrapolation = _extrapolation([g for g in groups if g.floor is None], fit, rays, rows, headroom)
    return ArmPlan(arm=arm, sharing=sharing, gpus=sum(g.gpus for g in groups), groups=groups,
                   growth=None if math.isinf(grow) else grow, first_limit=first,
                   extrapolation=extrapolation)


def _criterion(name: str, row: CriterionFit) -> Limit:
    """The envelope model's criterion held under ``name`` in EnvelopeFit.criteria as what limits a plan."""
    criterion = criterion_of(name, row)
    return Limit(workload=row.workload, figure=criterion[1] if criterion else None)


def _groups(counts: dict[tuple[str, ...], int], carried: dict[tuple[str, ...], dict[str, float]], g: float,
            rows: list[CriterionFit], labels: dict[int, str]) -> list[GroupPlan]:
    out = []
    for s, n in counts.items():
        load = {c: carried[s][c] / g for c in s if carried[s][c] / g > EPS}
        if not load:
            continue
        per_gpu = {c: v / n for c, v in load.items()}
        used = [(sum(row.weights.get(c, 0.0) * v for c, v in per_gpu.items()) / row.limit if row.limit > 0
                 else math.inf, labels[id(row)]) for row in rows if row.workload in load]
        worst = max(used) if used else (0.0, "-")
        out.append(GroupPlan(classes=sorted(load, key=class_rank), gpus=n,
                             load={c: load[c] for c in sorted(load, key=class_rank)}, used=worst[0],
                             limited_by=worst[1]))
    return out


def _extrapolation(groups: list[GroupPlan], fit: EnvelopeFit, rays: list[EnvelopeRay],
                   rows: dict[str, CriterionFit], headroom: float) -> list[str]:
    out = []
    fitted = [r.mix for r in rays if r.name in fit.fitted_on]
    for group in groups:
        device = next(d for d in fit.devices if group.classes[0] in d)
        mine = [{c: r for c, r in ray.items() if c in device and r > 0} for ray in fitted]
        if not in_cone(group.load, [m for m in mine if m]):
            out.append(f"{' + '.join(group.classes)} in the proportions "
                       f"{':'.join(f'{group.load[c]:.3g}' for c in group.classes)} lies outside the rays the model "
                       f"was fit on")
        per_gpu = {c: v / group.gpus for c, v in group.load.items()}
        for name, row in rows.items():
            if row.workload in group.classes:
                busy = sum(row.weights.get(c, 0.0) * v for c, v in per_gpu.items())
                if busy > row.measured + EPS:
                    out.append(f"{' + '.join(group.classes)} would take {name} to u {busy:.2f}, beyond the "
                               f"{row.measured:.2f} measured")
    held = [abs(e) for e in fit.held_out_error.values() if e is not None]
    if held and max(held) > headroom:
        out.append(f"the headroom {headroom:.0%} is below the model's held-out error {max(held):.0%}")
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


METHOD = ("Each arm's envelope model makes a GPU a polytope: carrying the classes S at the per-class load x, it "
          "keeps every SLO while w_j·x <= U_j for each criterion j of S. The least GPUs solve a mixed-integer "
          "program (GPUs per set of classes, the traffic each set carries, every GPU at 1/(1 + headroom) of its "
          "limits), exactly (HiGHS, no optimality gap) for the model with traffic divisible over GPUs; of equal "
          "counts, the plan that absorbs the most growth. Savings are against the control arm's plan. A plan "
          "whose per-GPU mix lies outside the rays the model was fit on, that loads a criterion beyond the "
          "busiest stage it was fit on, or whose headroom is below the model's held-out error, is marked as an "
          "extrapolation (analysis/packing.py; docs/analysis.md).")


def held_alone(summary: Summary, arm: str) -> dict[str, float]:
    """Class -> the load at which every repeat's search of it alone on a GPU of the exclusive ``arm`` held the
    search's maximum (status "above the maximum": its boundary lies beyond what was tried); the lowest over the
    repeats. Empty for an arm that does not run each class alone."""
    out: dict[str, float] = {}
    ended: dict[str, list[float | None]] = {}
    for trial in summary.trials:
        if trial.arm != arm:
            continue
        for result in trial.search or []:
            if len(result.classes) == 1 and result.status in ENDED_SEARCHES:
                (name,) = result.classes
                rate = result.mix.get(name, 0.0)
                above = result.status == SearchStatus.ABOVE_MAXIMUM
                held = result.lo * rate if above and result.lo is not None else None
                ended.setdefault(name, []).append(held)
    for name, loads in ended.items():
        if loads and all(load is not None and load > 0 for load in loads):
            out[name] = min(load for load in loads if load is not None)
    return out


def capacity_plans(summary: Summary, campaign: str, traffics: list[dict[str, float]], headroom: float,
                   gpu_cost: float | None) -> PlanDocument:
    """Every arm's plan for each traffic, from the campaign's envelopes: plan.json's document."""
    comparison = summary.comparison
    plans = []
    for traffic in traffics:
        arms = []
        for name, arm in (comparison.arms.items() if comparison else []):
            envelope = arm.envelope
            floors = held_alone(summary, name) if arm.sharing == "exclusive" else None
            arms.append(arm_plan(name, arm.sharing, envelope.model if envelope else None,
                                 envelope.rays if envelope else [], traffic, headroom, floors))
        arms = with_costs(arms, comparison.control if comparison else None, gpu_cost)
        plans.append(TrafficPlan(traffic=dict(traffic), arms=arms, best=best_arm(arms)))
    return PlanDocument(campaign=campaign, headroom=headroom, gpu_cost=gpu_cost, method=METHOD, plans=plans)
