"""The live view: window by request end, figures over successful requests, SLO calls, frozen at the end."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bench_plugin.analysis.objectives import ClassObjectives, class_criteria
from bench_plugin.analysis.summary import class_stats
from bench_plugin.live.view import SETTLE_S, SHORT_NAMES, WINDOW_S, LiveView, figures
from bench_plugin.live.webui import campaign_rows, live_rows
from bench_plugin.report.clock import clock
from bench_plugin.results.samples import Sample
from bench_plugin.scenario import Slo, load_scenario

ROOT = Path(__file__).resolve().parents[2]
SLO = {"p95_ms": 100.0, "ttft_p95_ms": None, "tpot_p95_ms": None}


def sample(end_s: float, latency_ms: float, ok: bool = True, stage: int = 0, workload: str = "embedding") -> Sample:
    return Sample(workload=workload, trial=1, segment=0, stage=stage, seq=0, item=0,
                  intended_s=end_s - latency_ms / 1000, sent_s=end_s - latency_ms / 1000, end_s=end_s, ok=ok)


def objectives(slo: dict[str, float | None], error_budget: float) -> ClassObjectives:
    return ClassObjectives(Slo.model_validate(slo), error_budget)


def test_figures_are_over_successful_requests_and_judged() -> None:
    items = [sample(1.0, v) for v in (10, 20, 30, 40)] + [sample(1.0, 500, ok=False)]
    got = figures(items, 2.0, "embedding", objectives(SLO, 0.1))
    assert (got.requests, got.errors, got.throughput_rps) == (5, 1, 2.0)
    assert got.p50_ms == pytest.approx(np.percentile([10, 20, 30, 40], 50))
    assert got.slo == "over: errors"
    assert figures(items[:4], 2.0, "embedding", objectives({**SLO, "p95_ms": 35.0}, 0.1)).slo == "over: p95"
    assert figures([], 2.0, "embedding", objectives(SLO, 0.1)).slo == "-"


def test_the_window_is_by_end_time_behind_the_settle_delay_and_freezes_at_the_end() -> None:
    scenario = load_scenario(ROOT / "scenarios" / "calibration.yaml")
    view = LiveView(scenario, ["llm", "embedding"], trials=1)
    now = 1000.0
    view.on_trial_start(number=1, arm="synthetic", repeat=1)
    view.on_stage_start(key=(1, 0, 0), name="s", start_s=now - 30, end_s=now + 30, offered={"embedding": 6.0})
    inside = [sample(now - SETTLE_S - WINDOW_S + 0.5, 20), sample(now - SETTLE_S - 0.01, 30)]
    outside = [sample(now - SETTLE_S - WINDOW_S - 0.5, 40), sample(now - SETTLE_S + 0.5, 50)]
    for s in inside + outside:
        view.on_sample(s)
    snap = view.snapshot(now)
    emb = next(c for c in snap.classes if c.name == "embedding")
    assert emb.window.requests == 2 and emb.stage.requests == 4
    assert (snap.window_start_s, snap.window_end_s) == (now - SETTLE_S - WINDOW_S, now - SETTLE_S)
    rows = live_rows(snap)
    assert next(r for r in rows if r["cls"] == "embedding")["offered"] == "6 req/s"
    assert campaign_rows(snap, "this process")[0] == {"item": "status", "value": "running"}
    view.on_end("completed", "/r/report.html")
    later = view.snapshot(view.ended_s + 60)  # type: ignore[operator]
    assert later.window_end_s == view.ended_s and later.status == "completed"
    assert {"item": "report", "value": "/bench/report"} in campaign_rows(later, "x")
    assert campaign_rows(later, "x")[0]["value"] == f"completed at {clock(view.ended_s, date=False)}"  # type: ignore


def test_an_ended_campaign_says_how_when_and_why() -> None:
    """A failed or stopped campaign's status row says when (local clock, UTC offset) and why, not only "failed"."""
    view = LiveView(load_scenario(ROOT / "scenarios" / "calibration.yaml"), ["llm", "embedding"], trials=1)
    view.on_trial_start(number=1, arm="synthetic", repeat=1)
    view.on_end("failed", None, "every worker was lost (worker w1: no heartbeat for 3 s)")
    snap = view.snapshot()
    assert snap.status == "failed" and snap.reason is not None and snap.ended_s == view.ended_s
    row = campaign_rows(snap, "x")[0]
    assert row == {"item": "status", "value": f"failed at {clock(snap.ended_s, date=False)}: every worker was lost "
                                              "(worker w1: no heartbeat for 3 s)"}


