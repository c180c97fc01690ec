"""Progress lines: what a headless campaign says while it runs, and that --only-summary keeps it quiet."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
from harness import LOCUST, ROOT, scenario_variant

from bench_plugin.live.progress import progress_line
from bench_plugin.live.view import SETTLE_S, WINDOW_S, LiveView
from bench_plugin.report.clock import clock
from bench_plugin.results.samples import Sample
from bench_plugin.scenario import load_scenario


def _sample(workload: str, end_s: float, latency_ms: float, ok: bool = True) -> Sample:
    start = end_s - latency_ms / 1000
    llm = workload == "llm" and ok
    return Sample(workload=workload, trial=2, segment=0, stage=1, seq=0, item=0, intended_s=start, sent_s=start,
                  end_s=end_s, ok=ok, first_token_s=start + 0.01 if llm else None, output_tokens=8 if llm else None)


def test_the_line_gives_the_trial_the_stage_and_each_classs_last_window() -> None:
    view = LiveView(load_scenario(ROOT / "scenarios" / "calibration.yaml"), ["llm", "embedding"], trials=4)
    now = 1000.0
    assert progress_line(view.snapshot(now)) is None  # nothing runs yet
    view.on_trial_start(number=2, arm="synthetic", repeat=1)
    view.on_stage_start(key=(2, 0, 1), name="high", start_s=now - 20, end_s=now + 12.4, offered={"llm": 3.0})
    end = now - SETTLE_S - 1
    latencies = [20.0, 30.0, 40.0, 200.0]
    for latency in latencies:
        view.on_sample(_sample("llm", end, latency))
    view.on_sample(_sample("llm", end, 900.0, ok=False))
    line = progress_line(view.snapshot(now))
    p95 = np.percentile(latencies, 95)
    assert line is not None and line.startswith(
        f"bench_plugin: trial 2/4 (synthetic, repeat 1), high, 12 s left; last {WINDOW_S:g} s: llm P95 {p95:.0f} ms, "
        "TTFT 10, TPOT ")
    assert "1 errors (SLO " in line and "embedding" not in line  # no embedding request ended in the window


def test_after_a_trial_the_line_says_when_the_campaign_should_end() -> None:
    view = LiveView(load_scenario(ROOT / "scenarios" / "calibration.yaml"), ["llm"], trials=4)
    view.on_trial_start(number=1, arm="synthetic", repeat=1, now=1000.0)
    view.on_stage_start(key=(1, 0, 0), name="s", start_s=1000.0, end_s=1100.0, offered={"llm": 3.0})
    assert "campaign ends" not in (progress_line(view.snapshot(1050.0)) or "")  # no trial has ended yet
    view.on_trial_stop(1100.0)
    view.on_trial_start(number=2, arm="synthetic", repeat=2)
    view.on_stage_start(key=(2, 0, 0), name="s", start_s=1100.0, end_s=1200.0, offered={"llm": 3.0})
    line = progress_line(view.snapshot(1130.0))
    assert view.eta_end_s() == 1100.0 + 3 * 100.0  # trials 2, 3 and 4 left, 100 s each so far
    assert line is not None and f"campaign ends about {clock(1400.0, date=False)} (from 1 trial)" in line


@pytest.mark.slow
@pytest.mark.parametrize("quiet", [False, True])
def test_a_headless_run_reports_progress_even_with_only_summary(tmp_path: Path, quiet: bool) -> None:
    """--only-summary quiets Locust's periodic tables, not the campaign's position."""
    stages = [{"name": "long", "duration_s": 7, "load": {"llm": 3, "embedding": 5}}]
    scenario = scenario_variant(tmp_path, "calibration", stages=stages, warmup={"requests": "none"})
    done = subprocess.run([LOCUST, "--headless", *(["--only-summary"] if quiet else []), "-f", "locustfiles/mixed.py",
                           "--scenario", str(scenario), "--results-dir", str(tmp_path / "results")],
                          cwd=ROOT, capture_output=True, text=True, timeout=240, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = re.findall(r"^bench_plugin: trial 1/1 \(synthetic, repeat 1\).*$", done.stderr, flags=re.M)
    # a line every 5 s over a 7-s stage and the servers' start: at least one inside the stage
    assert any(", long, " in line and "s left" in line for line in lines), done.stderr[-3000:]
