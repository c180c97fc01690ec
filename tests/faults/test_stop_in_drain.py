"""Ctrl-C while the last stage drains: the stage's missing answers are not read as the server's errors.

Real processes: the ``locust`` command (manual backend) against tests/quirky_server.py answering embeddings
after 10 s. The stage's load ends while its last requests are still in flight; Ctrl-C then comes while the
campaign waits for them (for 7 s or more: wide enough that a busy machine's delays cannot let the last answer
come first, as a wait of 3 s once did in CI). Those requests are cancelled by the stop, not failed by the
server, so the stage must not stand as completed with their cancellations as its error rate (before, the
verdict read "limited by embedding error rate"): it is kept, marked ``interrupted`` with the reason, and left
out of the arm's figures.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import time
from collections import Counter
from pathlib import Path

import pytest
from harness import quirky, scenario_variant, start_locust, stop_process

from bench_plugin.results.store import StoreError, open_campaign, read_samples

pytestmark = pytest.mark.slow

EMBEDDING = {"model": "bench-synthetic", "requests": {"count": 4, "batch_size": 2, "input_tokens": 8, "seed": 2},
             "slo": {"p95_ms": 10000}, "request_timeout_s": 30}


def stage_status(results: Path) -> str | None:
    """The status of stage 0 as the store has it so far; None before it has one."""
    path = results / "results.sqlite"
    if not path.exists():
        return None
    try:
        with open_campaign(path) as reader:
            trials = reader.trials()
    except (StoreError, sqlite3.OperationalError):  # the store is still being created
        return None
    return next((s.status for trial in trials for s in trial.stages if s.index == 0), None)


def test_ctrl_c_in_the_final_drain_leaves_the_stage_interrupted_not_failed(tmp_path: Path) -> None:
    scenario = scenario_variant(tmp_path, "calibration", classes={"embedding": EMBEDDING}, readiness_timeout_s=20,
                                warmup={"requests": "none"}, drain_timeout_s=60,
                                stages=[{"duration_s": 3, "load": {"embedding": 4}}])
    results, log = tmp_path / "results", tmp_path / "locust.log"
    with quirky(tmp_path, "--latency-ms", "10000") as url:
        proc = start_locust(["-f", "locustfiles/mixed.py", "--scenario", str(scenario), "--results-dir", str(results),
                             "--host", url, "--arm", "synthetic"], log)
        try:
            deadline = time.time() + 60
            while stage_status(results) in (None, "running") and time.time() < deadline and proc.poll() is None:
                time.sleep(0.05)
            assert stage_status(results) == "completed", log.read_text()  # the load ended; answers are awaited
            proc.send_signal(signal.SIGINT)
            code = proc.wait(timeout=60)
        finally:
            stop_process(proc)
    output = log.read_text()
    assert code == 130, output
    assert "Traceback" not in output, output
    with open_campaign(results / "results.sqlite") as reader:
        (stage,) = (s for trial in reader.trials() for s in trial.stages if s.index == 0)
        kinds = Counter("ok" if s.error is None else s.error for s in read_samples(reader.db) if s.stage == 0)
    status, reason = stage.status, stage.reason
    assert status == "interrupted", (status, reason)
    assert reason.startswith("the run was stopped while ") and reason.endswith(
        " of its requests were still in flight (Ctrl-C)"), reason
    assert kinds.get("cancelled", 0) >= 1 and sum(kinds.values()) == 12, kinds  # 4 req/s x 3 s, each recorded
    summary = json.loads((results / "summary.json").read_text())
    assert summary["status"]["status"] == "interrupted"
    assert summary["trials"][0]["stages"][0]["status"] == "interrupted"
    assert "error rate" not in output.split("the answer for", 1)[-1], output  # no verdict from the cancellations
