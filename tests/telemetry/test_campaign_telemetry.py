"""A campaign's GPU series from outside this host: --dcgm-url scraped during trials, --prometheus-url per stage.

A real Prometheus scrapes a stand-in dcgm-exporter with known values; a whole campaign (the
calibration scenario, local backend on this CPU host) runs with both options. The scrape lands in
the telemetry table; Prometheus is queried once per stage, and since the placement names no GPU for
any class here the stage carries a note saying so rather than unattributed series.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from exporter_pages import C_GPU0, SERVED, page
from harness import ROOT, run_locust
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
