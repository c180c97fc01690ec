"""The Kubernetes preflight against a real control plane (bench_plugin.sharing.kubernetes.preflight).

Every test creates what it needs through the API (kwok GPU nodes with labels, taints and cordons,
PriorityClasses, PodDisruptionBudgets), reads it back with ``read_cluster`` and asserts the exact line
``check`` gives for one kind of conflict, or none for a consistent arm. Where the cluster can show the
same verdict (the API server refusing a Deployment, the scheduler's FailedScheduling message, the
eviction API honouring a budget, pods running), the test applies the objects and waits for it, so a
rule here is Kubernetes' own and not only a restatement of it. Cluster-scoped objects carry the test
namespace's name and are deleted after the test; nodes are removed by the k8s_namespace fixture.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from harness import ROOT
from k8s_cluster import Cluster, ClusterError, wait_for
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.rest import ApiException

from bench_plugin.sharing.base import ApplyError
from bench_plugin.sharing.kubernetes.preflight import (
    ClusterReadError,
    ClusterView,
    Conflict,
    PreflightError,
    check,
    read_cluster,
    refuse,
)

GPU, SHARED, MIG = "nvidia.com/gpu", "nvidia.com/gpu.shared", "nvidia.com/mig-1g.18gb"
POOL = "bench-test/pool"
"""A label each test puts on its own nodes and selects, so that nodes of other tests never count."""
TAINT = {"key": "dedicated", "value": "llm", "effect": "NoSchedule"}

Undo = list[Callable[[], None]]


@pytest.fixture
def undo(k8s_cluster: Cluster) -> Iterator[Undo]:
    """Deletions of cluster-scoped objects the test made, run after it (last made, first deleted)."""
    steps: Undo = []
    yield steps
    for step in reversed(steps):
        try:
            step()
        except ApiException as error:
            if error.status != 404:
                raise


def deployment(namespace: str, workload_class: str, *, resources: dict[str, Any] | None = None, replicas: int = 1,
               pool: str | None = None, probe: dict[str, Any] | str | None = "http",
               **pod_spec: Any) -> dict[str, Any]:
    """A Deployment shaped as the backend makes one (names, labels, port and probe of the shared names)."""
    labels = {"app.kubernetes.io/managed-by": "bench-plugin", "app.kubernetes.io/name": f"bench-{workload_class}",
              "bench-plugin/class": workload_class, "bench-plugin/arm": "time-slicing",
              "bench-plugin/campaign": "c1"}
    container: dict[str, Any] = {
        "name": workload_class, "image": "bench-plugin:0.1.0",
        "command": ["python", "-m", "bench_plugin.servers", workload_class, "--host", "0.0.0.0", "--port", "8000"],
        "ports": [{"name": "http", "containerPort": 8000}],
        "resources": resources if resources is not None else {"requests": {GPU: "1"}, "limits": {GPU: "1"}},
    }
    if probe == "http":
        container["readinessProbe"] = {"httpGet": {"path": "/health", "port": "http"}, "periodSeconds": 2}
    elif probe is not None:
        container["readinessProbe"] = probe
    spec: dict[str, Any] = {"containers": [container], **pod_spec}
    if pool:
        spec["nodeSelector"] = {POOL: pool, **spec.get("nodeSelector", {})}
    selector = {k: labels[k] for k in ("app.kubernetes.io/managed-by", "app.kubernetes.io/name")}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": f"bench-{workload_class}", "namespace": namespace, "labels": labels},
            "spec": {"replicas": replicas, "selector": {"matchLabels": selector},
                     "template": {"metadata": {"labels": labels}, "spec": spec}}}


def service(namespace: str, workload_class: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": f"bench-{workload_class}", "namespace": namespace,
                         "labels": {"app.kubernetes.io/managed-by": "bench-plugin"}},
            "spec": {"selector": {"app.kubernetes.io/name": f"bench-{workload_class}"},
                     "ports": [{"name": "http", "port": 8000, "targetPort": "http"}]}}


def priority_class(name: str, value: int, policy: str | None) -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
            "value": value, **({"preemptionPolicy": policy} if policy else {})}


def budget(namespace: str, name: str, match: dict[str, str], **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": namespace}, "spec": {"selector": {"matchLabels": match}, **spec}}


def apply(cluster: Cluster, *objects: dict[str, Any], dry_run: bool = False) -> str:
    """kubectl apply the objects (server-side dry run when asked); kubectl's output."""
    items = json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objects)})
    args = ["apply", "-f", "-", *(["--dry-run=server"] if dry_run else [])]
    return cluster.kubectl(*args, input=items).stdout


