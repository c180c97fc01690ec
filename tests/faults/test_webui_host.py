"""A host typed into the web UI's Start form is refused in one line, not silently ignored.

Real process: ``locust`` with its web UI (no --headless); the form is posted as the UI posts it. The
campaign's endpoints come from its scenario (or --host at the command line), so another host in the form
must be answered with why, and nothing may start; an empty field, or the one the UI fills in, starts it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import requests
from harness import LOCUST, ROOT, scenario_variant, stop_process

from bench_plugin.results.store import open_campaign
from bench_plugin.sharing.processes import free_port

pytestmark = pytest.mark.slow


def test_a_host_in_the_start_form_is_refused_saying_why(tmp_path: Path) -> None:
    scenario = scenario_variant(tmp_path, "calibration", stages=[{"duration_s": 2, "load": {"llm": 2, "embedding": 2}}])
    results, port, log = tmp_path / "results", free_port(), tmp_path / "locust.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([LOCUST, "-f", "locustfiles/mixed.py", "--scenario", str(scenario), "--results-dir",
                                 str(results), "--web-host", "127.0.0.1", "--web-port", str(port), "--no-report"],
                                cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 60
        while True:
            try:
                if requests.get(base + "/", timeout=2).status_code == 200:
                    break
            except requests.ConnectionError:
                assert time.time() < deadline, log.read_text()
                time.sleep(0.2)
        refused = requests.post(base + "/swarm", data={"user_count": 1, "spawn_rate": 1,
                                                       "host": "http://10.1.2.3:8000"}, timeout=10).json()
        assert refused["success"] is False, refused
        assert refused["message"].startswith("Host http://10.1.2.3:8000: not used by this campaign, whose "
                                             "endpoints come from its scenario"), refused
        time.sleep(1)
        with open_campaign(results / "results.sqlite") as reader:
            assert reader.trials() == []  # no trial started (the reader lists only those that did)
        started = requests.post(base + "/swarm", data={"user_count": 1, "spawn_rate": 1, "host": ""},
                                timeout=10).json()
        assert started["success"] is True, started
    finally:
        proc.send_signal(signal.SIGTERM)
        stop_process(proc, timeout=60)
    assert "Traceback" not in log.read_text()
