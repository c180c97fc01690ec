"""Helpers for the kubernetes backend's tests: a small scenario on a test's own GPU nodes, the campaign as a
real `locust` process, what the cluster holds, and a watch on the objects the backend makes while it runs.

Every test works in its own namespace (the k8s_namespace fixture) on nodes labelled with it
(``POOL_LABEL``), which the scenario's ``kubernetes.node_selector`` names: the session's other nodes are
never touched. The device plugin's ConfigMap lives in the test's namespace too.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import harness
import yaml
from k8s_cluster import Cluster, ClusterError, ClusterPoller, wait_for
from k8s_deviceplugin import CONFIG_LABEL, GFD_LABELS
from kubernetes import client as k8s
from kubernetes.client.rest import ApiException

from bench_plugin.results.store import open_campaign

POOL_LABEL = "bench-test/pool"
MANAGED = "app.kubernetes.io/managed-by=bench-plugin"
CONFIG_MAP = "bench-plugin-sharing"
SHIPPED_KEYS = {
    "exclusive": "version: v1\n",
    "time-slicing": "version: v1\nsharing:\n  timeSlicing:\n    renameByDefault: true\n    resources:\n"
                    "    - name: nvidia.com/gpu\n      replicas: 4\n",
}
"""Keys of the device plugin's ConfigMap before the campaign (as k8s/ ships them): the backend must leave them."""

CLASSES = {
    "llm": {"model": "bench-synthetic", "requests": {"count": 8, "input_tokens": 16, "output_tokens": 4, "seed": 1},
            "slo": {"p95_ms": 2000}},
    "embedding": {"model": "bench-synthetic", "requests": {"count": 8, "batch_size": 2, "input_tokens": 16, "seed": 2},
                  "slo": {"p95_ms": 2000}},
}


def write_scenario(path: Path, namespace: str, arms: list[dict[str, Any]], *, classes: Sequence[str] = ("llm",),
                   stage_s: float = 2.0, section: dict[str, Any] | None = None,
                   class_blocks: dict[str, dict[str, Any]] | None = None) -> Path:
    """A one-repeat kubernetes scenario on the nodes of pool ``namespace``; ``section`` adds kubernetes keys."""
    data = {
        "name": "k8s-test", "repeats": 1, "seed": 1, "readiness_timeout_s": 30, "drain_timeout_s": 10,
        "backend": "kubernetes",
        "kubernetes": {"namespace": namespace, "node_selector": {POOL_LABEL: namespace},
                       "device_plugin": {"namespace": namespace, "config_map": CONFIG_MAP, "replicas": 4},
                       "rollout_timeout_s": 30, **(section or {})},
        "warmup": {"requests": "none"},
        "classes": {name: {**CLASSES[name], **({"kubernetes": class_blocks[name]} if class_blocks and name in
                                               class_blocks else {})} for name in classes},
        "arms": arms,
        "stages": [{"duration_s": stage_s, "load": {name: 2 for name in classes}}],
    }
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def campaign_args(scenario: Path, results: Path, cluster: Cluster, url: str, classes: Sequence[str],
                  *extra: str) -> list[str]:
    """The locust arguments of a kubernetes campaign whose classes are all served at ``url``."""
    urls = [arg for name in classes for arg in ("--service-url", f"{name}={url}")]
    return ["-f", "locustfiles/mixed.py", "--scenario", str(scenario), "--results-dir", str(results),
            "--backend", "kubernetes", "--kubeconfig", str(cluster.kubeconfig), *urls, *extra]


def add_pool_node(cluster: Cluster, namespace: str, suffix: str, gpus: int, **kwargs: Any) -> str:
    """A fake GPU node of the test's pool (GPU feature discovery's labels included); its name."""
    name = f"{namespace}-{suffix}"
    labels = {POOL_LABEL: namespace, **GFD_LABELS, **kwargs.pop("labels", {})}
    cluster.add_gpu_node(name, gpus=gpus, labels=labels, **kwargs)
    return name


def create_config_map(cluster: Cluster, namespace: str, data: dict[str, str] | None = None) -> None:
    """The device plugin's ConfigMap, as deployed before any campaign."""
    cluster.core.create_namespaced_config_map(namespace, {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": CONFIG_MAP},
        "data": dict(SHIPPED_KEYS if data is None else data)})


@dataclass(frozen=True)
class SharedState:
    """What the backend may change but must put back: node labels, the ConfigMap's keys, the PriorityClasses."""

    labels: dict[str, dict[str, str]]
    config: dict[str, str] | None
    """The device plugin's ConfigMap's keys (None: there is none)."""
    priority_classes: frozenset[str]


def shared_state(cluster: Cluster, namespace: str, nodes: Sequence[str]) -> SharedState:
    """The state of what the backend may change, now."""
    scheduling = k8s.SchedulingV1Api(cluster.api_client)
    try:
        config = cluster.core.read_namespaced_config_map(CONFIG_MAP, namespace).data or {}
    except ApiException as error:
        if error.status != 404:
            raise
        config = None
    return SharedState(
        labels={n: dict(cluster.node(n)["metadata"]["labels"]) for n in nodes},
        config=None if config is None else dict(config),
        priority_classes=frozenset(pc.metadata.name for pc in scheduling.list_priority_class().items),
    )


