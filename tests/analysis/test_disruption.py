"""The interruption a disruption caused, computed from samples with known failures, through the real Recorder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from stored_scenario import resolved

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


def record_restart(rec: Recorder, trial: int, repeat: int, down_s: float) -> None:
    """A local restart of the embedding server in stage 0 of ``trial``: no server for ``down_s`` from 105 s (its
    requests fail then), the new one ready 0.5 s before the front moves to it; llm untouched and checked."""
    start = START + 100.0 * trial
    at = start + 5.0
    rec.add_trial(trial, 0, Arm(name="a"), repeat)
    rec.segment_applied(trial, 0, ["llm", "embedding"], Placement({"llm": ClassPlacement(url="x"),
                                                                    "embedding": ClassPlacement(url="y")}))
    rec.stage_started(trial, 0, 0, None, {"llm": 10.0, "embedding": 10.0}, {"llm": "poisson", "embedding": "poisson"},
                      start, planned_s=STAGE_S, arrivals={"llm": 200, "embedding": 200})
    steps = [("start", "embedding", at, {}), ("refuse", "class/embedding", at, {}), ("stop", "class/embedding", at, {}),
             ("stopped", "class/embedding", at + 0.3, {"after_s": 0.3, "exit_code": 0}),
             ("spawn", "class/embedding", at + 0.3, {"pid": 7}), ("ready", "class/embedding", at + down_s - 0.5, {}),
             ("route", "class/embedding", at + down_s, {}), ("co-tenant", "class/llm", at + down_s, {"survived": True}),
             ("end", "restart", at + down_s, {})]
    for action, target, t, extra in steps:
        rec.note(Disruption(segment=0, stage=0, at_s=5.0, disruption="restart", action=action, target=target,
                            result="", t=t, **extra), trial)
    samples = []
    for k in range(int(STAGE_S * 10)):
        intended = start + k / 10
        down = at <= intended < at + down_s
        for workload in ("llm", "embedding"):
            failed = workload == "embedding" and down
            samples.append(Sample(workload=workload, trial=trial, segment=0, stage=0, seq=k, item=0,
                                  intended_s=intended, sent_s=intended, end_s=intended + (0.001 if failed else 0.05),
                                  ok=not failed, error="connection" if failed else None))
    rec.add_samples(samples)
    rec.commit()
    rec.stage_ended(trial, 0, 0, start + STAGE_S, "completed")
    rec.trial_ended(trial, "completed")


def test_a_local_restart_says_how_long_its_class_had_no_server_over_the_repeats(tmp_path: Path) -> None:
    rec = Recorder(tmp_path / "results.sqlite")
    rec.set_meta("scenario", {"name": "hand", "resolved": resolved(
        [{"name": "a", "control": True}], {"llm": {"slo": {"p95_ms": 1000.0}}, "embedding": {"slo": {"p95_ms": 500.0}}},
        backend="local", stages=[{"duration_s": STAGE_S, "load": {"llm": 10.0, "embedding": 10.0}}],
        disruption={"kind": "restart", "at_s": 5.0, "classes": ["embedding"]})})
    record_restart(rec, 1, 1, down_s=2.5)
    record_restart(rec, 2, 2, down_s=3.5)
    rec.close()
    summary = summarise(tmp_path)
    first = summary.trials[0].stages[0].disruption
    assert first is not None
    embedding, llm = first.classes["embedding"], first.classes["llm"]
    assert embedding.unavailable_s == pytest.approx(2.5) and embedding.cold_start_s == pytest.approx(1.7)
    assert embedding.stopped_after_s == pytest.approx(0.3) and embedding.survived is None
    assert embedding.failed == 25 and embedding.recovered_s == pytest.approx(2.5)
    assert llm.survived is True and llm.unavailable_s is None and llm.failed == 0
    assert first.series is not None
    seconds = {f.t: f for f in first.series["embedding"]}
    assert sorted(seconds) == [float(k) for k in range(-5, 15)]  # the whole stage, on the disruption's clock
    assert [(seconds[k].sent, seconds[k].failed) for k in (-1.0, 0.0, 1.0, 2.0, 3.0)] == [
        (10, 0), (10, 10), (10, 10), (10, 5), (10, 0)]
    assert seconds[1.0].p95_ms is None and seconds[3.0].p95_ms == pytest.approx(50.0)
    assert all(f.failed == 0 for f in first.series["llm"])
    over = summary.arms["a"].stages[0].disruption
    assert over is not None and (over.kind, over.repeats) == ("restart", 2)
    down = over.classes["embedding"].unavailable_s
    assert down is not None and down.mean == pytest.approx(3.0) and down.ci95 is not None and down.values == [2.5, 3.5]
    assert over.classes["embedding"].failed.mean == pytest.approx(30.0)
    assert (over.classes["llm"].survived, over.classes["llm"].checked) == (2, 2)
    assert over.classes["llm"].unavailable_s is None
    text = render_report(summary)
    assert "| a | 0 | restart (2) | embedding | 30 ± " in text and "| 3.00 ± " in text
    assert "| a | 0 | restart (2) | llm | 0 ± 0 |" in text and "| 2 of 2 |" in text


def test_a_request_the_load_generator_sent_late_does_not_delay_the_recovery() -> None:
    """After the servers recovered (at 107 s), requests left the load generator 45 ms late on a busy host: 95 ms
    from their intended send against a 50-ms P95 before. The servers answered them in 50 ms, so the recovery
    stands; the same latency from the servers moves it, where it is more than one request's tail."""
    def at(samples: list[Sample], t: float, sent_late_s: float) -> list[Sample]:
        out = list(samples)
        for i, s in enumerate(out):
            if abs(s.intended_s - (START + t)) < 1e-9:
                out[i] = Sample(workload="llm", trial=1, segment=0, stage=0, seq=s.seq, item=0, intended_s=s.intended_s,
                                sent_s=s.intended_s + sent_late_s, end_s=s.intended_s + 0.095, ok=True)
        return out

    late = llm_samples()
    for t in (9.0, 9.1, 9.2):
        late = at(late, t, 0.045)
    assert class_interruption(late, DISRUPTED, START + STAGE_S).recovered_s == pytest.approx(2.0)
    slow = llm_samples()
    for t in (9.0, 9.1, 9.2):
        slow = at(slow, t, 0.0)
    # the windows from 108.5 s and 109 s hold the three: the first good one starts at 109.5 s
    assert class_interruption(slow, DISRUPTED, START + STAGE_S).recovered_s == pytest.approx(4.5)


def test_one_slow_request_is_the_tail_not_a_server_still_recovering() -> None:
    """One request of 95 ms among its window's ten (P95 before: 50 ms) is the tail a busy host gives every stage:
    the window's P95 stays within 1.5x, and the recovery stands at 107 s."""
    samples = llm_samples()
    i = next(i for i, s in enumerate(samples) if s.intended_s >= START + 9.0)
    s = samples[i]
    samples[i] = Sample(workload="llm", trial=1, segment=0, stage=0, seq=s.seq, item=0, intended_s=s.intended_s,
                        sent_s=s.intended_s, end_s=s.intended_s + 0.095, ok=True)
    assert class_interruption(samples, DISRUPTED, START + STAGE_S).recovered_s == pytest.approx(2.0)
