"""Pytest set-up: makes tests/harness.py importable and provides the leftover-server check."""

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

from harness import server_processes


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
