"""Disruptions on the kubernetes backend, through the real `locust` command and a real control plane.

A rollout restart replaces the class's pod; a drain cordons the pod's node, evicts the pod through the
eviction API (and records an eviction a PodDisruptionBudget blocks, without hanging), and uncordons the
node at the stage's end; a node failure (kwok stopped with SIGSTOP, as a VM stopped would) makes the node
Unknown until the rejoin (SIGCONT) makes it Ready again. Afterwards the cluster holds nothing of the
plugin's and every node is schedulable.

kwok's pods run no process: the load goes to a synthetic server on loopback, which the disruption does not
touch, so these runs show the cluster's side (events, pods, nodes) and that the interruption figures are
computed from the samples; what the requests see when real pods go is a real cluster's to show
(docs/kubernetes.md, "Disruptions"). tests/analysis/test_disruption.py checks the figures on known failures.
"""

from __future__ import annotations

import json
import os
import signal
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml
from harness import run_locust
from k8s_backend_testlib import add_pool_node, campaign_args, disruption_events, leftovers, scenario_with
from k8s_cluster import Cluster, node_condition, wait_for
from kubernetes import client as k8s

from bench_plugin.analysis.disruption import class_interruption
from bench_plugin.results.store import open_campaign

pytestmark = pytest.mark.slow

ARMS = [{"name": "exclusive", "control": True, "sharing": "exclusive"}]


def run(cluster: Cluster, ns: str, tmp_path: Path, scenario: Path, url: str, classes: tuple[str, ...],
        timeout: float = 120, report: bool = False) -> list[dict[str, Any]]:
    done = run_locust(campaign_args(scenario, tmp_path / "results", cluster, url, classes, "--namespace", ns),
                      timeout=timeout, report=report)
    assert done.returncode == 0, done.stdout[-3000:]
    assert "Traceback" not in done.stdout, done.stdout[-3000:]
    return disruption_events(tmp_path / "results")


def assert_clean(cluster: Cluster, ns: str, nodes: list[str]) -> None:
    assert leftovers(cluster, ns) == []
    for node in nodes:
        assert not cluster.node(node)["spec"].get("unschedulable"), f"node {node} is still cordoned"


def stage_disruption(tmp_path: Path) -> dict[str, Any]:
    summary = json.loads((tmp_path / "results" / "summary.json").read_text())
    return summary["trials"][0]["stages"][0]["disruption"]


def recomputed(results: Path, started_s: float) -> dict[str, Any]:
    """The llm class's interruption figures computed afresh from the first stage's stored samples."""
    with open_campaign(results / "results.sqlite") as reader:
        (trial,) = reader.trials()
        stage = next(s for s in trial.stages if s.index == 0)
        mine = [s for s in reader.samples(trial.id) if s.workload == "llm" and s.stage == 0]
    assert stage.ended_s is not None and mine
    return class_interruption(mine, started_s, stage.ended_s).model_dump(mode="json")


def test_rollout_restart_replaces_the_pod(k8s_cluster: Cluster, k8s_namespace: str, tmp_path: Path,
                                          synthetic_url: str) -> None:
    ns = k8s_namespace
    node = add_pool_node(k8s_cluster, ns, "gpu", gpus=2)
    scenario = scenario_with(tmp_path / "s.yaml", ns, {"kind": "rollout-restart", "at_s": 1}, ("llm",), 6)
    found = run(k8s_cluster, ns, tmp_path, scenario, synthetic_url, ("llm",), report=True)
    by_action = {e["action"]: e for e in found}
    patched, ready = by_action["rollout-restart"], by_action["rollout-restart-ready"]
    assert patched["target"] == "deployment/bench-llm" and "kubectl.kubernetes.io/restartedAt=" in patched["result"]
    assert ready["result"] == "Ready" and ready["target"].startswith("pod/bench-llm-")
    assert len(patched["old_pods"]) == 1 and ready["target"] != f"pod/{patched['old_pods'][0]}"
    assert by_action["start"]["t"] > 0 and all(e["disruption"] == "rollout-restart" for e in found)
    d = stage_disruption(tmp_path)
    assert d["kind"] == "rollout-restart" and d["classes"]["llm"]["requests"] > 0
    # the synthetic server never broke, but on a busy host a slow request late in the stage can leave it
    # "not recovered": what must hold is that the figures are the rule applied to the stored samples
    assert d["classes"]["llm"] == recomputed(tmp_path / "results", d["started_s"])
    report = (tmp_path / "results" / "report.md").read_text()
    assert "## Disruption" in report and "deployment/bench-llm" in report
    assert_clean(k8s_cluster, ns, [node])


