"""Accuracy: against a server with known latencies that logs its own timings, the campaign's reported
percentiles of e2e latency, TTFT and TPOT are within max(2 ms, 3%) of the server's, and counts match."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from harness import ROOT, run_locust

pytestmark = pytest.mark.slow


def tolerance(reference: float) -> float:
    return max(2.0, 0.03 * reference)


@pytest.fixture(scope="module")
def calibration(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    results = tmp_path_factory.mktemp("calibration") / "results"
    done = run_locust(["-f", "locustfiles/mixed.py", "--scenario", str(ROOT / "scenarios" / "calibration.yaml"),
                       "--results-dir", str(results)], timeout=300)
    assert done.returncode == 0, done.stdout[-3000:]
    return results, json.loads((results / "summary.json").read_text())


def server_log(results: Path, name: str) -> list[dict[str, Any]]:
    """The server's own records of the stage's requests (readiness probes came before the stage)."""
    db = sqlite3.connect(results / "results.sqlite")
    (start,) = db.execute("SELECT started_s FROM stages WHERE trial=1 AND stage=0").fetchone()
    lines = (results / "logs" / f"synthetic-{name}.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["received_s"] >= start - 0.05]


def check(reported: dict[str, float], measured: list[float], what: str) -> None:
    for p in (50, 95):
        truth = float(np.percentile(measured, p))
        got = reported[f"p{p}"]
        assert abs(got - truth) <= tolerance(truth), f"{what} p{p}: reported {got:.2f} ms, server {truth:.2f} ms"


def test_llm_e2e_ttft_tpot_match_the_server(calibration: tuple[Path, dict[str, Any]]) -> None:
    results, summary = calibration
    figures = summary["trials"][0]["stages"][0]["classes"]["llm"]
    log = server_log(results, "llm")
    assert figures["requests"] == len(log) > 20
    assert figures["errors"] == 0
    assert sum(r["slow"] for r in log) > 0, "the known slow share must show up in the sample"
    check(figures["latency_ms"], [r["e2e_ms"] for r in log], "e2e")
    check(figures["ttft_ms"], [r["ttft_ms"] for r in log], "TTFT")
    check(figures["tpot_ms"], [r["tpot_ms"] for r in log], "TPOT")


def test_embedding_latency_matches_the_server(calibration: tuple[Path, dict[str, Any]]) -> None:
    results, summary = calibration
    figures = summary["trials"][0]["stages"][0]["classes"]["embedding"]
    log = server_log(results, "embedding")
    assert figures["requests"] == len(log) > 20
    check(figures["latency_ms"], [r["e2e_ms"] for r in log], "e2e")


def test_server_latencies_are_the_configured_ones(calibration: tuple[Path, dict[str, Any]]) -> None:
    """The reference itself: 40 ms TTFT (+150 ms when slow), 8 ms between tokens."""
    log = server_log(calibration[0], "llm")
    fast = [r for r in log if not r["slow"]]
    assert abs(np.median([r["ttft_ms"] for r in fast]) - 40) < 3
    assert abs(np.median([r["tpot_ms"] for r in log]) - 8) < 1
