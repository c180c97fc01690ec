"""The pod watch against a real control plane (bench_plugin.sharing.kubernetes.podwatch).

Each test creates pods directly, with the labels the backend puts on its own, on kwok GPU nodes of its
own, and lets Kubernetes do the rest: the scheduler places one and refuses one too big
(FailedScheduling), preempts a low-priority pod for a high one, the eviction API evicts, a deletion
deletes. What the watch recorded is then checked: the right kinds, at the cluster's times, in each
pod's lifecycle order, once each, and nothing of pods without the watched labels. These tests run
under gevent's monkey-patching (tests/conftest.py imports Locust), as the plugin does in Locust, so
the watch's threads are greenlets here; one test runs it in a plain process with real threads.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import gevent.monkey
import pytest
import yaml
from harness import ROOT
from k8s_cluster import Cluster, wait_for
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from bench_plugin.results.pod_events import POD_EVENT_KINDS, PodEvent
from bench_plugin.sharing.kubernetes.podevents import ONCE
from bench_plugin.sharing.kubernetes.podwatch import PodWatch, PodWatchError

GPU = "nvidia.com/gpu"
OBJECT_KINDS = ("created", "scheduled", "started", "ready", "not_ready", "evicted", "deleted")
"""What a pod's own object says (the others come from Events)."""
STOP_S = 3.0
"""stop() shuts the open watches down: it must not wait for their server timeout (60 s)."""


class Collected:
    """The record callback: keeps every PodEvent as it arrives."""

    def __init__(self) -> None:
        self.events: list[PodEvent] = []
        self._lock = threading.Lock()

    def __call__(self, event: PodEvent) -> None:
        with self._lock:
            self.events.append(event)

    def of(self, pod: str) -> list[PodEvent]:
        """The pod's events in time order (lifecycle order at equal times), as a reader sorts them."""
        return sorted((e for e in self.events if e.pod == pod), key=lambda e: (e.t, e.rank))

    def kinds(self, pod: str) -> list[str]:
        return [e.kind for e in self.of(pod)]

    def has(self, pod: str, kind: str) -> PodEvent | None:
        return next((e for e in self.events if e.pod == pod and e.kind == kind), None)


def labels(namespace: str, workload: str, arm: str = "exclusive") -> dict[str, str]:
    """The labels the backend puts on everything it creates (names.md)."""
    return {"app.kubernetes.io/managed-by": "bench-plugin", "app.kubernetes.io/name": f"bench-{workload}",
            "bench-plugin/class": workload, "bench-plugin/arm": arm, "bench-plugin/campaign": namespace}


def selector(namespace: str) -> str:
    return f"app.kubernetes.io/managed-by=bench-plugin,bench-plugin/campaign={namespace}"


def pod(name: str, gpus: int, node: str, pod_labels: dict[str, str] | None, priority_class: str | None = None,
        grace_s: int | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "server", "image": "registry.invalid/never-pulled:0",
                                            "resources": {"limits": {GPU: str(gpus)}}}],
                            "nodeSelector": {"kubernetes.io/hostname": node}}
    if priority_class:
        spec["priorityClassName"] = priority_class
    if grace_s is not None:
        spec["terminationGracePeriodSeconds"] = grace_s
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": pod_labels or {}}, "spec": spec}


def started_watch(cluster: Cluster, namespace: str, **kwargs: Any) -> tuple[PodWatch, Collected]:
    collected = Collected()
    watch = PodWatch(cluster.api_client, namespace, selector(namespace), collected, **kwargs)
    watch.start()
    return watch, collected


def stop_promptly(watch: PodWatch) -> float:
    stopping = time.monotonic()
    watch.stop()
    took = time.monotonic() - stopping
    assert not watch.running and took < STOP_S, f"stop() took {took:.2f} s"
    return took


def assert_in_lifecycle_order(collected: Collected, name: str) -> None:
    """A pod's own transitions (whole seconds, from its object) follow its lifecycle, each once-only kind once;
    what Events report (microseconds) lies between its creation and its deletion, to the second."""
    events = collected.of(name)
    own = [e for e in events if e.kind in OBJECT_KINDS]
    progress = [POD_EVENT_KINDS.index(e.kind) for e in own]
    assert progress == sorted(progress), (name, [e.kind for e in events])
    assert all(n == 1 for k, n in Counter(e.kind for e in events).items() if k in ONCE), (name, events)
    times = {e.kind: e.t for e in own}
    for e in events:
        if e.kind not in OBJECT_KINDS:
            assert times["created"] <= e.t < times.get("deleted", float("inf")) + 1, (name, e)
        if e.kind == "failed_scheduling":
            assert e.t < times.get("scheduled", float("inf")) + 1, (name, e)


