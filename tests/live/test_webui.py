"""The campaign in Locust's web UI, driven in headless Chromium against a running campaign.

A real `locust` (no --headless) runs scenarios/distributed.yaml with stages of 10 s, as a local
runner and as a master with a real worker. tests/browser/check_webui.mjs presses Start, reads the
"GPU sharing, live" tab during the second stage together with the /stats/requests reply it was drawn
from, presses Stop, and presses Start once more. The test then checks the tab against the master's
own numbers: the same window recomputed from results.sqlite after the run gives the same request
counts and P50/P95. Screenshots are kept in tests/browser/artifacts (git-ignored).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import requests
import yaml
from harness import LOCUST, ROOT, start_worker, stop_process

from bench_plugin.results.store import open_campaign, open_store, read_samples
from bench_plugin.sharing.processes import free_port

pytestmark = pytest.mark.slow

BROWSER = ROOT / "tests" / "browser"
ARTIFACTS = BROWSER / "artifacts"


def scenario(tmp_path: Path) -> Path:
    data = yaml.safe_load((ROOT / "scenarios" / "distributed.yaml").read_text())
    for stage in data["stages"]:
        stage["duration_s"] = 10
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def node() -> str:
    found = shutil.which("node")
    if found is None or not (BROWSER / "node_modules" / "playwright-core").is_dir():
        pytest.fail("the web UI test needs node and playwright-core (cd tests/browser && npm ci)", pytrace=False)
    return found


def wait_up(url: str, timeout: float = 60) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if requests.get(url, timeout=2).status_code == 200:
                return
        except requests.ConnectionError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"the web UI at {url} never answered")


def run_ui(tmp_path: Path, mode: str) -> tuple[dict[str, Any], Path, int, str]:
    """Run the campaign behind its web UI, drive it; (what the browser saw, results dir, exit, log)."""
    results, port, log = tmp_path / "results", free_port(), tmp_path / "locust.log"
    args = [LOCUST, "-f", "locustfiles/mixed.py", "--scenario", str(scenario(tmp_path)), "--results-dir",
            str(results), "--web-host", "127.0.0.1", "--web-port", str(port)]
    workers: list[subprocess.Popen[bytes]] = []
    prefix = ""
    if mode == "master":  # also under a base path, as behind a reverse proxy that serves the UI under a prefix
        master_port, prefix = free_port(), "/gpu-bench"
        args += ["--master", "--master-bind-host", "127.0.0.1", "--master-bind-port", str(master_port),
                 "--web-base-path", prefix]
    with open(log, "wb") as out:
        proc = subprocess.Popen(args, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        base = f"http://127.0.0.1:{port}{prefix}/"
        wait_up(base)
        if mode == "master":
            workers = [start_worker(master_port, tmp_path / f"worker-{n}.log") for n in (1, 2)]
            deadline = time.time() + 60
            while time.time() < deadline and requests.get(base + "worker-count", timeout=2).json().get(
                    "worker_count", 0) < len(workers):
                time.sleep(0.2)
        shots = ARTIFACTS / mode
        shots.mkdir(parents=True, exist_ok=True)
        done = subprocess.run([node(), str(BROWSER / "check_webui.mjs"), base, str(shots)], cwd=BROWSER,
                              capture_output=True, text=True, timeout=300, check=False)
        assert done.returncode == 0, done.stderr[-3000:]
        seen = json.loads(done.stdout)
    finally:
        proc.send_signal(signal.SIGTERM)
        code = stop_process(proc, timeout=60)
        for worker in workers:
            stop_process(worker, timeout=30)
    return seen, results, code, log.read_text()


def recomputed(results: Path, stage: int, start: float, end: float) -> dict[str, dict[str, float | int | None]]:
    """Per class, the live window's figures from results.sqlite (the requests of ``stage`` that ended in the
    window): requests, P50 and P95 of the successful."""
    with open_store(results / "results.sqlite") as db:
        samples = read_samples(db)  # every sample of the campaign
    out: dict[str, dict[str, float | int | None]] = {}
    for name in ("llm", "embedding", "asr"):
        rows = [s for s in samples if s.workload == name and s.stage == stage and start < s.end_s <= end]
        ok = [(s.end_s - s.intended_s) * 1000 for s in rows if s.ok]
        out[name] = {"requests": len(rows), "p50": float(np.percentile(ok, 50)) if ok else None,
                     "p95": float(np.percentile(ok, 95)) if ok else None}
    return out


@pytest.mark.parametrize("mode", ["local", "master"])
def test_live_tab_start_and_stop(tmp_path: Path, mode: str) -> None:
    seen, results, code, log = run_ui(tmp_path, mode)
    assert "error" not in seen, seen.get("error")
    assert not seen["pageErrors"], seen["pageErrors"]
    assert "Users and ramp-up do not apply" in seen["banner"]
    assert all(field["disabled"] for field in seen["formFields"] if field["name"] in ("userCount", "spawnRate"))
    assert seen["firstStart"] and seen["firstStart"]["success"] is True

    live = seen.get("live")
    assert live is not None, f"the live tab never showed stage 'high' with requests of every class:\n{log[-3000:]}"
    heads = live["table"]["heads"]
    assert heads[:7] == ["Class", "Offered", "Req/s (window)", "Requests", "Errors", "P50 ms", "P95 ms"]
    window = next(r for r in live["campaign"] if r["item"].startswith("live window"))
    start, end = float(window["start"]), float(window["end"])
    with open_campaign(results / "results.sqlite") as reader:
        high = next(s for t in reader.trials() for s in t.stages if s.name == "high")
    assert high.started_s is not None and 0 < end - start <= 10.0 and start >= high.started_s  # never before it
    assert window["value"].startswith(f"last {end - start:.1f} s of high (")
    truth = recomputed(results, high.index, start, end)
    for row in live["reply"]:
        mine = truth[row["cls"]]
        assert int(row["requests"]) == mine["requests"], (row, mine)
        for p in ("p50", "p95"):
            assert mine[p] is not None and abs(float(row[p]) - mine[p]) <= 0.051, (row["cls"], p, row[p], mine[p])
        cells = next(c for c in live["table"]["rows"] if c[0] == row["cls"])
        assert cells[3] == row["requests"] and cells[5] == row["p50"] and cells[6] == row["p95"]

    # Locust's own table counts each request once: one entry per class, no TTFT/TPOT entries in its RPS
    entries = [e for e in live["entries"] if e["name"] != "Aggregated"]
    assert entries and {e["method"] for e in entries} <= {"llm", "embedding", "asr"}, entries
    assert not [e for e in entries if e["name"] in ("TTFT", "TPOT")], entries

    # the live charts: per class the P95 line's last point is the table's P95 for the same window, beside a
    # dashed SLO line; the stages' starts are marked; the Host field is read-only
    charts = seen.get("charts")
    assert charts is not None, f"the charts' last point never matched the live table's window:\n{log[-3000:]}"
    lines = {line["name"]: line for line in charts["lines"]}
    for row in charts["live"]:
        drawn = lines[f"{row['cls']} P95"]
        assert drawn["t"] == charts["window"]["end"]
        assert abs(drawn["last"] - float(row["p95"])) <= 0.051, (row["cls"], drawn, row["p95"])  # the cell has .1f
        assert f"{row['cls']} P95 SLO" in lines, sorted(lines)
    assert {"TTFT P95", "TTFT SLO", "TPOT P95", "TPOT SLO"} <= set(lines)
    assert charts["marks"] >= 2  # stage 0 and stage "high"
    series = charts["series"]
    high = next(m["t"] for m in series["marks"] if m["stage"] == "high")
    assert [p for p in series["points"] if p["end_s"] < high and p["end_s"] - p["start_s"] >= 2], series  # stage 0 too
    assert all(p["end_s"] > max(m["t"] for m in series["marks"] if m["t"] < p["end_s"]) for p in series["points"])
    host = [field for field in seen["formFields"] if field["name"] == "host"]
    assert host and all(field["readOnly"] for field in host), seen["formFields"]  # endpoints come from the scenario

    # the campaign tab says how, when and why it ended: the Stop button, not "a signal"
    assert seen["afterStop"].startswith("interrupted at ") and seen["afterStop"].endswith(
        ": the run was stopped (the web UI's Stop button)"), seen["afterStop"]
    assert seen["report"] == {"status": 200, "type": "text/html; charset=utf-8"}
    summary = json.loads((results / "summary.json").read_text())
    assert summary["status"]["status"] == "interrupted"
    assert summary["status"]["reason"] == "the run was stopped (the web UI's Stop button)"
    # Locust's page, left at STOPPING by a poll during the master's stop, is reloaded only once the runner stopped
    assert seen.get("reloadedAfterStop") in (None, "stopped", "ready"), seen.get("reloadedAfterStop")
    assert seen["secondStart"] is not None and seen["secondStart"]["success"] is False
    assert "this campaign has ended" in seen["secondStart"]["message"]
    assert code == 130, log[-3000:]
    for shot in ("webui-live.png", "webui-charts.png", "webui-campaign.png"):
        assert (ARTIFACTS / mode / shot).stat().st_size > 10_000
