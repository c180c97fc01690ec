"""Pytest set-up for the kubernetes backend's tests: makes k8s_backend_testlib importable; the servers the
load goes to.

kwok's pods run no process, so the load of every campaign here goes to synthetic servers on loopback
that the test starts, named to the plugin with --service-url (as kubectl port-forward would be).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from k8s_backend_testlib import synthetic_server


@pytest.fixture(scope="module")
def synthetic_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One synthetic server for every class, for the whole module."""
    with synthetic_server(tmp_path_factory.mktemp("synthetic") / "server.log") as url:
        yield url