def create_priority_class(cluster: Cluster, undo: Undo, name: str, value: int, policy: str | None) -> None:
    scheduling = k8s.SchedulingV1Api(cluster.api_client)
    scheduling.create_priority_class(priority_class(name, value, policy))
    undo.append(lambda: scheduling.delete_priority_class(name))


def lines(conflicts: list[Conflict]) -> list[str]:
    return [c.line() for c in conflicts]


def events(cluster: Cluster, namespace: str, reason: str) -> list[str] | None:
    """The messages of the namespace's events of ``reason``; None (for wait_for) while there is none."""
    found = cluster.core.list_namespaced_event(namespace, field_selector=f"reason={reason}").items
    return [e.message for e in found] or None


def running_pods(cluster: Cluster, namespace: str, name: str) -> list[k8s.V1Pod]:
    pods = cluster.core.list_namespaced_pod(namespace, label_selector=f"app.kubernetes.io/name={name}").items
    return [p for p in pods if p.status.phase == "Running"]


# -- 1. requests vs limits --------------------------------------------------------------------------

def test_extended_resources_need_requests_equal_to_limits(k8s_cluster: Cluster, k8s_namespace: str) -> None:
    ns = k8s_namespace
    k8s_cluster.add_gpu_node(f"{ns}-a", gpus=3, labels={POOL: ns})
    unequal = deployment(ns, "llm", pool=ns, resources={"requests": {GPU: "1"}, "limits": {GPU: "2"}})
    no_limit = deployment(ns, "embedding", pool=ns, resources={"requests": {GPU: "1", "cpu": "1"}})
    cpu_over = deployment(ns, "asr", pool=ns, resources={"requests": {"cpu": "2", "memory": "1Gi", GPU: "1"},
                                                         "limits": {"cpu": "1500m", "memory": "1Gi", GPU: "1"}})

    conflicts = check([unequal, no_limit, cpu_over], read_cluster(k8s_cluster.api_client, ns))

    field = "spec.template.spec.containers[0].resources"
    assert lines(conflicts) == [
        f"Deployment {ns}/bench-llm: {field}: nvidia.com/gpu requests 1 but limits 2 "
        "(extended resources must have requests equal to limits)",
        f"Deployment {ns}/bench-embedding: {field}: nvidia.com/gpu requests 1 with no limit "
        "(extended resources must have requests equal to limits)",
        f"Deployment {ns}/bench-asr: {field}: cpu requests 2 but limits 1500m (a request may not exceed its limit)",
    ]
    # the API server refuses each of them too (after the preflight, that would be mid-apply)
    for refused, says in ((unequal, "must be equal to nvidia.com/gpu limit"),
                          (no_limit, "Limit must be set for non overcommitable resources"),
                          (cpu_over, "must be less than or equal to cpu limit")):
        with pytest.raises(ClusterError, match=says):
            apply(k8s_cluster, refused, dry_run=True)


# -- 2. placement -----------------------------------------------------------------------------------

def test_node_selector_that_matches_no_node(k8s_cluster: Cluster, k8s_namespace: str) -> None:
    ns = k8s_namespace
    k8s_cluster.add_gpu_node(f"{ns}-a", gpus=1, labels={POOL: ns})
    wrong_product = deployment(ns, "llm", pool=ns, nodeSelector={"nvidia.com/gpu.product": "NVIDIA-A100"})
    view = read_cluster(k8s_cluster.api_client, ns)

    assert lines(check([wrong_product], view)) == [
        f"Deployment {ns}/bench-llm: spec.template.spec.nodeSelector: no node of {len(view.nodes)} has the labels "
        f"{POOL}={ns}, nvidia.com/gpu.product=NVIDIA-A100"]
    assert check([deployment(ns, "llm", pool=ns, nodeSelector={"nvidia.com/gpu.product": "NVIDIA-H200"})], view) == []


