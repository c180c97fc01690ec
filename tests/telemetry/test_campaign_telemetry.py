"""A campaign's GPU series from outside this host: --dcgm-url scraped during trials, --prometheus-url per stage.

A real Prometheus scrapes a stand-in dcgm-exporter with known values; a whole campaign (the
calibration scenario, local backend on this CPU host) runs with both options. The scrape lands in
the telemetry table; Prometheus is queried once per stage, and since the placement names no GPU for
any class here the stage carries a note saying so rather than unattributed series.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from exporter_pages import C_GPU0, SERVED, page
from harness import ROOT, run_locust, scenario_variant, synthetic_server
from prometheus_testlib import PageServer, PrometheusProcess, ScrapeJob

from bench_plugin.results.store import open_campaign
from bench_plugin.sharing.processes import free_port
from bench_plugin.telemetry import fields as F

pytestmark = pytest.mark.slow


def test_dcgm_scrape_and_prometheus_queries_in_a_campaign(
        tmp_path: Path, page_server: PageServer, start_prometheus: Callable[[list[ScrapeJob]], PrometheusProcess]
) -> None:
    page_server.set("/campaign", page("/c", 1))
    prometheus = start_prometheus([ScrapeJob("campaign", "/campaign")])
    results = tmp_path / "results"
    done = run_locust(["-f", "locustfiles/mixed.py", "--scenario", str(ROOT / "scenarios" / "calibration.yaml"),
                       "--results-dir", str(results), "--stage-duration", "2",
                       "--dcgm-url", f"http://{page_server.address}/campaign",
                       "--prometheus-url", prometheus.url, "--prometheus-lag", "1"], timeout=180)
    assert done.returncode == 0, done.stdout[-3000:]
    with open_campaign(results / "results.sqlite") as reader:
        trials = reader.trials()
        util = [float(value) for series in reader.telemetry_series(-math.inf, math.inf, [F.GPU_UTIL], sys.maxsize)
                for value in series.value]  # every row of the metric, whichever trial, none thinned out
        notes = [(series.stage, series.source, note) for t in trials for series in reader.stage_series(t.id)
                 for note in series.notes]
    known = next(s.values[0] for s in SERVED if s.labels == C_GPU0 and s.metric == F.GPU_UTIL)
    assert util and set(util) == {known}, util
    assert [(stage, source) for stage, source, _ in notes] == [(0, "prometheus")]
    assert "names no GPU" in notes[0][2]


def test_a_prometheus_url_at_a_dead_port_is_said_to_be_unreachable(tmp_path: Path) -> None:
    """Nothing is queried when no GPU can be attributed; the stage's note must still say that the server at
    --prometheus-url does not answer, not only that the placement names no GPU (before, that hid it)."""
    dead = f"http://127.0.0.1:{free_port()}"
    results = tmp_path / "results"
    done = run_locust(["-f", "locustfiles/mixed.py", "--scenario", str(ROOT / "scenarios" / "calibration.yaml"),
                       "--results-dir", str(results), "--stage-duration", "2", "--prometheus-url", dead,
                       "--prometheus-lag", "0"], timeout=180)
    assert done.returncode == 0, done.stdout[-3000:]
    assert f"bench_plugin: warning: no Prometheus query API at {dead}" in done.stdout, done.stdout[-3000:]
    with open_campaign(results / "results.sqlite") as reader:
        notes = [note for t in reader.trials() for series in reader.stage_series(t.id) for note in series.notes]
    assert len(notes) == 2, notes
    assert notes[0].startswith(f"no Prometheus query API at {dead}: "), notes
    assert "names no GPU" in notes[1], notes


def test_a_servers_metrics_read_through_prometheus_in_a_campaign(
        tmp_path: Path, start_prometheus: Callable[[list[ScrapeJob]], PrometheusProcess]) -> None:
    """``metrics_url: prometheus``: the class's server is scraped by Prometheus (here by its ``instance``, as a
    static target), and the campaign reads each stage's window from it after the segment."""
    with synthetic_server(tmp_path / "server.log", "--latency-ms", "20", "--max-concurrency", "1") as url:
        instance = url.removeprefix("http://").rstrip("/")
        prometheus = start_prometheus([ScrapeJob("embedding-server", "/metrics", target=instance)])
        prometheus.wait_for("a scrape of the server", lambda: bool(prometheus.samples("bench_server_ready")))
        classes = {"embedding": {"model": "bench-synthetic", "slo": {"p95_ms": 1000}, "metrics_url": "prometheus",
                                 "requests": {"count": 8, "batch_size": 2, "input_tokens": 8, "seed": 2}}}
        scenario = scenario_variant(tmp_path, "calibration", classes=classes, readiness_timeout_s=20,
                                    stages=[{"duration_s": 4, "load": {"embedding": 30}}])
        results = tmp_path / "results"
        done = run_locust(["-f", "locustfiles/mixed.py", "--scenario", str(scenario), "--results-dir", str(results),
                           "--host", url, "--arm", "synthetic", "--prometheus-url", prometheus.url,
                           "--prometheus-lag", "2"], timeout=180)
    assert done.returncode == 0, done.stdout[-3000:]
    with open_campaign(results / "results.sqlite") as reader:
        (trial,) = reader.trials()
        (stage,) = trial.stages
        points = reader.server_points(trial.id)
        (source,) = reader.server_sources(trial.id)[0].values()
    assert source.engine == "reference" and source.problems == {} and source.scrapes == 1
    assert source.url == f"{prometheus.url} (instance={instance})"
    assert {p.quantity for p in points} >= {"queue_depth", "running", "queue_time_s", "compute_time_count"}
    assert stage.started_s is not None and stage.ended_s is not None
    assert all(stage.started_s - 0.001 <= p.t <= stage.ended_s + 0.001 for p in points)  # its window, to the ms
    assert max(p.value for p in points if p.quantity == "compute_time_count") >= 30  # the stage's requests
    summary = json.loads((results / "summary.json").read_text())
    server = summary["trials"][0]["stages"][0]["classes"]["embedding"]["server"]
    assert server["engine"] == "reference" and server["split_from"] == "replies"
    assert server["queue_depth"]["points"] >= 2
