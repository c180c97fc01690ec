"""The interruption a disruption caused, computed from samples with known failures, through the real Recorder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench_plugin.analysis.disruption import RECOVERY_RULE, class_interruption
from bench_plugin.report.markdown import render_report
from bench_plugin.report.outputs import summarise
from bench_plugin.results.placement import ClassPlacement, Placement
from bench_plugin.results.recorder import Recorder
from bench_plugin.results.samples import Sample
from bench_plugin.results.timeline import Disruption
from bench_plugin.scenario import Arm

START = 100.0
STAGE_S = 20.0
DISRUPTED = 105.0


def sample(workload: str, k: int, latency_s: float, ok: bool = True) -> Sample:
    intended = START + k / 10
    return Sample(workload=workload, trial=1, segment=0, stage=0, seq=k, item=0, intended_s=intended,
                  sent_s=intended, end_s=intended + latency_s, ok=ok, error=None if ok else "connection")


def llm_samples() -> list[Sample]:
    """10 req/s: 50 ms before the disruption; failures for 1 s after it; 200 ms for the next 1 s; 50 ms again."""
    out = []
    for k in range(int(STAGE_S * 10)):
        t = k / 10
        if t < 5.0:
            out.append(sample("llm", k, 0.05))
        elif t < 6.0:
            out.append(sample("llm", k, 0.002, ok=False))
        elif t < 7.0:
            out.append(sample("llm", k, 0.2))
        else:
            out.append(sample("llm", k, 0.05))
    return out


def record(tmp_path: Path, samples: list[Sample]) -> None:
    rec = Recorder(tmp_path / "results.sqlite")
    rec.add_trial(1, 0, Arm(name="a"), 1)
    rec.segment_applied(1, 0, ["llm", "embedding"], Placement({"llm": ClassPlacement(url="x"),
                                                                "embedding": ClassPlacement(url="y")}))
    rec.stage_started(1, 0, 0, None, {"llm": 10.0, "embedding": 2.0}, {"llm": "poisson", "embedding": "poisson"},
                      START, planned_s=STAGE_S, arrivals={"llm": 200, "embedding": 40})
    rec.note(Disruption(segment=0, stage=0, at_s=5.0, action="start", disruption="rollout-restart", target="llm",
                        result="started", t=DISRUPTED), 1)
    rec.note(Disruption(segment=0, stage=0, at_s=5.0, disruption="rollout-restart", action="rollout-restart",
                        target="deployment/bench-llm", result="patched"), 1)
    rec.add_samples(samples)
    rec.commit()
    rec.stage_ended(1, 0, 0, START + STAGE_S, "completed")
    rec.trial_ended(1, "completed")
    rec.close()


def test_failures_spike_and_recovery_from_the_store(tmp_path: Path) -> None:
    embedding = [sample("embedding", k, 0.03) for k in range(0, 200, 5)]
    record(tmp_path, llm_samples() + embedding)
    summary = summarise(tmp_path)
    stage = json.loads(summary.to_json())["trials"][0]["stages"][0]
    d = stage["disruption"]
    assert d["kind"] == "rollout-restart" and d["started_s"] == DISRUPTED and d["rule"] == RECOVERY_RULE
    assert [a["action"] for a in d["actions"]] == ["start", "rollout-restart"]
    llm = d["classes"]["llm"]
    assert llm["requests"] == 150 and llm["failed"] == 10
    assert llm["failed_share"] == pytest.approx(10 / 150)
    assert llm["p95_before_ms"] == pytest.approx(50.0)
    assert llm["peak_p95_ms"] == pytest.approx(200.0)
    assert llm["spike"] == pytest.approx(4.0)
    assert llm["recovered_s"] == pytest.approx(2.0)  # the first request after the last slow one: t = 107 s
    quiet = d["classes"]["embedding"]
    assert (quiet["failed"], quiet["recovered_s"]) == (0, 0.0)
    assert quiet["spike"] == pytest.approx(1.0)
    text = render_report(summary)
    assert "## Disruption" in text
    assert "| llm | rollout-restart | deployment/bench-llm | stage 0 +5 s | 10 of 150 (6.7%) |" in text
    assert "2.00 s |" in text


def test_never_recovered_within_the_stage() -> None:
    samples = [sample("llm", k, 0.05, ok=k < 150) for k in range(200)]  # failing from 15 s to the end
    figures = class_interruption(samples, DISRUPTED, START + STAGE_S)
    assert figures.failed == 50 and figures.recovered_s is None


def test_recovery_needs_two_stable_seconds_before_the_end() -> None:
    samples = [sample("llm", k, 0.05, ok=not 50 <= k < 185) for k in range(200)]  # good again at 18.5 s
    assert class_interruption(samples, DISRUPTED, START + STAGE_S).recovered_s is None
    samples = [sample("llm", k, 0.05, ok=not 50 <= k < 170) for k in range(200)]  # good again at 17 s
    assert class_interruption(samples, DISRUPTED, START + STAGE_S).recovered_s == pytest.approx(12.0)


def test_a_stage_without_disruption_has_none(tmp_path: Path) -> None:
    rec = Recorder(tmp_path / "results.sqlite")
    rec.add_trial(1, 0, Arm(name="a"), 1)
    rec.stage_started(1, 0, 0, None, {"llm": 1.0}, {"llm": "poisson"}, START, planned_s=5.0, arrivals={"llm": 5})
    rec.stage_ended(1, 0, 0, START + 5.0, "completed")
    rec.trial_ended(1, "completed")
    rec.close()
    assert summarise(tmp_path).trials[0].stages[0].disruption is None
    assert "## Disruption" not in render_report(summarise(tmp_path))