def assert_no_duplicates(collected: Collected) -> None:
    keys = [(e.uid, e.kind, e.t, e.message) for e in collected.events]
    assert len(keys) == len(set(keys)), [k for k, n in Counter(keys).items() if n > 1]


def test_a_pod_that_turns_ready_one_too_big_and_a_deletion(k8s_cluster: Cluster, k8s_namespace: str) -> None:
    ns = k8s_namespace
    node = f"{ns}-gpu"
    k8s_cluster.add_gpu_node(node, gpus=1)
    assert gevent.monkey.is_module_patched("threading")  # the watch's threads are greenlets here, as in Locust
    before = time.time()
    watch, got = started_watch(k8s_cluster, ns)
    core = k8s_cluster.core
    core.create_namespaced_pod(ns, pod("bench-llm-0", 1, node, labels(ns, "llm")))
    core.create_namespaced_pod(ns, pod("bench-asr-0", 1000, node, labels(ns, "asr")))
    core.create_namespaced_pod(ns, pod("unlabelled", 0, node, None))
    core.create_namespaced_pod(ns, pod("other-campaign", 1000, node, labels("elsewhere", "llm")))

    ready = wait_for(lambda: got.has("bench-llm-0", "ready"), "bench-llm-0 ready")
    failed = wait_for(lambda: got.has("bench-asr-0", "failed_scheduling"), "bench-asr-0 FailedScheduling")
    core.delete_namespaced_pod("bench-llm-0", ns)
    deleted = wait_for(lambda: got.has("bench-llm-0", "deleted"), "bench-llm-0 deleted")
    core.delete_namespaced_pod("bench-asr-0", ns)  # never scheduled: the API server removes it at once
    gone = wait_for(lambda: got.has("bench-asr-0", "deleted"), "bench-asr-0 deleted")
    stop_promptly(watch)

    assert got.kinds("bench-llm-0") == ["created", "scheduled", "started", "ready", "deleted"]
    scheduled = got.has("bench-llm-0", "scheduled")
    assert scheduled is not None and scheduled.node == node and dict(scheduled.requests) == {GPU: "1"}
    assert {e.workload for e in got.of("bench-llm-0")} == {"llm"}
    assert before - 1 <= ready.t <= deleted.t <= time.time()  # the cluster's clock is this host's
    assert deleted.message == "grace period 30 s"
    assert f"Insufficient {GPU}" in (failed.message or "") and failed.message.startswith("0/")
    assert failed.reason == "FailedScheduling" and failed.workload == "asr" and failed.node is None
    assert set(got.kinds("bench-asr-0")) == {"created", "failed_scheduling", "deleted"}  # never scheduled
    assert gone.message == "grace period 0 s", gone
    # nothing of pods without the labels, nor of another campaign's
    assert {e.pod for e in got.events} == {"bench-llm-0", "bench-asr-0"}
    for name in ("bench-llm-0", "bench-asr-0"):
        assert_in_lifecycle_order(got, name)
    assert_no_duplicates(got)
    assert watch.errors == [] and watch.recorded == len(got.events)