def test_node_affinity_that_matches_no_node(k8s_cluster: Cluster, k8s_namespace: str) -> None:
    ns = k8s_namespace
    k8s_cluster.add_gpu_node(f"{ns}-a", gpus=4, labels={POOL: ns})
    view = read_cluster(k8s_cluster.api_client, ns)

    def affinity(*terms: list[dict[str, Any]]) -> dict[str, Any]:
        return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": POOL, "operator": "In", "values": [ns]}, *t]}
                                  for t in terms]}}}

    many_gpus = [{"key": "nvidia.com/gpu.count", "operator": "Gt", "values": ["4"]}]
    other_product = [{"key": "nvidia.com/gpu.product", "operator": "In", "values": ["NVIDIA-A100", "NVIDIA-H100"]}]
    nowhere = deployment(ns, "llm", affinity=affinity(many_gpus, other_product))

    field = "spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    assert lines(check([nowhere], view)) == [
        f"Deployment {ns}/bench-llm: {field}: no node of {len(view.nodes)} matches "
        f"nodeSelectorTerms[0] ({POOL} In ({ns}) and nvidia.com/gpu.count Gt 4) or "
        f"nodeSelectorTerms[1] ({POOL} In ({ns}) and nvidia.com/gpu.product In (NVIDIA-A100, NVIDIA-H100))"]
    # terms are ORed: one that matches is enough
    no_mig = [{"key": "nvidia.com/mig.config", "operator": "DoesNotExist"}]
    assert check([deployment(ns, "llm", affinity=affinity(many_gpus, no_mig))], view) == []
    # a nodeSelector and an affinity that each match a node, but not the same one
    k8s_cluster.add_gpu_node(f"{ns}-b", gpus=1, labels={POOL: f"{ns}-b"})
    view = read_cluster(k8s_cluster.api_client, ns)
    apart = deployment(ns, "llm", pool=f"{ns}-b", affinity=affinity([]))
    assert lines(check([apart], view)) == [
        f"Deployment {ns}/bench-llm: spec.template.spec: no node of {len(view.nodes)} has both the nodeSelector "
        f"labels {POOL}={ns}-b and node affinity nodeSelectorTerms[0] ({POOL} In ({ns}))"]


def test_every_matching_node_tainted_or_cordoned(k8s_cluster: Cluster, k8s_namespace: str) -> None:
    ns = k8s_namespace
    k8s_cluster.add_gpu_node(f"{ns}-a", gpus=1, labels={POOL: ns}, taints=[TAINT])
    k8s_cluster.add_gpu_node(f"{ns}-b", gpus=1, labels={POOL: ns})
    k8s_cluster.core.patch_node(f"{ns}-b", {"spec": {"unschedulable": True}})  # kubectl cordon
    llm = deployment(ns, "llm", pool=ns)

    conflicts = check([llm], read_cluster(k8s_cluster.api_client, ns))

    assert lines(conflicts) == [
        f"Deployment {ns}/bench-llm: spec.template.spec.tolerations: every node its placement allows has a taint "
        f"it does not tolerate: {ns}-a dedicated=llm:NoSchedule, "
        f"{ns}-b node.kubernetes.io/unschedulable:NoSchedule (cordoned)"]
    # the scheduler says the same of the real pod
    apply(k8s_cluster, llm)
    [message, *_] = wait_for(lambda: events(k8s_cluster, ns, "FailedScheduling"), "FailedScheduling of bench-llm")
    assert "had untolerated taint" in message and "were unschedulable" in message, message
    # tolerating the taint makes node a usable
    tolerant = deployment(ns, "llm", pool=ns, tolerations=[{"key": "dedicated", "operator": "Equal", "value": "llm",
                                                            "effect": "NoSchedule"}])
    assert check([tolerant], read_cluster(k8s_cluster.api_client, ns)) == []


# -- 3. priority ------------------------------------------------------------------------------------

def test_priority_class_that_exists_nowhere(k8s_cluster: Cluster, k8s_namespace: str) -> None:
    ns = k8s_namespace
    k8s_cluster.add_gpu_node(f"{ns}-a", gpus=1, labels={POOL: ns})
    high = f"{ns}-high"
    llm = deployment(ns, "llm", pool=ns, priorityClassName=high)
    view = read_cluster(k8s_cluster.api_client, ns)

    assert lines(check([llm], view)) == [
        f"Deployment {ns}/bench-llm: spec.template.spec.priorityClassName: no PriorityClass {high} in the cluster "
        "or in this arm (the pods would be refused at admission)"]
    assert check([priority_class(high, 1000000, "PreemptLowerPriority"), llm], view) == []
    # the cluster agrees: the Deployment is taken, its pods are not
    apply(k8s_cluster, llm)
    [message, *_] = wait_for(lambda: events(k8s_cluster, ns, "FailedCreate"), "FailedCreate of bench-llm's pods")
    assert f"no PriorityClass with name {high} was found" in message, message


