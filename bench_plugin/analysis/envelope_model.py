"""Envelope model: why an arm's envelope has its shape, fit to its probes, and tested on a held-out ray.

One device serves the classes that share it; each request/s of class ``k`` takes a share ``w_k`` of it,
so a load ``λ`` keeps it busy ``u = Σ_k w_k λ_k`` (the sum over the classes on that device only). Each
criterion ``j`` (a class's P95, its TTFT or TPOT P95) grows as a queue's does as ``u`` nears 1::

    P95_j(λ) = a_j + b_j / (1 - u)

``a_j`` is what the class takes with nothing queued, ``b_j`` how much it suffers from the device being
busy, and ``w`` is shared by every criterion: the interference matrix ``∂P95_j / ∂λ_k = b_j w_k / (1 - u)²``
is rank one, every class slowing every other in proportion to its cost. It is the law of an M/M/1
queue (analysis.md, "The contention simulator": a = L, b = ln 20 / μ, w = 1/μ), and the shape of any
device whose latency is set by its busy fraction. Along a ray ``m``, criterion ``j`` reaches its SLO
``T_j`` at the scale ``s_j = (1 - b_j / (T_j - a_j)) / (w · m)``, and the boundary is the lowest ``s_j`` over
the criteria of the classes ``m`` loads (each on its own device where the arm runs them apart). So each
device's envelope is the simplex ``w · λ ≤ U`` with ``U = min_j (1 - b_j / (T_j - a_j))`` over its loaded
classes: what analysis/packing.py packs.

The fit: every completed stage of the rays not held out gives, per loaded class, its P95 figures and
the realised per-class load; points beyond four times their SLO (a queue that no longer settles in a
stage) and without a figure are left out. The parameters, each positive (fit as logarithms), minimise
the squared log-ratio of model to measurement (soft-L1 robust loss, scipy's least_squares). The fit
error is the root mean square relative error over its points; a held-out ray's error is
``(predicted - measured) / measured`` of its boundary scale (the mean over repeats). The model is
stated valid for load mixes in the cone of the rays it was fit on, up to the loads measured: outside
either, its answer is an extrapolation, and packing says so.
"""

from __future__ import annotations

import math

import numpy as np

from bench_plugin.analysis.objectives import ClassObjectives
from bench_plugin.results.summary import EnvelopeFit, EnvelopeRay, StageSummary, TrialSummary

FORM = "P95_j = a_j + b_j / (1 - u), u = Σ_k w_k λ_k over the classes on the device"
MAX_SLO_MULTIPLE = 4.0
"""Points whose figure is beyond this multiple of its SLO are left out of the fit."""
Criterion = tuple[str, str]
"""(class, ``p95`` | ``ttft p95`` | ``tpot p95``)."""


def criteria_limits(objectives: dict[str, ClassObjectives]) -> dict[Criterion, float]:
    """Every latency criterion of every class and its SLO (ms)."""
    out: dict[Criterion, float] = {}
    for name, spec in objectives.items():
        out[(name, "p95")] = spec.slo.p95_ms
        if name == "llm" and spec.slo.ttft_p95_ms is not None:
            out[(name, "ttft p95")] = spec.slo.ttft_p95_ms
        if name == "llm" and spec.slo.tpot_p95_ms is not None:
            out[(name, "tpot p95")] = spec.slo.tpot_p95_ms
    return out


def _figure(stage: StageSummary, criterion: Criterion) -> float | None:
    stats = stage.classes.get(criterion[0])
    if stats is None or stats.requests == 0:
        return None
    table = {"p95": stats.latency_ms, "ttft p95": stats.ttft_ms, "tpot p95": stats.tpot_ms}[criterion[1]]
    return table.get("p95") if table else None


def arm_devices(trials: list[TrialSummary]) -> list[list[str]]:
    """The classes that share a device in the arm: its segments' classes (from its search results)."""
    seen: dict[int, list[str]] = {}
    for trial in trials:
        for result in trial.search:
            seen.setdefault(result.segment, list(result.classes))
    return [classes for _, classes in sorted(seen.items())]


Point = tuple[dict[str, float], Criterion, float]
"""(the stage's per-class load on the criterion's device, the criterion, its measured P95 in ms)."""


