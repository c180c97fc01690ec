"""/bench/metrics: the live snapshot in Prometheus's text format, read back by a real parser and by promtool."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from bench_plugin.live.exposition import FAMILIES, render
from bench_plugin.live.view import SETTLE_S, LiveSnapshot, LiveView
from bench_plugin.results.samples import Sample
from bench_plugin.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[2]
NOW = 1000.0
STAGE = 'high "x" \\ y'
"""A stage name with a quote and a backslash: label values are escaped."""


def llm(end_s: float, latency_ms: float, ok: bool = True) -> Sample:
    t0 = end_s - latency_ms / 1000
    return Sample("llm", 1, 0, 0, 0, 0, t0, t0, end_s, ok, first_token_s=t0 + 0.05, output_tokens=9,
                  error=None if ok else "http_500")


def snapshot() -> tuple[LiveSnapshot, LiveView]:
    view = LiveView(load_scenario(ROOT / "scenarios" / "calibration.yaml"), ["llm", "embedding"], trials=4)
    view.on_trial_start(number=2, arm="synthetic", repeat=1)
    view.on_stage_start(key=(1, 0, 0), name=STAGE, start_s=NOW - 30, end_s=NOW + 12, offered={"llm": 3.0,
                                                                                               "embedding": 6.0})
    for k in range(40):
        view.on_sample(llm(NOW - SETTLE_S - 25 + k * 0.6, 200 + 10 * k, ok=k != 39))
    return view.snapshot(NOW), view


def parsed(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            key = (s.name, frozenset(s.labels.items()))
            assert key not in out, f"a duplicate series: {key}"
            out[key] = s.value
    return out


def test_the_metrics_are_the_snapshots_figures_with_escaped_labels() -> None:
    snap, view = snapshot()
    got = parsed(render(snap, view.scenario))
    llm_live = next(c for c in snap.classes if c.name == "llm")
    where = {"class": "llm", "arm": "synthetic", "repeat": "1", "stage": STAGE}
    for scope, figures in (("window", llm_live.window), ("stage", llm_live.stage)):
        labels = {**where, "scope": scope}
        assert figures.requests > 0
        assert got[("bench_requests", frozenset(labels.items()))] == figures.requests
        assert got[("bench_errors", frozenset(labels.items()))] == figures.errors
        assert got[("bench_throughput_requests_per_second", frozenset(labels.items()))] == figures.throughput_rps
        assert figures.p95_ms is not None and figures.ttft_p95_ms is not None
        p95 = got[("bench_latency_seconds", frozenset({**labels, "quantile": "0.95"}.items()))]
        assert p95 * 1000 == pytest.approx(figures.p95_ms, rel=1e-12)
        ttft = got[("bench_ttft_seconds", frozenset({**labels, "quantile": "0.95"}.items()))]
        assert ttft * 1000 == pytest.approx(figures.ttft_p95_ms, rel=1e-12)
        assert got[("bench_slo_met", frozenset(labels.items()))] == (1 if figures.slo == "ok" else 0)
    assert got[("bench_offered_requests_per_second", frozenset(where.items()))] == 3.0
    assert got[("bench_slo_seconds", frozenset({"class": "llm", "figure": "p95"}.items()))] == 1.0  # calibration.yaml
    assert got[("bench_campaign_trial", frozenset({"arm": "synthetic", "repeat": "1"}.items()))] == 2
    assert got[("bench_campaign_trials", frozenset())] == 4
    window = {"arm": "synthetic", "repeat": "1", "stage": STAGE, "scope": "window"}
    assert got[("bench_scope_seconds", frozenset(window.items()))] == snap.window_end_s - snap.window_start_s
    # nothing is made up: no embedding request ended, so it has counts of 0 and no latency, no SLO call
    emb = {"class": "embedding", "arm": "synthetic", "repeat": "1", "stage": STAGE, "scope": "window"}
    assert got[("bench_requests", frozenset(emb.items()))] == 0
    assert not [k for k in got if k[0] in ("bench_latency_seconds", "bench_slo_met") and ("class", "embedding") in k[1]]
    assert not [k for k in got if k[0].startswith("bench_gpu_")]  # no telemetry in this view


def test_every_family_is_declared_and_promtool_accepts_the_text() -> None:
    snap, view = snapshot()
    text = render(snap, view.scenario)
    names = {family.name for family in text_string_to_metric_families(text)}
    assert names <= set(FAMILIES) and "bench_latency_seconds" in names
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail("promtool not found: install prometheus (make test does)", pytrace=False)
    done = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr  # Prometheus's own lint: names, units, types


def test_before_the_campaign_starts_only_its_status_is_served() -> None:
    view = LiveView(load_scenario(ROOT / "scenarios" / "calibration.yaml"), ["llm"], trials=1)
    got = parsed(render(view.snapshot(NOW), view.scenario))
    assert got[("bench_campaign_info", frozenset({"scenario": "calibration", "status": "waiting"}.items()))] == 1
    assert not [k for k in got if k[0] in ("bench_campaign_trial", "bench_requests", "bench_latency_seconds")]


def test_each_classs_server_queue_and_running_batch_as_last_read() -> None:
    _, view = snapshot()
    view.server = {"llm": {"queue_depth": 7.0, "running": 12.0, "queue_time_s": 3.5}}
    snap = view.snapshot(NOW)
    llm_live = next(c for c in snap.classes if c.name == "llm")
    assert (llm_live.queue_depth, llm_live.running) == (7.0, 12.0)
    got = parsed(render(snap, view.scenario))
    assert got[("bench_class_server_queue_depth", frozenset({"class": "llm"}.items()))] == 7.0
    assert got[("bench_class_server_running", frozenset({"class": "llm"}.items()))] == 12.0
    assert not [k for k in got if k[0].startswith("bench_class_server_") and ("class", "embedding") in k[1]]