def test_priority_class_that_differs_from_the_clusters(k8s_cluster: Cluster, k8s_namespace: str, undo: Undo) -> None:
    ns = k8s_namespace
    k8s_cluster.add_gpu_node(f"{ns}-a", gpus=1, labels={POOL: ns})
    high = f"{ns}-high"
    create_priority_class(k8s_cluster, undo, high, 1000, "Never")
    wanted = priority_class(high, 1000000, "PreemptLowerPriority")

    conflicts = check([wanted, deployment(ns, "llm", pool=ns, priorityClassName=high)],
                      read_cluster(k8s_cluster.api_client, ns))

    assert lines(conflicts) == [
        f"PriorityClass {high}: value: this arm means 1000000 but the cluster's PriorityClass of that name has 1000 "
        "(value cannot be changed: delete that PriorityClass or use another name)",
        f"PriorityClass {high}: preemptionPolicy: this arm means PreemptLowerPriority but the cluster's "
        "PriorityClass of that name has Never (preemptionPolicy cannot be changed: delete that PriorityClass or use "
        "another name)"]
    # the API server would refuse the change
    with pytest.raises(ClusterError, match="may not be changed in an update"):
        apply(k8s_cluster, wanted, dry_run=True)


def test_preemption_the_arm_does_not_mean(k8s_cluster: Cluster, k8s_namespace: str, undo: Undo) -> None:
    ns = k8s_namespace
    k8s_cluster.add_gpu_node(f"{ns}-a", gpus=2, labels={POOL: ns})
    low = f"{ns}-low"
    create_priority_class(k8s_cluster, undo, low, -1000, None)  # the API server defaults PreemptLowerPriority
    view = read_cluster(k8s_cluster.api_client, ns)
    batch = deployment(ns, "embedding", pool=ns, priorityClassName=low)
    own_priority = deployment(ns, "asr", pool=ns, priorityClassName=low, priority=5, preemptionPolicy="Never")

    assert lines(check([batch, own_priority], view, expected_preemption={low: "Never"})) == [
        f"Deployment {ns}/bench-embedding: spec.template.spec.priorityClassName: PriorityClass {low} has "
        "preemptionPolicy PreemptLowerPriority but the arm means Never",
        f"Deployment {ns}/bench-asr: spec.template.spec.priorityClassName: PriorityClass {low} has "
        "preemptionPolicy PreemptLowerPriority but the arm means Never",
        f"Deployment {ns}/bench-asr: spec.template.spec.priority: is 5 but PriorityClass {low} has value -1000 "
        "(admission refuses such pods)",
        f"Deployment {ns}/bench-asr: spec.template.spec.preemptionPolicy: is Never but PriorityClass {low} has "
        "PreemptLowerPriority (admission refuses such pods)"]
    assert check([batch], view, expected_preemption={low: "PreemptLowerPriority"}) == []


# -- 4. readiness probes ----------------------------------------------------------------------------

def test_readiness_probe_missing_or_only_tcp(k8s_cluster: Cluster, k8s_namespace: str) -> None:
    ns = k8s_namespace
    k8s_cluster.add_gpu_node(f"{ns}-a", gpus=4, labels={POOL: ns})
    view = read_cluster(k8s_cluster.api_client, ns)
    bare = deployment(ns, "llm", pool=ns, probe=None)
    tcp = deployment(ns, "embedding", pool=ns, probe={"tcpSocket": {"port": "http"}})
    root = deployment(ns, "asr", pool=ns, probe={"httpGet": {"path": "/", "port": 8000}})

    field = "spec.template.spec.containers[0].readinessProbe"
    assert lines(check([bare, tcp, root], view)) == [
        f"Deployment {ns}/bench-llm: {field}: container llm serves port 8000 but has no readinessProbe: it turns "
        "Ready before the model is loaded; use httpGet on the model's health path",
        f"Deployment {ns}/bench-embedding: {field}: a TCP check turns Ready before the model is loaded; use httpGet "
        "on the model's health path"]


# -- 5. disruption budgets --------------------------------------------------------------------------

