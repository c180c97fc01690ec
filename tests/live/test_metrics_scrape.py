"""A real Prometheus scrapes /bench/metrics while a real campaign runs, and its query gives the live view's P95.

The campaign runs behind its web UI (started at once by --autostart, ended by --autoquit), with the synthetic
servers of scenarios/calibration.yaml. Prometheus (the test fixture's binary, on loopback) scrapes the web
UI's /bench/metrics every second. After the campaign ends the live view holds still (its window and stage
are frozen at the end), so the last value Prometheus stored must equal what /bench/live.json shows: per
class, the stage's P95 (and the llm's TTFT P95), to the float.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
import requests
from harness import LOCUST, ROOT, scenario_variant, stop_process
from prometheus_testlib import PrometheusProcess, ScrapeJob, free_port, missing_prometheus

from bench_plugin.results.store import open_campaign

pytestmark = pytest.mark.slow


DASHBOARD = ROOT / "deploy" / "grafana" / "bench-live.json"


def dashboard_queries() -> list[str]:
    """Every PromQL expression of the Grafana dashboard: its panels' targets and its annotations."""
    board = json.loads(DASHBOARD.read_text())
    return ([t["expr"] for panel in board["panels"] for t in panel["targets"]]
            + [a["expr"] for a in board["annotations"]["list"]])


def live(base: str) -> dict:
    return requests.get(f"{base}/bench/live.json", timeout=5).json()


def last_value(prom: PrometheusProcess, selector: str) -> tuple[float, float] | None:
    """(time, value) of the newest sample of the series ``selector`` matches (None before the first)."""
    found = [points[-1] for _, points in prom.samples(selector) if points]
    return max(found) if found else None


def test_prometheus_scrapes_the_live_figures_of_a_running_campaign(tmp_path: Path) -> None:
    problem = missing_prometheus()
    if problem:
        pytest.fail(problem, pytrace=False)
    port = free_port()
    prom = PrometheusProcess(tmp_path, [ScrapeJob("bench", "/bench/metrics")], f"127.0.0.1:{port}")
    prom.start()
    stages = [{"name": "only", "duration_s": 8, "load": {"llm": 4, "embedding": 6}}]
    scenario = scenario_variant(tmp_path, "calibration", stages=stages, warmup={"requests": "none"})
    log = tmp_path / "locust.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([LOCUST, "-f", "locustfiles/mixed.py", "--scenario", str(scenario), "--results-dir",
                                 str(tmp_path / "results"), "--web-host", "127.0.0.1", "--web-port", str(port),
                                 "--autostart", "--autoquit", "60", "--no-report"],
                                cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
    base = f"http://127.0.0.1:{port}"
    try:
        prom.wait_for("a scrape while the campaign runs, with llm requests in the stage",
                      lambda: any(value > 0 for _, points in prom.samples('bench_requests{class="llm",scope="stage"}')
                                  for _, value in points), deadline_s=180)
        running = prom.samples('bench_campaign_info{status="running"}')
        assert running, "no scrape saw the campaign running"
        deadline = time.monotonic() + 180
        while live(base)["status"] == "running" or live(base)["status"] == "waiting":
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            assert proc.poll() is None, log.read_text()[-3000:]
            time.sleep(0.5)
        shown = live(base)
        assert shown["status"] == "completed", shown
        ended = time.time()
        # a scrape after the end: from then on the figures hold still
        prom.wait_for("a scrape after the campaign ended", lambda: (last_value(
            prom, 'bench_campaign_info{status="completed"}') or (0.0, 0.0))[0] > ended + 1)
        shown = live(base)
        for cls in shown["classes"]:
            stage = cls["stage"]
            assert stage["requests"] > 0 and stage["p95_ms"] is not None, cls
            selector = f'bench_latency_seconds{{class="{cls["name"]}",scope="stage",quantile="0.95"}}'
            found = last_value(prom, selector)
            assert found is not None, selector
            assert found[1] * 1000 == pytest.approx(stage["p95_ms"], rel=1e-12), (cls["name"], found, stage)
            requests_seen = last_value(prom, f'bench_requests{{class="{cls["name"]}",scope="stage"}}')
            assert requests_seen is not None and requests_seen[1] == stage["requests"]
        llm = next(c for c in shown["classes"] if c["name"] == "llm")["stage"]
        ttft = last_value(prom, 'bench_ttft_seconds{class="llm",scope="stage",quantile="0.95"}')
        assert ttft is not None and ttft[1] * 1000 == pytest.approx(llm["ttft_p95_ms"], rel=1e-12)
        with open_campaign(tmp_path / "results" / "results.sqlite") as reader:
            (stage_row,) = [s for t in reader.trials() for s in t.stages]
        start = last_value(prom, 'bench_stage_start_timestamp_seconds{stage="only"}')
        assert start is not None and start[1] == stage_row.started_s  # the dashboard's stage mark
        # every query of the Grafana dashboard finds series in what was scraped (GPU ones need telemetry)
        for expr in dashboard_queries():
            if "bench_gpu_" in expr:
                continue
            answer = requests.get(f"{prom.url}/api/v1/query", timeout=10,
                                  params={"query": f"max_over_time(({expr})[5m:1s])"}).json()
            assert answer["status"] == "success" and answer["data"]["result"], (expr, answer)
    finally:
        stop_process(proc, timeout=60)
        prom.stop()
