"""Ctrl-C while a node is failed (kwok stopped, before the rejoin): the rejoin runs at restore, exit 130.

A disruption that the run leaves half done would leave a real node stopped or cordoned: the restore
runs the rejoin command that was not run yet (and uncordons what a drain cordoned), then records it.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from harness import start_locust, stop_process
from k8s_backend_testlib import add_pool_node, campaign_args, disruption_events, leftovers, scenario_with
from k8s_cluster import Cluster, wait_for

pytestmark = pytest.mark.slow


def stopped(pid: int) -> bool:
    """Whether process ``pid`` is stopped (SIGSTOP): state T in /proc/<pid>/stat."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0] in ("T", "t")


def test_ctrl_c_during_a_node_failure_rejoins_the_node(k8s_cluster: Cluster, k8s_namespace: str, tmp_path: Path,
                                                       synthetic_url: str) -> None:
    ns = k8s_namespace
    node = add_pool_node(k8s_cluster, ns, "gpu", gpus=2)
    kwok = k8s_cluster.pids()["kwok"]
    scenario = scenario_with(tmp_path / "s.yaml", ns, {
        "kind": "node-failure", "at_s": 1, "command": ["kill", "-STOP", str(kwok)],
        "rejoin_command": ["kill", "-CONT", str(kwok)], "rejoin_after_s": 120}, ("llm",), 60)
    log = tmp_path / "locust.log"
    proc = start_locust(campaign_args(scenario, tmp_path / "results", k8s_cluster, synthetic_url, ("llm",),
                                      "--namespace", ns), log)
    try:
        wait_for(lambda: stopped(kwok), "kwok stopped by the disruption", 90)
        proc.send_signal(signal.SIGINT)
        code = stop_process(proc, timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
        if stopped(kwok):
            os.kill(kwok, signal.SIGCONT)
            pytest.fail("the restore did not rejoin the node (kwok was still stopped)")
    output = log.read_text()
    assert code == 130, output[-3000:]
    assert "Traceback" not in output, output[-3000:]
    rejoined = [e for e in disruption_events(tmp_path / "results") if e["action"] == "rejoin-node"]
    assert [(e["target"], e["result"]) for e in rejoined] == [("(stopped before the rejoin)", "exit 0")]
    assert leftovers(k8s_cluster, ns) == []
    k8s_cluster.wait_for_node_ready(node, 60)
