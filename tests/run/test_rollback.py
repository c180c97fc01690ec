"""Rollback conditions: error rate past its multiple of the budget, or P95 past its multiple of the SLO."""

from __future__ import annotations

from pathlib import Path

import yaml

from bench_plugin.results.samples import Sample
from bench_plugin.run.rollback import RollbackGuard, StageTally
from bench_plugin.scenario import load_scenario


def guard(tmp_path: Path) -> RollbackGuard:
    data = {
        "name": "t", "classes": {"llm": {"model": "m", "slo": {"p95_ms": 100}, "error_budget": 0.01}},
        "arms": [{"name": "a", "control": True}], "stages": [{"duration_s": 1, "load": {"llm": 1}}],
        "rollback": {"max_error_rate_multiple": 10, "max_p95_multiple": 5, "min_requests": 10},
    }
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    return RollbackGuard(load_scenario(path))


def sample(latency_ms: float, ok: bool = True, stage: int = 0) -> Sample:
    return Sample("llm", 1, 0, stage, 0, 0, 100.0, 100.0, 100.0 + latency_ms / 1000, ok)


def test_quiet_stage_goes_on(tmp_path: Path) -> None:
    tally = StageTally((1, 0, 0))
    for _ in range(50):
        tally.add(sample(80))
    assert guard(tmp_path).check(tally) is None


def test_too_few_requests_are_not_judged(tmp_path: Path) -> None:
    tally = StageTally((1, 0, 0))
    for _ in range(9):
        tally.add(sample(10_000))
    assert guard(tmp_path).check(tally) is None


def test_p95_past_its_multiple(tmp_path: Path) -> None:
    tally = StageTally((1, 0, 0))
    for i in range(20):
        tally.add(sample(600 if i >= 18 else 50))  # P95 falls in the 600 ms tail; limit is 500 ms
    reason = guard(tmp_path).check(tally)
    assert reason == "llm P95 passed 5x its SLO (100 ms): 2 of 20 requests took longer than 500 ms"


def test_error_rate_past_its_multiple(tmp_path: Path) -> None:
    tally = StageTally((1, 0, 0))
    for i in range(20):
        tally.add(sample(10, ok=i >= 3))  # 15% errors > 10 x 1%
    reason = guard(tmp_path).check(tally)
    assert reason is not None and "error rate 15.0%" in reason


def test_samples_of_other_stages_are_ignored(tmp_path: Path) -> None:
    tally = StageTally((1, 0, 0))
    for _ in range(30):
        tally.add(sample(10_000, stage=1))
    assert tally.latencies == {}


def test_requests_stuck_in_flight_trip_the_p95_before_they_end(tmp_path: Path) -> None:
    """An overloaded server whose requests stop ending: nothing ended is slow, the stuck ones decide."""
    tally = StageTally((1, 0, 0))
    for _ in range(5):
        tally.add(sample(50))
    stuck = [("llm", 2.0)] * 20 + [("llm", 0.1)] * 5  # 2 s in flight > 5 x 100 ms; 0.1 s is not
    reason = guard(tmp_path).check(tally, stuck)
    assert reason == ("llm P95 passed 5x its SLO (100 ms): 20 of 25 requests took longer than 500 ms, "
                      "20 of them still in flight")
    assert guard(tmp_path).check(tally, [("llm", 0.1)] * 25) is None
