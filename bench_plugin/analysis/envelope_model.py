"""Envelope model: why an arm's envelope has its shape, fit to its probes, and tested on a held-out ray.

Each latency criterion ``j`` (a class's P95, its TTFT or TPOT P95) is served by a device that the classes
sharing it keep busy. One request/s of class ``k`` takes a share ``w_jk`` of what ``j`` can bear, so a load
``λ`` makes ``u_j = Σ_k w_jk λ_k`` (over the classes on that device), and ``j`` grows as a queue's delay does
as ``u_j`` nears 1::

    P95_j(λ) = a_j + b_j / (1 - u_j)

``a_j`` is what the class takes with nothing else queued, ``b_j`` how much it suffers as its device fills,
and the row ``w_j`` is the interference matrix's: ``∂P95_j / ∂λ_k = b_j w_jk / (1 - u_j)²``, each class
slowing ``j`` by its own weight. Under time-slicing, say, one ASR request can take the LLM's turn for a
whole time slice, far more than its own compute: a row per criterion lets the ASR weigh more on the LLM
than on itself. When every row is the same (``w_jk = w_k``) the device has one busy fraction: the M/M/1
law of the contention simulator (analysis.md, "The contention simulator": a = L, b = ln 20 / μ, w = 1/μ).

Along a ray ``m``, criterion ``j`` reaches its SLO ``T_j`` where ``u_j = U_j = 1 - b_j / (T_j - a_j)``, at the
scale ``s_j = U_j / (w_j · m)``; the boundary is the lowest ``s_j`` over the criteria of the classes ``m``
loads (each device apart where the arm runs them apart). So a device carrying the classes ``S`` holds a
load ``x`` while ``w_j · x ≤ U_j`` for every criterion ``j`` of ``S``: a polytope, what analysis/packing.py
packs.

The fit, per criterion: every completed stage of the rays not held out that loads its class gives one
point, its P95 against the realised per-class load of its device; points beyond four times the SLO (a
queue that no longer settles in a stage), without a figure, or from a stage its load generator could not
send (analysis/selfcheck.py: part of that latency is the client's) are left out. Its parameters (a, b and a
weight for each class its points ever load; each positive, fit as a logarithm) minimise the squared
log-ratio of model to measurement (soft-L1 robust loss, scipy's least_squares). A class never loaded
beside it gets no weight: the model knows nothing of it there, and the cone check below says so. The
fit error is the root mean square relative error; a held-out ray's error is ``(predicted - measured) /
measured`` of its boundary scale (the mean over repeats). The model is stated valid for load mixes in
the cone of the rays it was fit on, up to the busiest ``u_j`` measured: outside either, its answer is
an extrapolation, and packing says so.
"""

from __future__ import annotations

import math

import numpy as np

from bench_plugin.analysis.objectives import ClassObjectives
from bench_plugin.results.summary import CriterionFit, EnvelopeFit, EnvelopeRay, StageSummary, TrialSummary
from bench_plugin.results.words import SearchStatus, StageStatus
from bench_plugin.scenario import class_rank

FORM = "P95_j = a_j + b_j / (1 - u_j), u_j = Σ_k w_jk λ_k over the classes on criterion j's device"
MAX_SLO_MULTIPLE = 4.0
"""Points whose figure is beyond this multiple of its SLO are left out of the fit."""
Criterion = tuple[str, str]
"""(class, one of :data:`CRITERION_FIGURES`)."""
CRITERION_FIGURES = ("p95", "ttft p95", "tpot p95")
"""The figures a criterion bounds."""


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


def label(criterion: Criterion) -> str:
    """``llm ttft p95``: the criterion's key in EnvelopeFit.criteria."""
    return f"{criterion[0]} {criterion[1]}"


def criterion_of(key: str, row: CriterionFit) -> Criterion | None:
    """The criterion that EnvelopeFit.criteria holds ``row`` under ``key`` for (the one :func:`label` writes so)."""
    return next(((row.workload, f) for f in CRITERION_FIGURES if label((row.workload, f)) == key), None)


def _figure(stage: StageSummary, criterion: Criterion) -> float | None:
    stats = stage.classes.get(criterion[0])
    if stats is None or stats.requests == 0:
        return None
    table = {"p95": stats.latency_ms, "ttft p95": stats.ttft_ms, "tpot p95": stats.tpot_ms}[criterion[1]]
    return table.get("p95") if table else None


def arm_devices(trials: list[TrialSummary]) -> list[list[str]]:
    """The classes that share a device in the arm: its segments' classes (from its search results)."""
    seen: dict[int, set[str]] = {}
    for trial in trials:
        for result in trial.search:  # a segment's classes: every class some ray of it loads
            seen.setdefault(result.segment, set()).update(result.classes)
    return [sorted(classes, key=class_rank) for _, classes in sorted(seen.items())]


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
            if stage.index not in stages or stage.status != StageStatus.COMPLETED or stage.generator_limited:
                continue
            load = stage.load
            for criterion, limit in limits.items():
                name = criterion[0]
                if load.get(name, 0.0) <= 0:
                    continue
                value = _figure(stage, criterion)
                if value is None or value <= 0 or value > MAX_SLO_MULTIPLE * limit:
                    continue
                out.append(({k: v for k, v in load.items() if k in device_of.get(name, [name]) and v > 0},
                            criterion, value))
    return out