def test_budgets_that_allow_no_eviction(k8s_cluster: Cluster, k8s_namespace: str) -> None:
    ns = k8s_namespace
    k8s_cluster.add_gpu_node(f"{ns}-a", gpus=8, labels={POOL: ns})
    llm, embedding, asr = (deployment(ns, c, pool=ns, replicas=r) for c, r in (("llm", 2), ("embedding", 1),
                                                                               ("asr", 2)))
    # one in the cluster already, two the arm would create
    apply(k8s_cluster, budget(ns, "llm-all", {"bench-plugin/class": "llm"}, minAvailable="100%"))
    new = [budget(ns, "embedding-none", {"bench-plugin/class": "embedding"}, maxUnavailable=0),
           budget(ns, "asr-three", {"bench-plugin/class": "asr"}, minAvailable=3)]

    conflicts = check([llm, embedding, asr, *new], read_cluster(k8s_cluster.api_client, ns))

    assert lines(conflicts) == [
        f"PodDisruptionBudget {ns}/llm-all: spec.minAvailable: minAvailable 100% allows no eviction of the 2 pods it "
        "selects (bench-llm: 2): a drain would hang",
        f"PodDisruptionBudget {ns}/embedding-none: spec.maxUnavailable: maxUnavailable 0 allows no eviction of the "
        "1 pod it selects (bench-embedding: 1): a drain would hang",
        f"PodDisruptionBudget {ns}/asr-three: spec.minAvailable: minAvailable 3 is more than the 2 pods it selects "
        "(bench-asr: 2): it can never be met and no pod can be evicted: a drain would hang"]
    # budgets that leave room for one eviction are fine
    roomy = [budget(ns, "llm-all", {"bench-plugin/class": "llm"}, minAvailable="50%"),
             budget(ns, "embedding-none", {"bench-plugin/class": "embedding"}, maxUnavailable="10%"),
             budget(ns, "asr-three", {"bench-plugin/class": "asr"}, minAvailable=1)]
    assert check([llm, embedding, asr, *roomy], read_cluster(k8s_cluster.api_client, ns)) == []

    # the cluster agrees: with both llm pods Ready the budget allows no disruption, and eviction is refused
    apply(k8s_cluster, llm)
    policy = k8s.PolicyV1Api(k8s_cluster.api_client)

    def counted() -> k8s.V1PodDisruptionBudgetStatus | None:
        status = policy.read_namespaced_pod_disruption_budget("llm-all", ns).status
        return status if (status.expected_pods, status.current_healthy) == (2, 2) else None

    assert wait_for(counted, "budget llm-all counting 2 healthy pods").disruptions_allowed == 0
    victim = running_pods(k8s_cluster, ns, "bench-llm")[0].metadata.name
    with pytest.raises(ApiException) as refused:
        k8s_cluster.core.create_namespaced_pod_eviction(victim, ns, k8s.V1Eviction(
            metadata=k8s.V1ObjectMeta(name=victim, namespace=ns)))
    assert refused.value.status == 429
    assert "Cannot evict pod as it would violate the pod's disruption budget." in refused.value.body


def test_pods_under_two_budgets(k8s_cluster: Cluster, k8s_namespace: str) -> None:
    ns = k8s_namespace
    k8s_cluster.add_gpu_node(f"{ns}-a", gpus=8, labels={POOL: ns})
    llm = deployment(ns, "llm", pool=ns, replicas=3)
    apply(k8s_cluster, budget(ns, "campaign", {"bench-plugin/campaign": "c1"}, maxUnavailable=1))
    new = budget(ns, "llm", {"bench-plugin/class": "llm"}, maxUnavailable=1)

    assert lines(check([llm, new], read_cluster(k8s_cluster.api_client, ns))) == [
        f"Deployment {ns}/bench-llm: spec.template.metadata.labels: its pods are selected by 2 PodDisruptionBudgets "
        "(campaign, llm); the eviction API refuses to evict such pods: a drain would hang"]


# -- 6. capacity ------------------------------------------------------------------------------------

def test_more_gpus_in_total_than_the_nodes_allocate(k8s_cluster: Cluster, k8s_namespace: str) -> None:
    ns = k8s_namespace
    for node in ("a", "b"):
        k8s_cluster.add_gpu_node(f"{ns}-{node}", gpus=1, labels={POOL: ns})
    k8s_cluster.add_gpu_node(f"{ns}-x", gpus=8, labels={POOL: f"{ns}-x"})  # another pool
    llm = deployment(ns, "llm", pool=ns, replicas=3)

    conflicts = check([llm], read_cluster(k8s_cluster.api_client, ns))

    assert lines(conflicts) == [
        f"Deployment {ns}/bench-llm: spec.template.spec.containers[0].resources: asks 3 nvidia.com/gpu in total "
        f"(3 replicas x 1); the nodes it may use allocate 2 ({ns}-a: 1, {ns}-b: 1)"]
    # the scheduler places two and leaves the third Pending for want of a GPU
    apply(k8s_cluster, llm)
    [message, *_] = wait_for(lambda: events(k8s_cluster, ns, "FailedScheduling"), "FailedScheduling of bench-llm")
    assert f"Insufficient {GPU}" in message, message
    wait_for(lambda: len(running_pods(k8s_cluster, ns, "bench-llm")) == 2, "two bench-llm pods Running")


