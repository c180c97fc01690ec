"""Pytest set-up: makes tests/harness.py importable, the leftover-server check, and the shared campaigns.

The short and calibration campaigns are run once per session and read by every module that needs
them; a test that changes a results folder works on its own copy (harness.copy_of).
"""

from __future__ import annotations

# Locust's gevent monkey-patching must happen before ssl is imported (by requests, aiohttp), or
# urllib3 recurses forever; several test modules import Locust, so patch first, once, here.
import locust  # noqa: F401  # isort: skip

import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import ROOT, Campaign, run_locust, server_processes


def _campaign(factory: pytest.TempPathFactory, scenario: str) -> Campaign:
    results = factory.mktemp(scenario) / "results"
    done = run_locust(["-f", "locustfiles/mixed.py", "--scenario", str(ROOT / "scenarios" / f"{scenario}.yaml"),
                       "--results-dir", str(results)], timeout=600)
    assert done.returncode == 0, done.stdout[-3000:]
    return Campaign(results, done.stdout)


@pytest.fixture(scope="session")
def short_campaign(tmp_path_factory: pytest.TempPathFactory) -> Campaign:
    """scenarios/short.yaml once per session: the reference servers (tiny, CPU), 2 arms x 2 repeats x 2 stages."""
    return _campaign(tmp_path_factory, "short")


@pytest.fixture(scope="session")
def calibration_campaign(tmp_path_factory: pytest.TempPathFactory) -> Campaign:
    """scenarios/calibration.yaml once per session: synthetic servers with known latencies, their timing logs."""
    return _campaign(tmp_path_factory, "calibration")


@pytest.fixture
def no_leftover_servers(tmp_path: Path) -> Iterator[None]:
    """Fail the test if a campaign under its tmp_path leaves a server running (and kill it)."""
    yield
    deadline = time.time() + 5
    while time.time() < deadline and server_processes(tmp_path):
        time.sleep(0.1)
    left = server_processes(tmp_path)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left, f"servers left running: {left}"
