"""Arms that change where and before whom the scheduler places a class: affinity (node_labels) and priority.

The scheduler is Kubernetes' own: an affinity arm's pod lands on the labelled node of two although the
scheduler's scoring prefers the other (as the control shows); a high-priority arm gets
priorityClassName bench-plugin-high, which the campaign creates and deletes, and preempts a
lower-priority pod the test put on a full node. A PriorityClass of that name but another value is
refused before anything runs; an absent namespace is created for the campaign and deleted after it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from harness import run_locust
from k8s_backend_testlib import (
    ObjectWatch,
    add_pool_node,
    assert_restored,
    campaign_args,
    filler,
    shared_state,
    write_scenario,
)
from k8s_cluster import Cluster, wait_for
from kubernetes import client as k8s

pytestmark = pytest.mark.slow

CLASSES = ("llm",)
TIER = "bench-test/tier"


def run(k8s_cluster: Cluster, ns: str, tmp_path: Path, url: str, *extra: str, report: bool = False) -> dict:
    done = run_locust(campaign_args(tmp_path / "s.yaml", tmp_path / "results", k8s_cluster, url, CLASSES,
                                    "--namespace", ns, *extra), timeout=180, report=report)
    assert done.returncode == 0, done.stdout[-3000:]
    return dict(json.loads((tmp_path / "results" / "summary.json").read_text()))


def test_affinity_arm_lands_on_the_labelled_node(k8s_cluster: Cluster, k8s_namespace: str, tmp_path: Path,
                                                 synthetic_url: str) -> None:
    ns = k8s_namespace
    # the scheduler's scoring (least allocated, balanced) prefers the larger node for a pod asking CPU
    large = add_pool_node(k8s_cluster, ns, "large", gpus=2, cpu="64")
    small = add_pool_node(k8s_cluster, ns, "small", gpus=2, cpu="8", labels={TIER: "fast"})
    arms = [{"name": "anywhere", "control": True},
            {"name": "fast-tier", "classes": {"llm": {"node_labels": {TIER: "fast"}}}}]
    write_scenario(tmp_path / "s.yaml", ns, arms, classes=CLASSES,
                   class_blocks={"llm": {"cpu": "2", "memory": "1Gi"}})
    before = shared_state(k8s_cluster, ns, [large, small])

    with ObjectWatch(k8s_cluster, ns) as watch:
        summary = run(k8s_cluster, ns, tmp_path, synthetic_url)
    assert_restored(k8s_cluster, ns, before, [large, small])

    nodes = {t["arm"]: t["placement"]["llm"]["node"] for t in summary["trials"]}
    assert nodes == {"anywhere": large, "fast-tier": small}
    assert "affinity" not in watch.pod_spec("bench-llm", "anywhere")
    assert watch.pod_spec("bench-llm", "fast-tier")["affinity"] == {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": TIER, "operator": "In", "values": ["fast"]}]}]}}}
    resources = watch.pod_spec("bench-llm", "fast-tier")["containers"][0]["resources"]
    assert resources["requests"] == resources["limits"] == {"cpu": "2", "memory": "1Gi", "nvidia.com/gpu": "1"}


def test_high_priority_arm_preempts_filler_pods(k8s_cluster: Cluster, k8s_namespace: str, tmp_path: Path,
                                                synthetic_url: str) -> None:
    ns = k8s_namespace
    node = add_pool_node(k8s_cluster, ns, "gpu", gpus=2)
    fillers = ("filler-0", "filler-1")
    for name in fillers:
        k8s_cluster.core.create_namespaced_pod(ns, filler(name, node))
    for name in fillers:
        wait_for(lambda name=name: k8s_cluster.core.read_namespaced_pod(name, ns).status.phase == "Running",
                 f"filler {name} Running")
    arms = [{"name": "normal", "control": True}, {"name": "high", "classes": {"llm": {"priority": "high"}}}]
    write_scenario(tmp_path / "s.yaml", ns, arms, classes=CLASSES)
    before = shared_state(k8s_cluster, ns, [node])
    assert "bench-plugin-high" not in before.priority_classes

    with ObjectWatch(k8s_cluster, ns) as watch:
        summary = run(k8s_cluster, ns, tmp_path, synthetic_url, "--arm", "high", report=True)
    assert_restored(k8s_cluster, ns, before, [node])

    assert summary["trials"][0]["placement"]["llm"]["node"] == node
    assert watch.pod_spec("bench-llm", "high")["priorityClassName"] == "bench-plugin-high"
    created = watch.priority_classes["bench-plugin-high"]
    assert (created["value"], created["preemptionPolicy"]) == (1000000, "PreemptLowerPriority")
    left = {p.metadata.name for p in k8s_cluster.core.list_namespaced_pod(ns, label_selector="bench-test/filler").items}
    assert len(left) == 1, left
    [victim] = set(fillers) - left
    preempted = k8s_cluster.core.list_namespaced_event(ns, field_selector=f"involvedObject.name={victim},"
                                                                          "reason=Preempted").items
    assert preempted and all(e.message.startswith("Preempted by pod ") and e.message.endswith(f"on node {node}")
                             for e in preempted), [e.message for e in preempted]
    assert not k8s.SchedulingV1Api(k8s_cluster.api_client).list_priority_class(
        field_selector="metadata.name=bench-plugin-high").items
    # the pod timeline tells the preemption from the arm's side: its llm pod preempted the victim
    [llm] = summary["trials"][0]["pods"]
    assert llm["preempting"] == [f"preempted pod {ns}/{victim} on node {node}"], llm
    assert summary["arms"]["high"]["pods"]["preempting"] == 1
    assert f"preempted pod {ns}/{victim}" in (tmp_path / "results" / "report.md").read_text()


def test_a_foreign_priority_class_of_another_value_is_refused(k8s_cluster: Cluster, k8s_namespace: str,
                                                               tmp_path: Path, synthetic_url: str) -> None:
    ns = k8s_namespace
    add_pool_node(k8s_cluster, ns, "gpu", gpus=1)
    arms = [{"name": "normal", "control": True}, {"name": "high", "classes": {"llm": {"priority": "high"}}}]
    write_scenario(tmp_path / "s.yaml", ns, arms, classes=CLASSES)
    scheduling = k8s.SchedulingV1Api(k8s_cluster.api_client)
    scheduling.create_priority_class({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                      "metadata": {"name": "bench-plugin-high"}, "value": 5})
    try:
        done = run_locust(campaign_args(tmp_path / "s.yaml", tmp_path / "results", k8s_cluster, synthetic_url,
                                        CLASSES, "--namespace", ns), timeout=120)
        assert done.returncode == 2, done.stdout[-3000:]
        [line] = [line for line in done.stdout.splitlines() if line.startswith("bench_plugin: error:")]
        assert "arm 'high': PriorityClass bench-plugin-high exists with value 5 and preemptionPolicy " \
               "PreemptLowerPriority (not made by bench-plugin); bench-plugin needs value 1000000" in line, line
        assert scheduling.read_priority_class("bench-plugin-high").value == 5  # left alone
    finally:
        scheduling.delete_priority_class("bench-plugin-high")


def test_an_absent_namespace_is_created_and_deleted(k8s_cluster: Cluster, k8s_namespace: str, tmp_path: Path,
                                                     synthetic_url: str) -> None:
    ns, workloads = k8s_namespace, f"{k8s_namespace}-w"
    add_pool_node(k8s_cluster, ns, "gpu", gpus=1)
    write_scenario(tmp_path / "s.yaml", ns, [{"name": "normal", "control": True}], classes=CLASSES)
    try:
        summary = run(k8s_cluster, workloads, tmp_path, synthetic_url)
        assert summary["trials"][0]["placement"]["llm"]["pod"].startswith(f"{workloads}/bench-llm-")

        def deleted() -> bool:
            try:
                found = k8s_cluster.core.read_namespace(workloads)
            except k8s.ApiException as error:
                return error.status == 404
            return found.metadata.deletion_timestamp is not None  # the namespace controller finishes it
        assert wait_for(deleted, f"namespace {workloads} deleted", 30)
    finally:  # where the test failed before the campaign deleted it
        try:
            k8s_cluster.core.delete_namespace(workloads)
        except k8s.ApiException as error:
            if error.status not in (404, 409):
                raise
