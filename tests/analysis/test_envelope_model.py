"""The envelope model: fit to P95s that follow its law, it gives back the parameters and the boundaries."""

from __future__ import annotations

import math
import random

import pytest

from bench_plugin.analysis.envelope_model import Fitted, fit, fit_error
from bench_plugin.servers.device import boundary_scale

LIMITS = {("llm", "ttft p95"): 300.0, ("llm", "p95"): 500.0, ("embedding", "p95"): 150.0, ("asr", "p95"): 400.0}
OWN = {("llm", "ttft p95"): 40.0, ("llm", "p95"): 75.0, ("embedding", "p95"): 20.0, ("asr", "p95"): 60.0}
SERVICE_S = 0.014


def mm1_points(rng: random.Random, noise: float) -> list[tuple[dict[str, float], tuple[str, str], float]]:
    """P95s of an M/M/1 device (the contention simulator's law) along several mixes, with relative noise."""
    mu = 1 / SERVICE_S
    mixes = [{"llm": 1.0, "embedding": 4.0, "asr": 1.0}, {"llm": 1.0}, {"embedding": 4.0}, {"asr": 1.0},
             {"llm": 1.0, "embedding": 4.0}, {"embedding": 4.0, "asr": 1.0}]
    out = []
    for mix in mixes:
        total = sum(mix.values())
        for fraction in (0.2, 0.4, 0.55, 0.7, 0.8, 0.85):
            scale = fraction * mu / total
            load = {k: v * scale for k, v in mix.items()}
            for criterion, own in OWN.items():
                if criterion[0] in mix:
                    p95 = own + math.log(20) / (mu - fraction * mu) * 1000
                    out.append((load, criterion, p95 * math.exp(rng.gauss(0, noise))))
    return out


def test_the_fit_recovers_the_queue_law_and_its_boundaries() -> None:
    points = mm1_points(random.Random(3), 0.0)
    model = fit(points, LIMITS, [["llm", "embedding", "asr"]])
    assert model is not None
    for name in ("llm", "embedding", "asr"):
        assert model.cost[name] == pytest.approx(SERVICE_S, rel=0.02)
    assert fit_error(model, points) == pytest.approx(0.0, abs=0.01)
    truth = {"llm": (300.0, 40.0), "embedding": (150.0, 20.0), "asr": (400.0, 60.0)}
    for mix in ({"llm": 1.0, "embedding": 4.0, "asr": 1.0}, {"llm": 3.0, "asr": 1.0}, {"asr": 1.0}):
        scale, _ = model.boundary(mix)
        assert scale == pytest.approx(boundary_scale(mix, SERVICE_S, truth), rel=0.02)
    assert model.boundary({"llm": 1.0, "asr": 1.0})[1] == ("llm", "ttft p95")


def test_with_noisy_measurements_a_mix_it_was_not_fit_on_is_predicted_closely() -> None:
    points = [p for p in mm1_points(random.Random(5), 0.1) if set(p[0]) != {"llm", "asr"}]
    model = fit(points, LIMITS, [["llm", "embedding", "asr"]])
    assert model is not None
    truth = boundary_scale({"llm": 1.0, "asr": 1.0}, SERVICE_S, {"llm": (300.0, 40.0), "asr": (400.0, 60.0)})
    assert model.boundary({"llm": 1.0, "asr": 1.0})[0] == pytest.approx(truth, rel=0.1)


def test_devices_apart_are_bounded_apart() -> None:
    model = Fitted({"llm": 0.01, "embedding": 0.01}, {("llm", "p95"): (50.0, 20.0), ("embedding", "p95"): (10.0, 20.0)},
                   {("llm", "p95"): 100.0, ("embedding", "p95"): 50.0}, [["llm"], ["embedding"]])
    # llm alone: U = 1 - 20/50 = 0.6 -> 60 req/s; embedding alone: U = 1 - 20/40 = 0.5 -> 50 req/s
    assert model.boundary({"llm": 1.0})[0] == pytest.approx(60.0)
    assert model.boundary({"llm": 1.0, "embedding": 1.0}) == (pytest.approx(50.0), ("embedding", "p95"))
    assert math.isinf(model.p95({"llm": 120.0}, ("llm", "p95")))


def test_too_few_points_fit_nothing() -> None:
    assert fit(mm1_points(random.Random(1), 0.0)[:5], LIMITS, [["llm", "embedding", "asr"]]) is None
