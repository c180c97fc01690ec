"""Ctrl-C during a campaign: what was measured stays, and every server the plugin started is gone."""

from __future__ import annotations

import json
import signal
import sqlite3
import time
from pathlib import Path

import pytest
from harness import pid_alive, scenario_variant, start_locust

pytestmark = pytest.mark.slow


def completed_stages(db_path: Path) -> int:
    if not db_path.exists():
        return 0
    db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        return db.execute("SELECT count(*) FROM stages WHERE status='completed'").fetchone()[0]
    except sqlite3.OperationalError:
        return 0
    finally:
        db.close()


def test_sigint_keeps_completed_stages_and_stops_servers(tmp_path: Path, no_leftover_servers: None) -> None:
    scenario = scenario_variant(tmp_path, "short", repeats=1)
    results = tmp_path / "results"
    proc = start_locust(["-f", "locustfiles/mixed.py", "--scenario", str(scenario), "--results-dir", str(results),
                         "--arm", "shared", "--stage-duration", "4"], tmp_path / "locust.log")
    deadline = time.time() + 120
    while completed_stages(results / "results.sqlite") < 1 and time.time() < deadline and proc.poll() is None:
        time.sleep(0.2)
    assert proc.poll() is None, (tmp_path / "locust.log").read_text()
    time.sleep(1.0)  # well inside the second stage
    proc.send_signal(signal.SIGINT)
    code = proc.wait(timeout=60)
    output = (tmp_path / "locust.log").read_text()
    assert code == 130, output
    assert "Traceback" not in output
    assert "campaign interrupted" in output

    db = sqlite3.connect(results / "results.sqlite")
    stages = dict(db.execute("SELECT stage, status FROM stages").fetchall())
    assert stages[0] == "completed" and stages[1] == "interrupted"
    counts = dict(db.execute("SELECT stage, count(*) FROM samples GROUP BY stage").fetchall())
    assert counts[0] > 10 and counts.get(1, 0) > 0
    assert db.execute("SELECT status FROM trials").fetchone()[0] == "interrupted"
    for (placement,) in db.execute("SELECT placement FROM segments"):
        for where in json.loads(placement).values():
            assert not pid_alive(where["pid"]), where
    summary = json.loads((results / "summary.json").read_text())
    assert summary["status"]["status"] == "interrupted"
    assert summary["trials"][0]["stages"][0]["classes"]["llm"]["requests"] > 0