def fit_points(trials: list[TrialSummary], rays: list[str], limits: dict[Criterion, float],
               devices: list[list[str]]) -> list[Point]:
    """The measurements the model is fit on: the completed stages of the probes along ``rays``."""
    device_of = {name: classes for classes in devices for name in classes}
    out: list[Point] = []
    for trial in trials:
        stages = {i for probe in trial.probes if probe.ray in rays for i in probe.stages}
        for stage in trial.stages:
            if stage.index not in stages or stage.status != "completed":
                continue
            load = stage.load
            for criterion, limit in limits.items():
                name = criterion[0]
                if load.get(name, 0.0) <= 0:
                    continue
                value = _figure(stage, criterion)
                if value is None or value <= 0 or value > MAX_SLO_MULTIPLE * limit:
                    continue
                out.append(({k: v for k, v in load.items() if k in device_of.get(name, [name])}, criterion, value))
    return out


class Fitted:
    """The model's parameters, and what it predicts."""

    def __init__(self, cost: dict[str, float], criteria: dict[Criterion, tuple[float, float]],
                 limits: dict[Criterion, float], devices: list[list[str]]) -> None:
        self.cost, self.criteria, self.limits, self.devices = cost, criteria, limits, devices

    def p95(self, load: dict[str, float], criterion: Criterion) -> float:
        """The criterion's predicted P95 (ms) under ``load`` (the loads on its device); infinite past saturation."""
        u = sum(self.cost.get(k, 0.0) * v for k, v in load.items())
        a, b = self.criteria[criterion]
        return a + b / (1.0 - u) if u < 1.0 else math.inf

    def headroom(self, criterion: Criterion) -> float:
        """U_j: the device's busy fraction at which the criterion reaches its SLO (0 when even idle it does not)."""
        a, b = self.criteria[criterion]
        room = self.limits[criterion] - a
        return max(0.0, 1.0 - b / room) if room > 0 else 0.0

    def class_limit(self, name: str) -> tuple[float, Criterion | None]:
        """U_c: the lowest headroom over the class's criteria, and the criterion that sets it."""
        found = [(self.headroom(c), c) for c in self.criteria if c[0] == name]
        return min(found) if found else (1.0, None)

    def boundary(self, mix: dict[str, float]) -> tuple[float, Criterion | None]:
        """The predicted boundary scale along ``mix`` and the criterion that sets it."""
        best: tuple[float, Criterion | None] = (math.inf, None)
        for classes in self.devices:
            mine = {k: v for k, v in mix.items() if k in classes and v > 0}
            busy = sum(self.cost.get(k, 0.0) * v for k, v in mine.items())
            if not mine or busy <= 0:
                continue
            for name in mine:
                limit, criterion = self.class_limit(name)
                best = min(best, (limit / busy, criterion), key=lambda x: x[0])
        return best


def fit(points: list[Point], limits: dict[Criterion, float], devices: list[list[str]]) -> Fitted | None:
    """The least-squares fit (module docstring); None without enough points (two per parameter)."""
    from scipy.optimize import least_squares  # imported when first needed: analysis only

    classes = sorted({k for load, _, _ in points for k in load})
    criteria = sorted({c for _, c, _ in points})
    if not points or len(points) < 2 * (len(classes) + 2 * len(criteria)):
        return None
    busiest = max(sum(load.values()) for load, _, _ in points)
    lowest = {c: min(v for _, cc, v in points if cc == c) for c in criteria}
    start = np.concatenate([np.full(len(classes), math.log(0.5 / busiest)),
                            [x for c in criteria for x in (math.log(0.8 * lowest[c]), math.log(0.2 * lowest[c]))]])
    loads = np.array([[load.get(k, 0.0) for k in classes] for load, _, _ in points])
    which = np.array([criteria.index(c) for _, c, _ in points])
    measured = np.log(np.array([v for _, _, v in points]))

    def residuals(theta: np.ndarray) -> np.ndarray:
        w = np.exp(theta[:len(classes)])
        a = np.exp(theta[len(classes)::2][:len(criteria)])
        b = np.exp(theta[len(classes) + 1::2][:len(criteria)])
        u = loads @ w
        # past saturation: far off, smoothly (and never zero)
        slack = np.maximum(np.where(u < 1.0, 1.0 - u, 1e-3 * np.exp(-np.minimum(u - 1.0, 50.0))), 1e-12)
        return np.log(a[which] + b[which] / slack) - measured

    found = least_squares(residuals, start, loss="soft_l1", f_scale=0.2, max_nfev=5000)
    theta = found.x
    cost = dict(zip(classes, np.exp(theta[:len(classes)]).tolist(), strict=True))
    fitted = {c: (float(np.exp(theta[len(classes) + 2 * i])), float(np.exp(theta[len(classes) + 2 * i + 1])))
              for i, c in enumerate(criteria)}
    return Fitted(cost, fitted, {c: limits[c] for c in criteria}, devices)