def test_pod_larger_than_any_node_and_classes_together(k8s_cluster: Cluster, k8s_namespace: str) -> None:
    ns = k8s_namespace
    for node in ("a", "b"):
        k8s_cluster.add_gpu_node(f"{ns}-{node}", gpus=1, labels={POOL: ns})
    view = read_cluster(k8s_cluster.api_client, ns)
    two = {"requests": {GPU: "2"}, "limits": {GPU: "2"}}
    field = "spec.template.spec.containers[0].resources"

    assert lines(check([deployment(ns, "llm", pool=ns, resources=two)], view)) == [
        f"Deployment {ns}/bench-llm: {field}: one pod asks 2 nvidia.com/gpu; the most a node it may use allocates is "
        f"1 ({ns}-a: 1, {ns}-b: 1)"]
    # each class fits alone; the three together do not
    together = [deployment(ns, c, pool=ns) for c in ("llm", "embedding", "asr")]
    assert lines(check(together, view)) == [
        f"Deployment {ns}/bench-llm: {field}: asks 1 nvidia.com/gpu, 3 in total with bench-embedding (1), "
        f"bench-asr (1); the nodes they may use allocate 2 ({ns}-a: 1, {ns}-b: 1)"]


def test_shared_replicas_and_mig_profiles_count_per_resource(k8s_cluster: Cluster, k8s_namespace: str) -> None:
    ns = k8s_namespace
    k8s_cluster.add_gpu_node(f"{ns}-shared", gpus=1, resource=SHARED, amount=4, labels={POOL: ns})
    k8s_cluster.add_gpu_node(f"{ns}-mig", gpus=1, labels={POOL: ns}, extra_resources={MIG: "2"})
    view = read_cluster(k8s_cluster.api_client, ns)

    def asking(resource: str, amount: str = "1") -> dict[str, Any]:
        return {"requests": {resource: amount}, "limits": {resource: amount}}

    shared = deployment(ns, "embedding", pool=ns, replicas=4, resources=asking(SHARED))
    mig = deployment(ns, "asr", pool=ns, replicas=3, resources=asking(MIG))
    whole = deployment(ns, "llm", pool=ns, replicas=1, resources=asking(GPU))

    field = "spec.template.spec.containers[0].resources"
    # four shared replicas fit the four the shared node offers; the whole GPU fits the MIG node's nvidia.com/gpu
    assert lines(check([shared, mig, whole], view)) == [
        f"Deployment {ns}/bench-asr: {field}: asks 3 {MIG} in total (3 replicas x 1); the nodes it may use "
        f"allocate 2 ({ns}-mig: 2)"]
    mig_none = deployment(ns, "asr", pool=ns, resources=asking(MIG),
                          nodeSelector={"kubernetes.io/hostname": f"{ns}-shared"})
    assert lines(check([mig_none], view)) == [
        f"Deployment {ns}/bench-asr: {field}: one pod asks 1 {MIG}; none of the 1 nodes it may use allocates any"]


# -- a consistent arm, and what reading and judging write ---------------------------------------------

def test_consistent_arm_has_no_conflict_and_runs(k8s_cluster: Cluster, k8s_namespace: str, undo: Undo) -> None:
    ns = k8s_namespace
    k8s_cluster.add_gpu_node(f"{ns}-whole", gpus=1, labels={POOL: ns})
    k8s_cluster.add_gpu_node(f"{ns}-shared", gpus=1, resource=SHARED, amount=4, labels={POOL: ns},
                             taints=[{"key": "bench-plugin/sharing", "value": "time-slicing", "effect": "NoSchedule"}])
    high, low = f"{ns}-high", f"{ns}-low"
    shared_gpu = {"requests": {SHARED: "1"}, "limits": {SHARED: "1"}}
    tolerate = [{"key": "bench-plugin/sharing", "operator": "Exists", "effect": "NoSchedule"}]
    arm = [
        priority_class(high, 1000000, "PreemptLowerPriority"), priority_class(low, -1000, "Never"),
        deployment(ns, "llm", pool=ns, priorityClassName=high),
        deployment(ns, "embedding", pool=ns, resources=shared_gpu, tolerations=tolerate, replicas=2),
        deployment(ns, "asr", pool=ns, resources=shared_gpu, tolerations=tolerate, priorityClassName=low),
        *(service(ns, c) for c in ("llm", "embedding", "asr")),
        budget(ns, "bench", {"app.kubernetes.io/managed-by": "bench-plugin"}, maxUnavailable=1),
    ]
    means = {high: "PreemptLowerPriority", low: "Never"}

    assert check(arm, read_cluster(k8s_cluster.api_client, ns), expected_preemption=means) == []
    refuse([])  # nothing to refuse

    for name in (high, low):
        undo.append(lambda name=name: k8s.SchedulingV1Api(k8s_cluster.api_client).delete_priority_class(name))
    apply(k8s_cluster, *arm)
    for name, replicas in (("bench-llm", 1), ("bench-embedding", 2), ("bench-asr", 1)):
        wait_for(lambda name=name, replicas=replicas: len(running_pods(k8s_cluster, ns, name)) == replicas,
                 f"{replicas} {name} pod(s) Running")
    # applied again over its own objects, the arm is still consistent
    assert check(arm, read_cluster(k8s_cluster.api_client, ns), expected_preemption=means) == []


