"""The live charts' history: a point per live window, none before a stage's first request can end, a mark per stage."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench_plugin.live import charts
from bench_plugin.live.charts import History
from bench_plugin.live.view import SETTLE_S, LiveView
from bench_plugin.results.samples import Sample
from bench_plugin.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[2]


def embedding(end_s: float, stage: int) -> Sample:
    return Sample("embedding", 1, 0, stage, 0, 0, end_s - 0.03, end_s - 0.03, end_s, True)


def test_a_point_per_window_and_a_mark_per_stage() -> None:
    view = LiveView(load_scenario(ROOT / "scenarios" / "calibration.yaml"), ["llm", "embedding"], trials=1)
    history = History()
    history.add(view.snapshot(100.0))  # nothing runs yet: nothing kept
    assert history.points == [] and history.marks == []
    view.on_trial_start(number=1, arm="synthetic", repeat=1)
    view.on_stage_start(key=(1, 0, 0), name="low", start_s=100.0, end_s=120.0, offered={"embedding": 2.0})
    history.add(view.snapshot(100.5))  # the window ends before the stage began: no point, but the mark
    assert history.points == [] and [(m.t, m.stage) for m in history.marks] == [(100.0, "low")]
    for k in range(20):
        view.on_sample(embedding(100.5 + k * 0.5, 0))
    for now in (105.0, 105.0, 107.0):  # the same window twice is kept once
        history.add(view.snapshot(now))
    assert [p.end_s for p in history.points] == [105.0 - SETTLE_S, 107.0 - SETTLE_S]
    shown = view.snapshot(107.0).classes[1].window
    assert history.points[-1].classes["embedding"].p95_ms == shown.p95_ms
    assert history.points[-1].classes["embedding"].requests == shown.requests > 0
    view.on_stage_start(key=(1, 0, 1), name="high", start_s=121.0, end_s=140.0, offered={"embedding": 6.0})
    history.add(view.snapshot(124.0))
    assert [m.stage for m in history.marks] == ["low", "high"]
    assert history.points[-1].start_s == 121.0  # never the stage before
    data = history.to_json(view.scenario)
    assert data["slo"]["embedding"]["p95_ms"] == 500.0 and len(data["points"]) == 3
    assert history.stale(124.0 - SETTLE_S + 3.0, 2.0) and not history.stale(124.0 - SETTLE_S + 1.0, 2.0)


def test_a_long_campaign_keeps_a_bounded_history(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(charts, "MAX_POINTS", 10)
    view = LiveView(load_scenario(ROOT / "scenarios" / "calibration.yaml"), ["embedding"], trials=1)
    view.on_trial_start(number=1, arm="synthetic", repeat=1)
    view.on_stage_start(key=(1, 0, 0), name="long", start_s=0.0, end_s=1000.0, offered={"embedding": 1.0})
    history = History()
    for now in range(5, 60, 2):
        history.add(view.snapshot(float(now)))
    ends = [p.end_s for p in history.points]
    assert len(ends) <= 10 and ends == sorted(ends) and ends[-1] == 59.0 - SETTLE_S  # the newest always kept