def fit_error(model: Fitted, points: list[Point]) -> float | None:
    """Root mean square relative error of the model's P95s over ``points``."""
    errors = [(model.p95(load, c) - v) / v for load, c, v in points]
    finite = [e for e in errors if math.isfinite(e)]
    return math.sqrt(sum(e * e for e in finite) / len(finite)) if finite else None


def arm_model(trials: list[TrialSummary], rays: list[EnvelopeRay],
              objectives: dict[str, ClassObjectives]) -> EnvelopeFit | None:
    """The arm's envelope model fit on its rays not held out, with each ray's prediction and the held-out
    rays' errors (None when too few probes were measured to fit it)."""
    limits = criteria_limits(objectives)
    devices = arm_devices(trials)
    fitted_on = [r.name for r in rays if not r.held_out]
    points = fit_points(trials, fitted_on, limits, devices)
    model = fit(points, limits, devices)
    if model is None:
        return None
    predicted = {r.name: model.boundary(r.mix)[0] for r in rays}
    held = {r.name: (predicted[r.name] - r.scale.mean) / r.scale.mean
            for r in rays if r.held_out and r.scale.mean and math.isfinite(predicted[r.name])}
    validated = f"load mixes in the cone of the rays {', '.join(fitted_on)}, up to the loads measured"
    if held:
        worst = max(abs(e) for e in held.values())
        validated += f"; it predicts the held-out ray{'s' if len(held) > 1 else ''} within {worst:.0%}"
    else:
        validated += "; no held-out ray tested its predictions"
    return EnvelopeFit(
        form=FORM, fitted_on=fitted_on, devices=devices, cost=model.cost,
        criteria={f"{c[0]} {c[1]}": ab for c, ab in model.criteria.items()},
        busy_limit={name: model.class_limit(name)[0] for name in model.cost},
        limited_by={name: f"{c[0]} {c[1]}" for name in model.cost if (c := model.class_limit(name)[1])},
        measured_busy=measured_busy(model, trials, fitted_on),
        points=len(points),
        fit_error=fit_error(model, points),
        rays={name: (s if math.isfinite(s) else None) for name, s in predicted.items()},
        held_out_error={name: held.get(name) for name in (r.name for r in rays if r.held_out)},
        validated=validated,
    )


def measured_busy(model: Fitted, trials: list[TrialSummary], rays: list[str]) -> dict[str, float]:
    """Class -> the highest busy fraction of its device (by the model's costs) in any completed stage of ``rays``
    that loaded it."""
    device_of = {name: classes for classes in model.devices for name in classes}
    out: dict[str, float] = {}
    for trial in trials:
        stages = {i for probe in trial.probes if probe.ray in rays for i in probe.stages}
        for stage in trial.stages:
            if stage.index not in stages or stage.status != "completed":
                continue
            for name, load in stage.load.items():
                if load > 0 and name in model.cost:
                    u = sum(model.cost.get(k, 0.0) * v for k, v in stage.load.items() if k in device_of[name])
                    out[name] = max(out.get(name, 0.0), u)
    return out


def predicted_scale(fit: EnvelopeFit, mix: dict[str, float]) -> float | None:
    """The boundary scale the stored model gives along ``mix`` (None where it covers none of the mix's classes)."""
    best = math.inf
    for classes in fit.devices:
        mine = {k: v for k, v in mix.items() if k in classes and v > 0 and k in fit.cost}
        busy = sum(fit.cost[k] * v for k, v in mine.items())
        if busy > 0:
            best = min(best, min(fit.busy_limit.get(k, 1.0) for k in mine) / busy)
    return None if math.isinf(best) else best