def leftovers(cluster: Cluster, namespace: str) -> list[str]:
    """Every object labelled as the plugin's in ``namespace``, and every PriorityClass labelled so."""
    apps = k8s.AppsV1Api(cluster.api_client)
    found = [f"{kind} {obj.metadata.name}" for kind, items in (
        ("Deployment", apps.list_namespaced_deployment(namespace, label_selector=MANAGED).items),
        ("ReplicaSet", apps.list_namespaced_replica_set(namespace, label_selector=MANAGED).items),
        ("Pod", cluster.core.list_namespaced_pod(namespace, label_selector=MANAGED).items),
        ("Service", cluster.core.list_namespaced_service(namespace, label_selector=MANAGED).items),
        ("PriorityClass", k8s.SchedulingV1Api(cluster.api_client).list_priority_class(label_selector=MANAGED).items),
    ) for obj in items]
    return found


def assert_restored(cluster: Cluster, namespace: str, before: SharedState, nodes: Sequence[str]) -> None:
    """Nothing of the plugin's is left, and labels, ConfigMap keys and PriorityClasses are as before."""
    assert leftovers(cluster, namespace) == []
    after = shared_state(cluster, namespace, nodes)
    assert after.config == before.config
    assert after.priority_classes == before.priority_classes
    for node in nodes:  # the backend's own label is put back before the campaign ends
        assert after.labels[node].get(CONFIG_LABEL) == before.labels[node].get(CONFIG_LABEL), node
    # GPU feature discovery's labels follow, from the stand-in, once it has seen the label put back
    try:
        wait_for(lambda: shared_state(cluster, namespace, nodes).labels == before.labels, "node labels as before", 30)
    except ClusterError as exc:
        now = shared_state(cluster, namespace, nodes).labels
        changed = {node: {k: (before.labels[node].get(k), now[node].get(k))
                          for k in set(before.labels[node]) | set(now[node])
                          if before.labels[node].get(k) != now[node].get(k)} for node in nodes}
        raise AssertionError(f"{exc}; (before, now) of each label that differs: {changed}") from None


class ObjectWatch(ClusterPoller):
    """Polls the plugin's Deployments in a namespace and its PriorityClasses while a campaign runs.

    ``deployments`` maps (name, arm label) -> the Deployment (a dict, API keys) as first seen;
    ``priority_classes`` maps name -> the PriorityClass as first seen.
    """

    def __init__(self, cluster: Cluster, namespace: str, interval_s: float = 0.1) -> None:
        super().__init__(cluster, "object-watch", interval_s)
        self.namespace = namespace
        self.deployments: dict[tuple[str, str], dict[str, Any]] = {}
        self.priority_classes: dict[str, dict[str, Any]] = {}
        self._apps = k8s.AppsV1Api(self.client)
        self._scheduling = k8s.SchedulingV1Api(self.client)

    def __enter__(self) -> ObjectWatch:
        super().__enter__()
        return self

    def poll(self) -> None:
        for d in self._apps.list_namespaced_deployment(self.namespace, label_selector=MANAGED).items:
            key = (d.metadata.name, d.metadata.labels["bench-plugin/arm"])
            self.deployments.setdefault(key, self.client.sanitize_for_serialization(d))
        for pc in self._scheduling.list_priority_class(label_selector=MANAGED).items:
            self.priority_classes.setdefault(pc.metadata.name, self.client.sanitize_for_serialization(pc))

    def pod_spec(self, name: str, arm: str) -> dict[str, Any]:
        """The pod template spec of Deployment ``name`` of ``arm``."""
        return dict(self.deployments[(name, arm)]["spec"]["template"]["spec"])


@contextmanager
def synthetic_server(log: Path) -> Iterator[str]:
    """A synthetic server for every class on loopback (a pod's server, reached through port-forward): its URL."""
    with harness.synthetic_server(log, "--ttft-ms", "5", "--itl-ms", "1", "--latency-ms", "5") as url:
        yield url


def filler(name: str, node: str) -> dict:
    """A pod of the cluster's other work: one whole GPU, default priority (0), pinned to ``node``."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"bench-test/filler": "yes"}},
            "spec": {"nodeSelector": {"kubernetes.io/hostname": node},
                     "containers": [{"name": "main", "image": "registry.invalid/filler:0",
                                     "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}


def scenario_with(path: Path, ns: str, disruption: dict[str, Any], classes: tuple[str, ...], stage_s: float) -> Path:
    """write_scenario's exclusive-only campaign with the scenario's ``disruption:`` section. The rollout
    timeout, which also bounds the wait for a node to be Ready after a rejoin, is generous: a kwok continued
    after SIGSTOP re-lists before it reports the node again, which took over 30 s on a busy machine."""
    write_scenario(path, ns, [{"name": "exclusive", "control": True, "sharing": "exclusive"}], classes=classes,
                   stage_s=stage_s, section={"rollout_timeout_s": 120})
    data = yaml.safe_load(path.read_text())
    data["disruption"] = disruption
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def disruption_events(results: Path) -> list[dict[str, Any]]:
    """The campaign's ``disruption`` events, in time order, each with its trial."""
    with open_campaign(results / "results.sqlite") as reader:
        return [{**event.detail, "trial": event.trial} for event in reader.events("disruption")]
