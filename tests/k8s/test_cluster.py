"""The Kubernetes test cluster itself (tests/k8s_cluster.py): a real control plane, kwok GPU nodes, no mocks.

What the Kubernetes backend's tests will rely on is held here: fake GPU nodes become Ready, the real
scheduler places a GPU pod, refuses one too large with its own FailedScheduling reason, preempts for a
higher priority, the node lifecycle controller notices a node whose kubelet (kwok) stopped, and the
whole control plane goes away on stop. Every wait polls a condition with a generous deadline.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from harness import pid_alive
from k8s_cluster import NODE_GRACE_S, Cluster, node_condition, require_binaries, required_version, wait_for
from kubernetes import client as k8s
from kubernetes.client.rest import ApiException

GPU = "nvidia.com/gpu"


def gpu_pod(name: str, gpus: int, node: str | None = None, priority_class: str | None = None) -> dict[str, Any]:
    """A pod that asks for ``gpus`` nvidia.com/gpu (extended resources: limits, which are also the requests)."""
    spec: dict[str, Any] = {
        "containers": [{"name": "main", "image": "registry.invalid/never-pulled:0",
                        "resources": {"limits": {GPU: str(gpus)}}}],
    }
    if node:
        spec["nodeSelector"] = {"kubernetes.io/hostname": node}
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def pod_or_none(cluster: Cluster, namespace: str, name: str) -> k8s.V1Pod | None:
    try:
        return cluster.core.read_namespaced_pod(name, namespace)
    except ApiException as error:
        if error.status == 404:
            return None
        raise


def running_on(cluster: Cluster, namespace: str, name: str) -> str | None:
    """The node pod ``name`` runs on, once it is Running."""
    pod = pod_or_none(cluster, namespace, name)
    if pod is None or pod.status.phase != "Running":
        return None
    return str(pod.spec.node_name)


def events(cluster: Cluster, namespace: str, name: str, reason: str) -> list[k8s.CoreV1Event] | None:
    """The events of ``reason`` about pod ``name``; None while there is none (wait_for polls on None)."""
    return list(cluster.core.list_namespaced_event(
        namespace, field_selector=f"involvedObject.name={name},reason={reason}").items) or None


def test_versions_are_the_pinned_ones(k8s_cluster: Cluster) -> None:
    version = json.loads(k8s_cluster.kubectl("version", "-o", "json").stdout)
    pinned = required_version("kubernetes", "k8s.io/kubernetes")
    assert version["serverVersion"]["gitVersion"] == pinned
    assert version["clientVersion"]["gitVersion"] == pinned


def test_fake_gpu_nodes_become_ready(k8s_cluster: Cluster, k8s_namespace: str) -> None:
    first = k8s_cluster.add_gpu_node(f"{k8s_namespace}-a", gpus=8)
    second = k8s_cluster.add_gpu_node(f"{k8s_namespace}-b", gpus=4, labels={"pool": "inference"})

    for node, gpus in ((first, "8"), (second, "4")):
        assert node_condition(node, "Ready") == "True"
        assert node["status"]["allocatable"][GPU] == gpus
        assert node["metadata"]["labels"]["nvidia.com/gpu.product"] == "NVIDIA-H200"
        assert node["metadata"]["labels"]["nvidia.com/gpu.count"] == gpus
    assert second["metadata"]["labels"]["pool"] == "inference"
    # kwok holds each node's lease, as a kubelet does
    for node in (first, second):
        lease = k8s.CoordinationV1Api(k8s_cluster.api_client).read_namespaced_lease(
            node["metadata"]["name"], "kube-node-lease")
        assert lease.spec.lease_duration_seconds == NODE_GRACE_S


def test_gpu_pod_is_scheduled_and_runs(k8s_cluster: Cluster, k8s_namespace: str) -> None:
    node = f"{k8s_namespace}-gpu"
    k8s_cluster.add_gpu_node(node, gpus=2)
    k8s_cluster.core.create_namespaced_pod(k8s_namespace, gpu_pod("one-gpu", 1, node=node))

    assert wait_for(lambda: running_on(k8s_cluster, k8s_namespace, "one-gpu"), "pod one-gpu Running") == node
    [scheduled, *_] = wait_for(lambda: events(k8s_cluster, k8s_namespace, "one-gpu", "Scheduled"),
                               "a Scheduled event for pod one-gpu")
    assert node in scheduled.message


def test_pod_larger_than_any_node_stays_pending(k8s_cluster: Cluster, k8s_namespace: str) -> None:
    k8s_cluster.add_gpu_node(f"{k8s_namespace}-gpu", gpus=8)
    k8s_cluster.core.create_namespaced_pod(k8s_namespace, gpu_pod("too-big", 1000))

    [failed, *_] = wait_for(lambda: events(k8s_cluster, k8s_namespace, "too-big", "FailedScheduling"),
                            "a FailedScheduling event for pod too-big")
    assert failed.type == "Warning"
    assert f"Insufficient {GPU}" in failed.message, failed.message
    # the scheduler records the event, then patches the pod's status
    unschedulable = wait_for(lambda: next((c for c in k8s_cluster.core.read_namespaced_pod(
        "too-big", k8s_namespace).status.conditions or [] if c.type == "PodScheduled"), None),
        "pod too-big's PodScheduled condition")
    assert (unschedulable.status, unschedulable.reason) == ("False", "Unschedulable")
    assert k8s_cluster.core.read_namespaced_pod("too-big", k8s_namespace).status.phase == "Pending"


def test_higher_priority_pod_preempts_lower_ones(k8s_cluster: Cluster, k8s_namespace: str) -> None:
    node = f"{k8s_namespace}-gpu"
    k8s_cluster.add_gpu_node(node, gpus=2)
    scheduling = k8s.SchedulingV1Api(k8s_cluster.api_client)
    low, high = f"{k8s_namespace}-low", f"{k8s_namespace}-high"
    scheduling.create_priority_class({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                      "metadata": {"name": low}, "value": 100})
    scheduling.create_priority_class({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                      "metadata": {"name": high}, "value": 100000,
                                      "preemptionPolicy": "PreemptLowerPriority"})
    try:
        victims = ("batch-0", "batch-1")
        for name in victims:
            k8s_cluster.core.create_namespaced_pod(k8s_namespace, gpu_pod(name, 1, node=node, priority_class=low))
        for name in victims:
            wait_for(lambda name=name: running_on(k8s_cluster, k8s_namespace, name), f"pod {name} Running")

        urgent_uid = k8s_cluster.core.create_namespaced_pod(
            k8s_namespace, gpu_pod("urgent", 2, node=node, priority_class=high)).metadata.uid

        assert wait_for(lambda: running_on(k8s_cluster, k8s_namespace, "urgent"), "pod urgent Running") == node
        for name in victims:
            # the scheduler binds the preemptor only once its victims are gone
            assert pod_or_none(k8s_cluster, k8s_namespace, name) is None, f"{name} survived the preemption"
            # two identical events per victim came from 1.34's scheduler here
            preempted = wait_for(lambda name=name: events(k8s_cluster, k8s_namespace, name, "Preempted"),
                                 f"a Preempted event for pod {name}")
            assert {e.message for e in preempted} == {f"Preempted by pod {urgent_uid} on node {node}"}
    finally:
        for name in (low, high):
            scheduling.delete_priority_class(name)


def test_node_goes_unknown_when_kwok_stops_and_rejoins(k8s_cluster: Cluster, k8s_namespace: str) -> None:
    node = f"{k8s_namespace}-gpu"
    k8s_cluster.add_gpu_node(node, gpus=1)

    def unreachable() -> dict[str, Any] | None:
        found = k8s_cluster.node(node)
        tainted = any(t["key"] == "node.kubernetes.io/unreachable" for t in found["spec"].get("taints") or [])
        return found if node_condition(found, "Ready") == "Unknown" and tainted else None

    stopped = time.monotonic()
    k8s_cluster.stop_kwok()
    lost = wait_for(unreachable, f"node {node} Unknown and tainted unreachable", deadline_s=NODE_GRACE_S + 90)
    # the node lifecycle controller waited out the grace period (the lease's last renewal came before stop)
    assert time.monotonic() - stopped > NODE_GRACE_S / 2
    assert "NodeStatusUnknown" in {c["reason"] for c in lost["status"]["conditions"]}

    k8s_cluster.start_kwok()
    k8s_cluster.wait_for_node_ready(node, deadline_s=NODE_GRACE_S + 90)


def test_stop_leaves_no_process(tmp_path: Path) -> None:
    require_binaries()
    cluster = Cluster(tmp_path)
    started = time.monotonic()
    with cluster:
        pids = cluster.pids()
        assert set(pids) == {"etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager", "kwok"}
        assert all(pid_alive(pid) for pid in pids.values())
        assert cluster.kubectl("get", "--raw", "/readyz").stdout.strip() == "ok"
        print(f"cluster up in {time.monotonic() - started:.1f} s")
        stopping = time.monotonic()
    print(f"cluster stopped in {time.monotonic() - stopping:.1f} s")

    assert cluster.pids() == {}
    assert [name for name, pid in pids.items() if pid_alive(pid)] == []
