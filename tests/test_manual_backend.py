"""The manual backend: an explicit host means nothing is started; the plugin measures and labels."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from harness import ROOT, run_locust

from bench_plugin.sharing.processes import free_port

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def synthetic_url() -> Iterator[str]:
    """A synthetic server started by the test, as a user's own server would be."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "bench_plugin.servers", "synthetic", "--port", str(port),
                             "--ttft-ms", "20", "--itl-ms", "2", "--latency-ms", "10"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                if requests.get(url + "/health", timeout=1).status_code == 200:
                    break
            except requests.ConnectionError:
                time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def run(tmp_path: Path, *host_args: str) -> dict:
    results = tmp_path / "results"
    done = run_locust(["-f", "locustfiles/mixed.py", "--scenario", str(ROOT / "scenarios" / "calibration.yaml"),
                       "--results-dir", str(results), "--stage-duration", "2", *host_args], timeout=120)
    assert done.returncode == 0, done.stdout[-2000:]
    return json.loads((results / "summary.json").read_text())


def test_one_host_for_every_class(tmp_path: Path, synthetic_url: str) -> None:
    summary = run(tmp_path, "--host", synthetic_url, "--arm", "synthetic")
    trial = summary["trials"][0]
    assert {where["url"] for where in trial["placement"].values()} == {synthetic_url}
    assert all(where["pid"] is None for where in trial["placement"].values())
    assert summary["conditions"]["backend"]["backend"] == "manual"
    stage = trial["stages"][0]["classes"]
    assert stage["llm"]["requests"] > 0 and stage["embedding"]["requests"] > 0
    assert stage["llm"]["errors"] == 0 and stage["embedding"]["errors"] == 0


def test_a_host_per_class(tmp_path: Path, synthetic_url: str) -> None:
    summary = run(tmp_path, "--llm-host", synthetic_url, "--embedding-host", synthetic_url + "/")
    placement = summary["trials"][0]["placement"]
    assert placement["llm"]["url"] == synthetic_url and placement["embedding"]["url"] == synthetic_url + "/"


def test_no_report_ends_with_the_summaries_and_says_how_to_render_the_report(tmp_path: Path,
                                                                             synthetic_url: str) -> None:
    results = tmp_path / "results"
    done = run_locust(["-f", "locustfiles/mixed.py", "--scenario", str(ROOT / "scenarios" / "calibration.yaml"),
                       "--results-dir", str(results), "--stage-duration", "1", "--host", synthetic_url,
                       "--arm", "synthetic"], timeout=120, report=False)  # report=False: with --no-report
    assert done.returncode == 0, done.stdout[-2000:]
    written = {p.name for p in results.iterdir() if p.is_file()}
    assert {"results.sqlite", "summary.json", "summary.md"} <= written and not written & {"report.html", "report.md"}
    assert f"results in {results} (summary.json, summary.md, results.sqlite; report.html by `bench-plugin report " \
           f"{results}`)" in done.stdout
    assert "  report: " not in done.stdout  # the terminal answer names no report that is not there
    rendered = subprocess.run([sys.executable, "-m", "bench_plugin.cli", "report", str(results)], cwd=ROOT,
                              capture_output=True, text=True, timeout=120, check=False)
    assert rendered.returncode == 0, rendered.stderr
    assert (results / "report.html").is_file() and (results / "report.md").is_file()