def test_preemption_then_eviction_through_the_eviction_api(k8s_cluster: Cluster, k8s_namespace: str) -> None:
    ns = k8s_namespace
    node = f"{ns}-gpu"
    k8s_cluster.add_gpu_node(node, gpus=1)
    scheduling = k8s.SchedulingV1Api(k8s_cluster.api_client)
    high, low = f"{ns}-high", f"{ns}-low"  # bench-plugin-high / -low's values and policies, names of this test
    scheduling.create_priority_class({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                      "metadata": {"name": high}, "value": 1000000,
                                      "preemptionPolicy": "PreemptLowerPriority"})
    scheduling.create_priority_class({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                      "metadata": {"name": low}, "value": -1000, "preemptionPolicy": "Never"})
    try:
        watch, got = started_watch(k8s_cluster, ns)
        core = k8s_cluster.core
        core.create_namespaced_pod(ns, pod("bench-embedding-0", 1, node, labels(ns, "embedding"), low))
        wait_for(lambda: got.has("bench-embedding-0", "ready"), "the low-priority pod ready")
        urgent = core.create_namespaced_pod(ns, pod("bench-llm-0", 1, node, labels(ns, "llm"), high))
        preempted = wait_for(lambda: got.has("bench-embedding-0", "preempted"), "the victim's preempted event")
        wait_for(lambda: got.has("bench-llm-0", "ready"), "the preemptor ready")
        eviction = {"apiVersion": "policy/v1", "kind": "Eviction",
                    "metadata": {"name": "bench-llm-0", "namespace": ns}}
        core.create_namespaced_pod_eviction("bench-llm-0", ns, eviction)  # what a drain does, pod by pod
        evicted = wait_for(lambda: got.has("bench-llm-0", "evicted"), "the evicted pod's eviction")
        wait_for(lambda: got.has("bench-llm-0", "deleted"), "the evicted pod deleted")
        stop_promptly(watch)
    finally:
        for name in (high, low):
            scheduling.delete_priority_class(name)

    assert preempted.message == f"Preempted by pod {urgent.metadata.uid} on node {node}"
    assert preempted.node == node and preempted.reason == "Preempted"
    victim = got.kinds("bench-embedding-0")
    assert victim[:4] == ["created", "scheduled", "started", "ready"] and "deleted" in victim
    assert "evicted" not in victim  # its DisruptionTarget says PreemptionByScheduler: the Preempted event tells it
    # a 1.34 eviction records no Event: the API server marks the pod DisruptionTarget and deletes it
    assert evicted.reason == "EvictionByEvictionAPI"
    assert evicted.message == "EvictionByEvictionAPI: Eviction API: evicting"
    kinds = got.kinds("bench-llm-0")
    assert [k for k in kinds if k in OBJECT_KINDS] == ["created", "scheduled", "started", "ready", "evicted", "deleted"]
    assert "killing" not in kinds  # a real kubelet records Killing ("Stopping container ..."); kwok records none
    for name in ("bench-embedding-0", "bench-llm-0"):
        assert_in_lifecycle_order(got, name)
    assert_no_duplicates(got)


def test_an_expired_watch_is_listed_again_and_repeats_nothing(k8s_cluster: Cluster, k8s_namespace: str) -> None:
    ns = k8s_namespace
    node = f"{ns}-gpu"
    k8s_cluster.add_gpu_node(node, gpus=1)
    watch, got = started_watch(k8s_cluster, ns, watch_s=1)  # each watch is opened again every second
    core = k8s_cluster.core
    core.create_namespaced_pod(ns, pod("bench-asr-0", 1000, node, labels(ns, "asr")))
    wait_for(lambda: got.has("bench-asr-0", "failed_scheduling"), "bench-asr-0 FailedScheduling")
    core.create_namespaced_config_map(ns, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "later"}})

    def expired() -> bool:
        """A later write, then etcd forgets everything before it: the Events watch's version is too old now,
        unless an Event came in between (the scheduler retries bench-asr-0 when other tests' pods go): again."""
        if watch.relists:
            return True
        core.patch_namespaced_config_map("later", ns, {"data": {"at": str(time.monotonic())}})
        k8s_cluster.compact_etcd()
        return False

    wait_for(expired, "the Events watch listed again after 410 Gone", interval_s=2.5)
    recorded = len(got.events)
    core.create_namespaced_pod(ns, pod("bench-llm-0", 1, node, labels(ns, "llm")))
    wait_for(lambda: got.has("bench-llm-0", "ready"), "bench-llm-0 ready after the relist")
    core.create_namespaced_pod(ns, pod("bench-llm-1", 1000, node, labels(ns, "llm")))
    wait_for(lambda: got.has("bench-llm-1", "failed_scheduling"), "a FailedScheduling Event after the relist")
    stop_promptly(watch)

    assert_no_duplicates(got)
    assert got.kinds("bench-asr-0").count("created") == 1  # the relist did not record it again
    assert len(got.events) > recorded
    assert watch.errors == []