def test_the_window_never_reaches_into_the_stage_before() -> None:
    """Early in a stage the window is the stage so far (by request end), never the stage before: a lower
    rate there must not read as this stage's server falling behind."""
    view = LiveView(load_scenario(ROOT / "scenarios" / "calibration.yaml"), ["llm", "embedding"], trials=1)
    now = 1000.0
    view.on_trial_start(number=1, arm="synthetic", repeat=1)
    view.on_stage_start(key=(1, 0, 0), name="low", start_s=now - 40, end_s=now - 4, offered={"embedding": 2.0})
    for k in range(10):  # the low stage's last requests, in what would be the last 10 s
        view.on_sample(sample(now - 10 + 0.5 * k, 20, stage=0))
    started = now - 4
    view.on_stage_start(key=(1, 0, 1), name="high", start_s=started, end_s=now + 30, offered={"embedding": 6.0})
    for k in range(12):  # 6 req/s for 2 s
        view.on_sample(sample(started + 1 / 6 * (k + 1), 30, stage=1))
    snap = view.snapshot(now)
    emb = next(c for c in snap.classes if c.name == "embedding")
    assert (snap.window_start_s, snap.window_end_s) == (started, now - SETTLE_S)
    assert emb.window.span_s == pytest.approx(3.0) and emb.window.requests == 12  # none of the low stage's
    assert emb.window.throughput_rps == pytest.approx(4.0)
    row = next(r for r in campaign_rows(snap, "x") if str(r["item"]).startswith("live window"))
    assert str(row["value"]).startswith("last 3.0 s of high (") and (row["start"], row["end"]) == (started, now - 1)


NOW = 1000.0
END = NOW - SETTLE_S - 1.0
"""When the agreement cases' requests end: inside the window of a snapshot at NOW."""


def llm(latency_ms: float, ttft_ms: float | None = 100.0, tokens: int = 9, ok: bool = True) -> Sample:
    """An llm request of stage 0 ending at END: first token after ``ttft_ms``."""
    t0 = END - latency_ms / 1000
    return Sample("llm", 1, 0, 0, 0, 0, t0, t0, END, ok, first_token_s=None if ttft_ms is None else t0 + ttft_ms / 1000,
                  output_tokens=tokens, error=None if ok else "http_500")


# calibration.yaml: llm p95 1000 ms, TTFT 500 ms, TPOT 50 ms, embedding p95 500 ms, error budget 1% each.
AGREEMENT = {
    "llm within every limit": ([llm(500)] * 40, "ok"),  # TPOT (500 - 100) / 8 = 50 ms: at the limit
    "llm errors over the budget": ([llm(500)] * 19 + [llm(500, ok=False)], "over: errors"),
    "llm over everything": ([llm(1200, ttft_ms=600)] * 19 + [llm(500, ok=False)], "over: p95, ttft, tpot, errors"),
    "llm TTFT only": ([llm(900, ttft_ms=520)] * 20, "over: ttft"),  # TPOT 47.5 ms
    "llm nothing succeeded": ([llm(500, ok=False)] * 3, "over: p95, ttft, tpot, errors"),
    # Answers of one token have no TPOT: the criterion does not apply (the live view used to call it missed).
    "llm one-token answers": ([llm(150, tokens=1)] * 10, "ok"),
    "llm without a first token": ([llm(300, ttft_ms=None)] * 10, "over: ttft"),  # no TTFT, so no TPOT either
    "embedding over P95": ([sample(END, 100)] * 18 + [sample(END, 700)] * 2, "over: p95"),
}


@pytest.mark.parametrize("case", list(AGREEMENT))
def test_the_live_slo_call_is_class_criteria_on_the_same_samples(case: str) -> None:
    """The live view's window and stage calls, from the snapshot, against the summary's judge of the same samples."""
    scenario = load_scenario(ROOT / "scenarios" / "calibration.yaml")
    items, expected = AGREEMENT[case]
    name = items[0].workload
    view = LiveView(scenario, ["llm", "embedding"], trials=1)
    view.on_stage_start(key=(1, 0, 0), name="s", start_s=END - 5, end_s=NOW + 30, offered={name: 4.0})
    for s in items:
        view.on_sample(s)
    live = next(c for c in view.snapshot(NOW).classes if c.name == name)
    spec = scenario.classes.get(name)
    objectives = ClassObjectives(spec.slo, spec.error_budget)
    judged = class_criteria(name, class_stats(list(view.current[name]), name, 5.0, objectives), objectives)
    missed = [SHORT_NAMES[c.name] for c in judged if not c.passed]
    assert live.window.slo == live.stage.slo == ("over: " + ", ".join(missed) if missed else "ok") == expected
