"""Which envelope model form predicts a held-out ray best: the one the analysis uses and two it does not.

    python benchmarks/envelope_forms.py RESULTS_DIR_OR_TARBALL

For every arm of a campaign that searched rays with a held-out one, this fits three forms on the same
probes (the rays not held out; analysis/envelope_model.fit_points) and prints each form's error on
every held-out ray, (predicted - measured) / measured boundary scale:

- ``one busy fraction``: every criterion of a device shares one weight per class (u = Σ_k w_k λ_k);
- ``a row per criterion``: analysis/envelope_model.py's (u_j = Σ_k w_jk λ_k);
- ``rows, free exponent``: the same with P95 = a + b / (1 - u_j)^k, k fit in [0.5, 4].
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares

from bench_plugin.analysis.envelope_model import Point, arm_devices, criteria_limits, fit_points
from bench_plugin.analysis.objectives import objectives_from_scenario
from bench_plugin.report.outputs import summarise
from bench_plugin.results.archive import results_dir
from bench_plugin.results.store import open_campaign
from bench_plugin.scenario import class_rank


def _fit(points: list[Point], limits: dict[tuple[str, str], float], shared: bool, free_k: bool
         ) -> dict[tuple[str, str], tuple[float, float, float, dict[str, float]]]:
    """Criterion -> (a, b, k, weights), all criteria fit together (``shared``: one weight row for all)."""
    criteria = sorted({c for _, c, _ in points})
    classes = sorted({k for load, _, _ in points for k in load}, key=class_rank)
    per = 3 if free_k else 2
    rows = 1 if shared else len(criteria)
    busiest = max(sum(load.values()) for load, _, _ in points)
    start = []
    for c in criteria:
        lowest = min(v for _, cc, v in points if cc == c)
        start += [math.log(0.8 * lowest), math.log(0.2 * lowest)] + ([0.0] if free_k else [])
    start += [math.log(0.5 / busiest)] * (rows * len(classes))
    loads = np.array([[load.get(k, 0.0) for k in classes] for load, _, _ in points])
    which = np.array([criteria.index(c) for _, c, _ in points])
    measured = np.log(np.array([v for _, _, v in points]))
    offset = per * len(criteria)

    def unpack(theta: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        head = theta[:offset].reshape(len(criteria), per)
        k = np.exp(head[:, 2]) if free_k else np.ones(len(criteria))
        w = np.exp(theta[offset:]).reshape(rows, len(classes))
        return np.exp(head[:, 0]), np.exp(head[:, 1]), k, w

    def residuals(theta: np.ndarray) -> np.ndarray:
        a, b, k, w = unpack(theta)
        u = np.einsum("ij,ij->i", loads, np.repeat(w, len(points), 0) if shared else w[which])
        slack = np.maximum(np.where(u < 1.0, 1.0 - u, 1e-3 * np.exp(-np.minimum(u - 1.0, 50.0))), 1e-12)
        return np.log(a[which] + b[which] / slack ** k[which]) - measured

    low = np.full(len(start), -np.inf)
    high = np.full(len(start), np.inf)
    if free_k:
        for i in range(len(criteria)):
            low[per * i + 2], high[per * i + 2] = math.log(0.5), math.log(4.0)
    theta = least_squares(residuals, np.array(start), bounds=(low, high), loss="soft_l1", f_scale=0.2,
                          max_nfev=20000).x
    a, b, k, w = unpack(theta)
    return {c: (float(a[i]), float(b[i]), float(k[i]), dict(zip(classes, w[0 if shared else i], strict=True)))
            for i, c in enumerate(criteria)}


def _boundary(model: dict[tuple[str, str], tuple[float, float, float, dict[str, float]]],
              limits: dict[tuple[str, str], float], devices: list[list[str]], mix: dict[str, float]) -> float:
    best = math.inf
    for classes in devices:
        mine = {k: v for k, v in mix.items() if k in classes and v > 0}
        for criterion, (a, b, k, w) in model.items():
            room = limits[criterion] - a
            busy = sum(w.get(c, 0.0) * v for c, v in mine.items())
            if criterion[0] in mine and busy > 0:
                limit = max(0.0, 1.0 - (b / room) ** (1.0 / k)) if room > 0 else 0.0
                best = min(best, limit / busy)
    return best


def main(given: str) -> None:
    with results_dir(Path(given)) as path:
        summary = summarise(path)
        with open_campaign(path / "results.sqlite") as reader:
            objectives = objectives_from_scenario(reader.record().scenario)
    limits = criteria_limits(objectives)
    assert summary.comparison is not None
    for arm, comparison in summary.comparison.arms.items():
        envelope = comparison.envelope
        if envelope is None or not any(r.held_out for r in envelope.rays):
            continue
        trials = [t for t in summary.trials if t.arm == arm]
        devices = arm_devices(trials)
        points = fit_points(trials, [r.name for r in envelope.rays if not r.held_out], limits, devices)
        for form, shared, free_k in (("one busy fraction", True, False), ("a row per criterion", False, False),
                                     ("rows, free exponent", False, True)):
            model = _fit(points, limits, shared, free_k)
            errors = [f"{r.name} {(_boundary(model, limits, devices, r.mix) - r.scale.mean) / r.scale.mean:+.0%}"
                      for r in envelope.rays if r.held_out and r.scale.mean]
            print(f"{arm}: {form}: held-out error {', '.join(errors)} ({len(points)} points)")


if __name__ == "__main__":
    main(sys.argv[1])