def test_a_watch_without_rights_refuses_to_start_in_one_line(k8s_cluster: Cluster, k8s_namespace: str) -> None:
    nobody = k8s_config.new_client_from_config(config_file=str(k8s_cluster.kubeconfig))
    nobody.set_default_header("Impersonate-User", f"system:serviceaccount:{k8s_namespace}:nobody")
    watch = PodWatch(nobody, k8s_namespace, selector(k8s_namespace), Collected())
    with pytest.raises(PodWatchError) as refused:
        watch.start()
    nobody.close()
    message = str(refused.value)
    assert message.startswith(f"pod watch: cannot list pods ({selector(k8s_namespace)}) in namespace "
                              f"{k8s_namespace}: 403 Forbidden: pods is forbidden"), message
    assert "\n" not in message and not watch.running


def test_the_plugins_role_is_enough_to_watch(k8s_cluster: Cluster, k8s_namespace: str) -> None:
    """k8s/base/rbac.yaml's Role (pods and events: get, list, watch) in this namespace, for its ServiceAccount."""
    ns = k8s_namespace
    role = next(d for d in yaml.safe_load_all((ROOT / "k8s" / "base" / "rbac.yaml").read_text())
                if d and d["kind"] == "Role")
    rbac = k8s.RbacAuthorizationV1Api(k8s_cluster.api_client)
    rbac.create_namespaced_role(ns, {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                                     "metadata": {"name": "bench-plugin"}, "rules": role["rules"]})
    rbac.create_namespaced_role_binding(ns, {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "bench-plugin"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "bench-plugin"},
        "subjects": [{"kind": "ServiceAccount", "name": "bench-plugin", "namespace": ns}]})
    plugin = k8s_config.new_client_from_config(config_file=str(k8s_cluster.kubeconfig))
    plugin.set_default_header("Impersonate-User", f"system:serviceaccount:{ns}:bench-plugin")
    node = f"{ns}-gpu"
    k8s_cluster.add_gpu_node(node, gpus=1)
    got = Collected()
    watch = wait_for(lambda: _started_or_none(PodWatch(plugin, ns, selector(ns), got)), "the role to take effect")
    k8s_cluster.core.create_namespaced_pod(ns, pod("bench-asr-0", 1000, node, labels(ns, "asr")))
    wait_for(lambda: got.has("bench-asr-0", "failed_scheduling"), "an Event seen with the plugin's rights")
    stop_promptly(watch)
    plugin.close()
    assert watch.errors == []


def _started_or_none(watch: PodWatch) -> PodWatch | None:
    try:
        watch.start()
    except PodWatchError:
        return None  # RBAC is cached by the API server for a moment
    return watch


PLAIN = """
import json, sys, time
from kubernetes import config
from bench_plugin.sharing.kubernetes.podwatch import PodWatch
client = config.new_client_from_config(config_file=sys.argv[1])
events = []
watch = PodWatch(client, sys.argv[2], sys.argv[3], events.append)
watch.start()
print("started", flush=True)
deadline = time.monotonic() + 90
while not any(e.kind == "ready" for e in events) and time.monotonic() < deadline:
    time.sleep(0.05)
stopping = time.monotonic()
watch.stop()
print(json.dumps({"kinds": [e.kind for e in events], "stop_s": time.monotonic() - stopping,
                  "running": watch.running, "gevent": "gevent" in sys.modules}))
"""


def test_the_same_watch_with_plain_threads(k8s_cluster: Cluster, k8s_namespace: str, tmp_path: Path) -> None:
    """Outside Locust (no gevent): real threads, the same behaviour."""
    ns = k8s_namespace
    node = f"{ns}-gpu"
    k8s_cluster.add_gpu_node(node, gpus=1)
    process = subprocess.Popen([sys.executable, "-c", PLAIN, str(k8s_cluster.kubeconfig), ns, selector(ns)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                               env={"PYTHONPATH": str(ROOT), "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "started"
    k8s_cluster.core.create_namespaced_pod(ns, pod("bench-llm-0", 1, node, labels(ns, "llm")))
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    done = json.loads(out)
    assert done["kinds"] == ["created", "scheduled", "started", "ready"], done
    assert not done["gevent"] and not done["running"] and done["stop_s"] < STOP_S, done


def test_importing_the_watch_needs_no_kubernetes_client() -> None:
    code = "import sys, bench_plugin.sharing.kubernetes.podwatch; print('kubernetes' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert done.stdout.strip() == "False"