class Row:
    """One criterion's fitted law."""

    def __init__(self, a: float, b: float, weights: dict[str, float], slo_ms: float) -> None:
        self.a, self.b, self.weights, self.slo_ms = a, b, weights, slo_ms

    def busy(self, load: dict[str, float]) -> float:
        """u under ``load`` (classes it has no weight for count for nothing)."""
        return sum(self.weights.get(k, 0.0) * v for k, v in load.items())

    def p95(self, load: dict[str, float]) -> float:
        """The predicted P95 (ms); infinite past saturation."""
        u = self.busy(load)
        return self.a + self.b / (1.0 - u) if u < 1.0 else math.inf

    @property
    def limit(self) -> float:
        """U: the u at which it reaches its SLO (0 when even idle it does not)."""
        room = self.slo_ms - self.a
        return max(0.0, 1.0 - self.b / room) if room > 0 else 0.0


def fit_row(points: list[Point], slo_ms: float) -> Row | None:
    """One criterion's least-squares fit (module docstring); None without two points per parameter."""
    from scipy.optimize import least_squares  # imported when first needed: analysis only

    classes = sorted({k for load, _, _ in points for k in load}, key=class_rank)
    if not classes or len(points) < 2 * (len(classes) + 2):
        return None
    busiest = max(sum(load.values()) for load, _, _ in points)
    lowest = min(v for _, _, v in points)
    start = np.array([math.log(0.8 * lowest), math.log(0.2 * lowest), *[math.log(0.5 / busiest)] * len(classes)])
    loads = np.array([[load.get(k, 0.0) for k in classes] for load, _, _ in points])
    measured = np.log(np.array([v for _, _, v in points]))

    def residuals(theta: np.ndarray) -> np.ndarray:
        a, b, w = math.exp(theta[0]), math.exp(theta[1]), np.exp(theta[2:])
        u = loads @ w
        # past saturation: far off, smoothly (and never zero)
        slack = np.maximum(np.where(u < 1.0, 1.0 - u, 1e-3 * np.exp(-np.minimum(u - 1.0, 50.0))), 1e-12)
        return np.log(a + b / slack) - measured

    theta = least_squares(residuals, start, loss="soft_l1", f_scale=0.2, max_nfev=5000).x
    return Row(float(np.exp(theta[0])), float(np.exp(theta[1])),
               dict(zip(classes, np.exp(theta[2:]).tolist(), strict=True)), slo_ms)


class Fitted:
    """The model's rows, and what they predict."""

    def __init__(self, rows: dict[Criterion, Row], devices: list[list[str]]) -> None:
        self.rows, self.devices = rows, devices

    def boundary(self, mix: dict[str, float]) -> tuple[float, Criterion | None]:
        """The predicted boundary scale along ``mix`` and the criterion that sets it."""
        best: tuple[float, Criterion | None] = (math.inf, None)
        for classes in self.devices:
            mine = {k: v for k, v in mix.items() if k in classes and v > 0}
            for criterion, row in self.rows.items():
                if criterion[0] not in mine:
                    continue
                busy = row.busy(mine)
                if busy > 0 and row.limit / busy < best[0]:
                    best = (row.limit / busy, criterion)
        return best


def fit(points: list[Point], limits: dict[Criterion, float], devices: list[list[str]]) -> Fitted | None:
    """Every criterion's fit (None for the model when no criterion had enough points)."""
    rows = {}
    for criterion in sorted({c for _, c, _ in points}):
        row = fit_row([p for p in points if p[1] == criterion], limits[criterion])
        if row is not None:
            rows[criterion] = row
    return Fitted(rows, devices) if rows else None


def fit_error(row: Row, points: list[Point]) -> float | None:
    """Root mean square relative error of a row's P95s over its ``points``."""
    errors = [(row.p95(load) - v) / v for load, _, v in points]
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
            for r in rays
            if r.held_out and r.scale.mean and r.agreed == SearchStatus.FOUND and math.isfinite(predicted[r.name])}
    validated = f"load mixes in the cone of the rays {', '.join(fitted_on)}, up to the busiest stage measured"
    if held:
        worst = max(abs(e) for e in held.values())
        validated += f"; it predicts the held-out ray{'s' if len(held) > 1 else ''} within {worst:.0%}"
    else:
        validated += "; no held-out ray tested its predictions"
    criteria = {}
    for criterion, row in model.rows.items():
        mine = [p for p in points if p[1] == criterion]
        criteria[label(criterion)] = CriterionFit(
            workload=criterion[0], slo_ms=row.slo_ms, a=row.a, b=row.b, weights=row.weights, limit=row.limit,
            measured=max(row.busy(load) for load, _, _ in mine), points=len(mine), fit_error=fit_error(row, mine))
    errors = [e for c, row in model.rows.items() for load, cc, v in points if cc == c
              if math.isfinite(e := (row.p95(load) - v) / v)]
    return EnvelopeFit(
        form=FORM, fitted_on=fitted_on, devices=devices, criteria=criteria, points=len(points),
        fit_error=math.sqrt(sum(e * e for e in errors) / len(errors)) if errors else None,
        rays={name: (s if math.isfinite(s) else None) for name, s in predicted.items()},
        held_out_error={name: held.get(name) for name in (r.name for r in rays if r.held_out)},
        validated=validated,
    )


def predicted_scale(fit: EnvelopeFit, mix: dict[str, float]) -> float | None:
    """The boundary scale the stored model gives along ``mix`` (None where it covers none of the mix's classes)."""
    best = math.inf
    for classes in fit.devices:
        mine = {k: v for k, v in mix.items() if k in classes and v > 0}
        for row in fit.criteria.values():
            if row.workload in mine:
                busy = sum(row.weights.get(k, 0.0) * v for k, v in mine.items())
                if busy > 0:
                    best = min(best, row.limit / busy)
    return None if math.isinf(best) else best
