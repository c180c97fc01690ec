"""The envelope model: fit to P95s that follow its law, it gives back the parameters and the boundaries; its
interference rows tell a class that slows another more than itself."""

from __future__ import annotations

import math
import random

import pytest
from analysis_builders import stage, stats, trial

from bench_plugin.analysis.envelope_model import Fitted, Row, fit, fit_error, fit_points
from bench_plugin.results.summary import SearchProbe
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
    assert model is not None and set(model.rows) == set(LIMITS)
    for criterion, row in model.rows.items():  # one device: every row is the same 1/mu per request/s
        for name in ("llm", "embedding", "asr"):
            assert row.weights[name] == pytest.approx(SERVICE_S, rel=0.02), (criterion, name)
        assert row.a == pytest.approx(OWN[criterion], abs=2.0)
        assert fit_error(row, [p for p in points if p[1] == criterion]) == pytest.approx(0.0, abs=0.01)
    truth = {"llm": (300.0, 40.0), "embedding": (150.0, 20.0), "asr": (400.0, 60.0)}
    for mix in ({"llm": 1.0, "embedding": 4.0, "asr": 1.0}, {"llm": 3.0, "asr": 1.0}, {"asr": 1.0}):
        scale, _ = model.boundary(mix)
        assert scale == pytest.approx(boundary_scale(mix, SERVICE_S, truth), rel=0.02)
    assert model.boundary({"llm": 1.0, "asr": 1.0})[1] == ("llm", "ttft p95")


def test_a_class_that_slows_another_more_than_itself_gets_its_own_weight() -> None:
    """Time-slicing-like: each asr request/s takes 5% of the llm's room but 1% of its own; the llm the reverse."""
    truth = {("llm", "p95"): Row(1000.0, 500.0, {"llm": 0.03, "asr": 0.05}, 3000.0),
             ("asr", "p95"): Row(200.0, 100.0, {"llm": 0.01, "asr": 0.01}, 1500.0)}
    rng = random.Random(11)
    points = []
    for mix in ({"llm": 1.0}, {"asr": 1.0}, {"llm": 1.0, "asr": 1.0}, {"llm": 1.0, "asr": 3.0}):
        for scale in (2.0, 5.0, 8.0, 11.0, 14.0, 17.0):
            load = {k: v * scale for k, v in mix.items()}
            for criterion, row in truth.items():
                value = row.p95(load)
                if criterion[0] in mix and math.isfinite(value):
                    points.append((load, criterion, value * math.exp(rng.gauss(0, 0.03))))
    model = fit(points, {c: r.slo_ms for c, r in truth.items()}, [["llm", "asr"]])
    assert model is not None
    llm = model.rows[("llm", "p95")]
    assert llm.weights["asr"] == pytest.approx(0.05, rel=0.15) and llm.weights["llm"] == pytest.approx(0.03, rel=0.15)
    assert model.rows[("asr", "p95")].weights["asr"] < llm.weights["asr"] / 2
    # along llm 1 : asr 2, the llm reaches its SLO where 0.03 s + 0.10 s = U = 1 - 500 / 2000
    assert model.boundary({"llm": 1.0, "asr": 2.0})[0] == pytest.approx(0.75 / 0.13, rel=0.1)


def test_with_noisy_measurements_a_mix_it_was_not_fit_on_is_predicted_closely() -> None:
    points = [p for p in mm1_points(random.Random(5), 0.1) if set(p[0]) != {"llm", "asr"}]
    model = fit(points, LIMITS, [["llm", "embedding", "asr"]])
    assert model is not None
    truth = boundary_scale({"llm": 1.0, "asr": 1.0}, SERVICE_S, {"llm": (300.0, 40.0), "asr": (400.0, 60.0)})
    assert model.boundary({"llm": 1.0, "asr": 1.0})[0] == pytest.approx(truth, rel=0.1)


def test_devices_apart_are_bounded_apart() -> None:
    model = Fitted({("llm", "p95"): Row(50.0, 20.0, {"llm": 0.01}, 100.0),
                    ("embedding", "p95"): Row(10.0, 20.0, {"embedding": 0.01}, 50.0)}, [["llm"], ["embedding"]])
    # llm alone: U = 1 - 20/50 = 0.6 -> 60 req/s; embedding alone: U = 1 - 20/40 = 0.5 -> 50 req/s
    assert model.boundary({"llm": 1.0})[0] == pytest.approx(60.0)
    assert model.boundary({"llm": 1.0, "embedding": 1.0}) == (pytest.approx(50.0), ("embedding", "p95"))
    assert math.isinf(model.rows[("llm", "p95")].p95({"llm": 120.0}))


def test_too_few_points_fit_nothing() -> None:
    assert fit(mm1_points(random.Random(1), 0.0)[:5], LIMITS, [["llm", "embedding", "asr"]]) is None


def test_a_stage_its_load_generator_could_not_send_is_left_out_of_the_fit() -> None:
    """Its P95 is partly the client's: the fit takes the stages the generator kept up with, and only those."""
    stages = [stage(i, {"embedding": stats(p95=p95)}, {"embedding": load})
              for i, (load, p95) in enumerate([(10.0, 40.0), (20.0, 50.0), (40.0, 140.0)])]
    stages[2].generator_limited = "CPU-bound: load generator local used 1.03 cores (limit 0.9)"
    searched = trial("exclusive", 0, stages).model_copy(update={"probes": [
        SearchProbe(segment=0, ray="embedding", phase="probe", scale=s.offered["embedding"] / 10, passed=True,
                    stages=[s.index]) for s in stages]})
    points = fit_points([searched], ["embedding"], {("embedding", "p95"): 150.0}, [["embedding"]])
    assert [(load, value) for load, _, value in points] == [({"embedding": 10.0}, 40.0), ({"embedding": 20.0}, 50.0)]