def test_reading_and_judging_write_nothing(k8s_cluster: Cluster, k8s_namespace: str, undo: Undo) -> None:
    ns = k8s_namespace
    k8s_cluster.add_gpu_node(f"{ns}-a", gpus=1, labels={POOL: ns})
    apply(k8s_cluster, budget(ns, "bench", {"app.kubernetes.io/managed-by": "bench-plugin"}, maxUnavailable=1))
    # the plugin's ServiceAccount with list rights only: any write would be refused
    reader = f"{ns}-preflight"
    rbac = k8s.RbacAuthorizationV1Api(k8s_cluster.api_client)
    k8s_cluster.core.create_namespaced_service_account(ns, {"metadata": {"name": "bench-plugin"}})
    rbac.create_cluster_role({"metadata": {"name": reader}, "rules": [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]},
        {"apiGroups": ["scheduling.k8s.io"], "resources": ["priorityclasses"], "verbs": ["list"]}]})
    undo.append(lambda: rbac.delete_cluster_role(reader))
    subject = [{"kind": "ServiceAccount", "name": "bench-plugin", "namespace": ns}]
    rbac.create_cluster_role_binding({"metadata": {"name": reader}, "subjects": subject, "roleRef": {
        "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": reader}})
    undo.append(lambda: rbac.delete_cluster_role_binding(reader))
    rbac.create_namespaced_role(ns, {"metadata": {"name": "preflight"}, "rules": [
        {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"], "verbs": ["list"]}]})
    rbac.create_namespaced_role_binding(ns, {"metadata": {"name": "preflight"}, "subjects": subject, "roleRef": {
        "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "preflight"}})
    plugin = as_user(k8s_cluster, f"system:serviceaccount:{ns}:bench-plugin")
    arm = [priority_class(f"{ns}-high", 1000000, "PreemptLowerPriority"),
           deployment(ns, "llm", pool=ns, priorityClassName=f"{ns}-high"),
           budget(ns, "new", {"bench-plugin/class": "asr"}, maxUnavailable=1)]
    before = cluster_state(k8s_cluster, ns)

    def read() -> ClusterView:
        return read_cluster(plugin, ns)

    view = wait_for(lambda: _or_none(read), "the new RBAC rules taking effect")  # the authorizer's cache
    assert {n["metadata"]["name"] for n in view.nodes} >= {f"{ns}-a"}
    assert [p["metadata"]["name"] for p in view.pod_disruption_budgets] == ["bench"]
    assert check(arm, view) == []

    assert cluster_state(k8s_cluster, ns) == before  # nothing the arm names was created or changed
    plugin.close()


def test_reading_without_rights_is_one_line(k8s_cluster: Cluster, k8s_namespace: str) -> None:
    nobody = as_user(k8s_cluster, f"system:serviceaccount:{k8s_namespace}:nobody")
    with pytest.raises(ClusterReadError) as refused:
        read_cluster(nobody, k8s_namespace)
    nobody.close()
    message = str(refused.value)
    assert message.startswith(
        f'preflight: cannot list nodes: 403 Forbidden: nodes is forbidden: User "system:serviceaccount:'
        f'{k8s_namespace}:nobody" cannot list resource "nodes" in API group "" at the cluster scope'), message
    assert "\n" not in message
    assert isinstance(refused.value, ApplyError)


def test_refusal_is_one_line_and_keeps_every_conflict() -> None:
    conflicts = [Conflict("Deployment", "bench", "bench-llm", "spec.template.spec.nodeSelector", "no node of 3 ..."),
                 Conflict("PriorityClass", "", "bench-plugin-high", "value", "this arm means ..."),
                 Conflict("PodDisruptionBudget", "bench", "bench", "spec.maxUnavailable", "maxUnavailable 0 ...")]
    with pytest.raises(PreflightError) as refused:
        refuse(conflicts)
    assert str(refused.value) == ("Deployment bench/bench-llm: spec.template.spec.nodeSelector: no node of 3 ... "
                                  "(and 2 more)")
    assert refused.value.conflicts == tuple(conflicts)
    assert conflicts[1].line() == "PriorityClass bench-plugin-high: value: this arm means ..."
    assert isinstance(refused.value, ApplyError)  # the plugin stops the run with this line
    assert str(PreflightError(conflicts[:1])) == conflicts[0].line()


def test_plain_edge_cases() -> None:
    """Without a cluster: a view is plain data, so the rules hold on hand-made dicts too."""
    gpu_node = {"metadata": {"name": "gpu-a", "labels": {}}, "status": {"allocatable": {GPU: "1"}}}
    llm = deployment("", "llm")  # no namespace: the view's
    del llm["metadata"]["namespace"]
    assert lines(check([llm], ClusterView("bench"))) == [
        "Deployment bench/bench-llm: spec.template.spec: the cluster has no nodes"]
    # no replicas means one; zero replicas ask nothing and no budget can block them
    del llm["spec"]["replicas"]
    assert lines(check([llm, budget("bench", "one", {}, minAvailable=1)], ClusterView("bench", nodes=(gpu_node,)))) == [
        "PodDisruptionBudget bench/one: spec.minAvailable: minAvailable 1 allows no eviction of the 1 pod it selects "
        "(bench-llm: 1): a drain would hang"]
    idle = deployment("bench", "llm", replicas=0, resources={"limits": {GPU: "8"}})
    blocking = budget("bench", "all", {}, maxUnavailable=0)  # an empty selector selects every pod
    assert check([idle, blocking, service("bench", "llm")], ClusterView("bench", nodes=(gpu_node,))) == []
    # a budget among the objects replaces the cluster's of that name
    theirs = budget("bench", "llm", {"bench-plugin/class": "llm"}, maxUnavailable=0)
    mine = budget("bench", "llm", {"bench-plugin/class": "llm"}, maxUnavailable="50%")
    view = ClusterView("bench", nodes=(gpu_node,), pod_disruption_budgets=(theirs,))
    assert check([deployment("bench", "llm"), mine], view) == []
    assert len(check([deployment("bench", "llm")], view)) == 1
    # a malformed quantity is one line, not a traceback
    odd = deployment("bench", "llm", resources={"requests": {GPU: "one"}, "limits": {GPU: "one"}})
    assert lines(check([odd], view))[0] == (
        "Deployment bench/bench-llm: spec.template.spec.containers[0].resources: nvidia.com/gpu: 'one' is not a "
        "quantity (a number with an optional suffix such as m, Ki, Gi, k, G)")


def test_importing_the_preflight_needs_no_kubernetes_client() -> None:
    code = ("import sys, bench_plugin.sharing.kubernetes.preflight; "
            "print('kubernetes' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert done.stdout.strip() == "False"


def as_user(cluster: Cluster, user: str) -> k8s.ApiClient:
    """A client that acts as ``user`` (the admin impersonates it, as ``kubectl --as`` does)."""
    api_client = k8s_config.new_client_from_config(config_file=str(cluster.kubeconfig))
    api_client.set_default_header("Impersonate-User", user)
    return api_client


def _or_none(read: Callable[[], ClusterView]) -> ClusterView | None:
    try:
        return read()
    except ClusterReadError:
        return None


def cluster_state(cluster: Cluster, namespace: str) -> dict[str, Any]:
    """Names and resourceVersions of the PriorityClasses, the namespace's budgets and Deployments."""
    policy, scheduling = k8s.PolicyV1Api(cluster.api_client), k8s.SchedulingV1Api(cluster.api_client)
    apps = k8s.AppsV1Api(cluster.api_client)
    return {kind: sorted((i.metadata.name, i.metadata.resource_version) for i in items) for kind, items in (
        ("priorityclasses", scheduling.list_priority_class().items),
        ("budgets", policy.list_namespaced_pod_disruption_budget(namespace).items),
        ("deployments", apps.list_namespaced_deployment(namespace).items))}