def test_drain_evicts_cordons_and_uncordons_and_a_budget_blocks(k8s_cluster: Cluster, k8s_namespace: str,
                                                                tmp_path: Path, synthetic_url: str) -> None:
    ns = k8s_namespace
    nodes = [add_pool_node(k8s_cluster, ns, f"gpu{i}", gpus=2) for i in range(3)]
    classes = ("llm", "embedding")
    scenario = scenario_with(tmp_path / "s.yaml", ns, {"kind": "drain", "at_s": 3, "eviction_timeout_s": 3},
                             classes, 8)
    apps = k8s.AppsV1Api(k8s_cluster.api_client)

    def budget() -> None:
        # made once the Deployment is, past the preflight (which refuses a budget that allows no eviction up
        # front): as a budget used up by other disruptions, or made by someone else mid-run, would be
        made = "metadata.name=bench-embedding"
        wait_for(lambda: apps.list_namespaced_deployment(ns, field_selector=made).items or None,
                 "Deployment bench-embedding", 60)
        k8s_cluster.kubectl("apply", "-n", ns, "-f", "-", input=yaml.safe_dump({
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "keep-embedding"},
            "spec": {"minAvailable": 1,
                     "selector": {"matchLabels": {"app.kubernetes.io/name": "bench-embedding"}}}}))

    maker = threading.Thread(target=budget, daemon=True)
    maker.start()
    found = run(k8s_cluster, ns, tmp_path, scenario, synthetic_url, classes, report=True)
    maker.join(timeout=10)
    cordoned = [e["target"] for e in found if e["action"] == "cordon"]
    uncordoned = [e["target"] for e in found if e["action"] == "uncordon"]
    assert cordoned and sorted(uncordoned) == sorted(cordoned)
    evicted = {e["target"].split("-")[1]: e for e in found if e["action"] == "evict"}
    assert evicted["llm"]["result"] == "evicted"
    assert evicted["embedding"]["result"].startswith(f"blocked by PodDisruptionBudget {ns}/keep-embedding")
    assert evicted["embedding"]["refusals"] >= 2
    moved = next(e for e in found if e["action"] == "drain-ready")
    assert moved["target"].startswith("pod/bench-llm-") and f"node/{moved['node']}" not in cordoned
    d = stage_disruption(tmp_path)
    assert set(d["classes"]) == set(classes)
    html = (tmp_path / "results" / "report.html").read_text()
    assert "keep-embedding" in html
    assert_clean(k8s_cluster, ns, nodes)


def test_node_failure_then_rejoin(k8s_cluster: Cluster, k8s_namespace: str, tmp_path: Path,
                                  synthetic_url: str) -> None:
    ns = k8s_namespace
    node = add_pool_node(k8s_cluster, ns, "gpu", gpus=2)
    kwok = k8s_cluster.pids()["kwok"]
    rejoin_after = k8s_cluster.node_grace_s + 6  # past the grace period and a node-monitor period or two
    scenario = scenario_with(tmp_path / "s.yaml", ns, {
        "kind": "node-failure", "at_s": 1, "command": ["kill", "-STOP", str(kwok)],
        "rejoin_command": ["kill", "-CONT", str(kwok)], "rejoin_after_s": rejoin_after}, ("llm",), 4)
    seen: list[str] = []
    stop = threading.Event()

    def watch() -> None:  # the node's Ready condition as the API server reports it, while the run goes on
        while not stop.is_set():
            state = node_condition(k8s_cluster.node(node), "Ready") or "none"
            if not seen or seen[-1] != state:
                seen.append(state)
            stop.wait(0.5)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        found = run(k8s_cluster, ns, tmp_path, scenario, synthetic_url, ("llm",))
    finally:
        stop.set()
        watcher.join(timeout=10)
        os.kill(kwok, signal.SIGCONT)  # whatever happened, kwok goes on for the session's other tests
    by_action = {e["action"]: e for e in found}
    assert by_action["fail-node"]["result"] == "exit 0" and by_action["fail-node"]["target"] == f"node/{node}"
    assert by_action["rejoin-node"]["result"] == "exit 0"
    states = [e["result"] for e in found if e["action"] == "node-state"]
    assert states[0] == f"{node} Ready=Unknown" and states[-1] == f"{node} Ready=True", states
    # The watcher saw the node go Unknown while the run went on; the run ends as soon as the plugin reads it
    # Ready again, which may fall between two of the watcher's reads, so the end state is read once more here.
    assert "Unknown" in seen, seen
    assert node_condition(k8s_cluster.node(node), "Ready") == "True", seen
    assert stage_disruption(tmp_path)["kind"] == "node-failure"
    assert_clean(k8s_cluster, ns, [node])
