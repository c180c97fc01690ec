"""Pytest set-up: makes tests/harness.py importable, the leftover-server check, the shared campaigns, and
the Kubernetes control plane.

A test marked ``cpu_bound`` runs at the lowest CPU priority (cpu_bound_yields). The short and calibration
campaigns are run once per session and read by every module that needs them; a test that changes a results
folder works on its own copy (harness.copy_of). So is the control plane (tests/k8s_cluster.py); each test that
uses it gets a namespace of its own (k8s_namespace).
"""

from __future__ import annotations

# Locust's gevent monkey-patching must happen before ssl is imported (by requests, aiohttp), or
# urllib3 recurses forever; several test modules import Locust, so patch first, once, here.
import locust  # noqa: F401  # isort: skip

import os
import re
import secrets
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import Campaign, run_campaign, server_processes
from priority import LOWEST_PRIORITY, may_raise_priority

if TYPE_CHECKING:
    from k8s_cluster import Cluster


@pytest.fixture(scope="session")
def short_campaign(tmp_path_factory: pytest.TempPathFactory) -> Campaign:
    """scenarios/short.yaml once per session: the reference servers (tiny, CPU), 2 arms x 2 repeats x 2 stages."""
    return run_campaign(tmp_path_factory.mktemp("short"), "short")


@pytest.fixture(scope="session")
def calibration_campaign(tmp_path_factory: pytest.TempPathFactory) -> Campaign:
    """scenarios/calibration.yaml once per session: synthetic servers with known latencies, their timing logs."""
    return run_campaign(tmp_path_factory.mktemp("calibration"), "calibration")


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


@pytest.fixture(autouse=True)
def cpu_bound_yields(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test marked ``cpu_bound`` (its work all in this process, timing nothing) runs at the lowest CPU priority,
    so the servers and load generators of the tests in the other lanes (tools/run_tests.py) get the cores first;
    it is set back after the test. Where this process could not set it back, the test runs as it is."""
    if request.node.get_closest_marker("cpu_bound") is None:
        yield
        return
    before = os.getpriority(os.PRIO_PROCESS, 0)
    if before >= LOWEST_PRIORITY or not may_raise_priority(before):
        yield
        return
    os.setpriority(os.PRIO_PROCESS, 0, LOWEST_PRIORITY)
    try:
        yield
    finally:
        os.setpriority(os.PRIO_PROCESS, 0, before)


@pytest.fixture(scope="session")
def k8s_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A real control plane with kwok GPU nodes (k8s_cluster.Cluster), started once per session.

    Missing binaries FAIL the test (CI builds them: `make k8s-cluster`); BENCH_K8S_SKIP_MISSING=1 skips.
    """
    # imported here: the `kubernetes` client is needed only by the tests that use the cluster
    from k8s_cluster import Cluster, ClusterError, require_binaries

    require_binaries()
    cluster = Cluster(tmp_path_factory.mktemp("k8s"))
    try:
        cluster.start()
    except ClusterError as error:
        pytest.fail(f"the Kubernetes test cluster did not start: {error}")
    yield cluster
    cluster.stop()


@pytest.fixture
def k8s_namespace(k8s_cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace in the session's cluster, ready for pods; removed after the test with its pods,
    and with the fake nodes the test added (a test that stopped kwok gets it restarted)."""
    slug = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")[:48].strip("-")
    name = f"{slug}-{secrets.token_hex(3)}"
    nodes_before = set(k8s_cluster.fake_nodes)
    k8s_cluster.create_namespace(name)
    yield name
    k8s_cluster.start_kwok()
    k8s_cluster.delete_namespace(name)
    for node in k8s_cluster.fake_nodes - nodes_before:
        k8s_cluster.delete_node(node)
