"""A stand-in for the NVIDIA device plugin on the test cluster's fake GPU nodes.

kwok runs no kubelet and no device plugin, so nothing would ever change what a node advertises when the
Kubernetes backend switches its sharing configuration. This stand-in plays the device plugin's part
(github.com/NVIDIA/k8s-device-plugin): it polls each given node's ``nvidia.com/device-plugin.config``
label and the plugin's ConfigMap, reads the config file the label names (api/config/v1:
``sharing.timeSlicing`` or ``sharing.mps``, ``resources: [{name, replicas, rename?}]``,
``renameByDefault``), and sets the node's capacity and allocatable as the plugin's kubelet registration
would: GPUs x replicas of ``nvidia.com/gpu.shared`` (or the ``rename``) and no ``nvidia.com/gpu`` for a
shared config; ``nvidia.com/gpu`` = GPUs for a config without sharing, or without the label (the
deployment's default: no sharing here). A label naming a key the ConfigMap lacks changes nothing, as the
real plugin "skips reconfiguration". It also sets GPU feature discovery's ``nvidia.com/gpu.sharing-strategy``
and ``nvidia.com/gpu.replicas`` labels.

It is a stand-in, not the plugin: it checks the backend's side of the contract (the config it writes,
the labels, the waits), while the device plugin itself (its config parsing, the kubelet registration,
the time it takes) is only exercised on a real GPU cluster. The GPUs of a node come
come from the node's ``nvidia.com/gpu.count`` label (add_gpu_node sets it).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import yaml
from k8s_cluster import Cluster, ClusterPoller
from kubernetes import client as k8s
from kubernetes.client.rest import ApiException

CONFIG_LABEL = "nvidia.com/device-plugin.config"
STRATEGY_LABEL = "nvidia.com/gpu.sharing-strategy"
REPLICAS_LABEL = "nvidia.com/gpu.replicas"
GPU_COUNT_LABEL = "nvidia.com/gpu.count"
WHOLE = "nvidia.com/gpu"
MERGE_PATCH = "application/merge-patch+json"


GFD_LABELS = {STRATEGY_LABEL: "none", REPLICAS_LABEL: "1"}
"""The labels GPU feature discovery sets on a node served without sharing (its resourceLabeler: replicas per GPU)."""


def advertised(config_text: str | None, gpus: int) -> tuple[dict[str, int], str, int]:
    """What a node of ``gpus`` GPUs advertises under a config file (None: no sharing).

    Returns (extended resource -> amount, GFD's sharing strategy, replicas per GPU).
    """
    config = yaml.safe_load(config_text) if config_text else {}
    sharing = (config or {}).get("sharing") or {}
    for section, strategy in (("mps", "mps"), ("timeSlicing", "time-slicing")):  # the plugin prefers MPS
        replicated = sharing.get(section) or {}
        for resource in replicated.get("resources") or []:
            if resource.get("name") == WHOLE and int(resource.get("replicas", 1)) > 1:
                replicas = int(resource["replicas"])
                name = resource.get("rename") or (f"{WHOLE}.shared" if replicated.get("renameByDefault") else WHOLE)
                return {name: gpus * replicas}, strategy, replicas
    return {WHOLE: gpus}, "none", 1


class DevicePluginStandIn(ClusterPoller):
    """Polls ``nodes`` and the ConfigMap ``namespace/config_map``; updates each node as the plugin would."""

    def __init__(self, cluster: Cluster, nodes: Iterable[str], *, namespace: str,
                 config_map: str = "bench-plugin-sharing", interval_s: float = 0.1) -> None:
        super().__init__(cluster, "device-plugin-stand-in", interval_s)
        self.nodes = list(nodes)
        self.namespace = namespace
        self.config_map = config_map
        self.core = k8s.CoreV1Api(self.client)
        self.applied: dict[str, str | None] = {}
        """Node -> the config key it serves now (None: the default)."""
        self.switches: list[tuple[str, str | None]] = []
        """Every (node, key) switch made, in order."""

    def __enter__(self) -> DevicePluginStandIn:
        super().__enter__()
        return self

    def poll(self) -> None:
        self.sync()

    def sync(self) -> None:
        """One pass over the nodes."""
        try:
            data = self.core.read_namespaced_config_map(self.config_map, self.namespace).data or {}
        except ApiException as error:
            if error.status != 404:
                raise
            data = {}
        for name in self.nodes:
            node = self.core.read_node(name)
            key = (node.metadata.labels or {}).get(CONFIG_LABEL)
            if key is not None and key not in data:
                continue  # unknown config: the plugin skips reconfiguration
            if name in self.applied and self.applied[name] == key and not self._drifted(node, data.get(key or "")):
                continue
            self._serve(node, data.get(key) if key else None)
            self.applied[name] = key
            self.switches.append((name, key))

    def _drifted(self, node: Any, text: str | None) -> bool:
        """Whether ``node`` no longer advertises what ``text`` says (the ConfigMap key changed under it)."""
        gpus = int(node.metadata.labels[GPU_COUNT_LABEL])
        resources, _, _ = advertised(text or None, gpus)
        allocatable = node.status.allocatable or {}
        return any(str(amount) != allocatable.get(name) for name, amount in resources.items())

    def _serve(self, node: Any, text: str | None) -> None:
        name = node.metadata.name
        gpus = int(node.metadata.labels[GPU_COUNT_LABEL])
        resources, strategy, replicas = advertised(text, gpus)
        current = {k for k in (node.status.capacity or {}) if k.startswith(WHOLE)}
        patch: dict[str, Any] = {k: None for k in current - set(resources)}  # null removes it (merge patch)
        patch.update({k: str(v) for k, v in resources.items()})
        self.core.patch_node_status(name, {"status": {"capacity": patch, "allocatable": patch}},
                                    _content_type=MERGE_PATCH)
        self.core.patch_node(name, {"metadata": {"labels": {STRATEGY_LABEL: strategy,
                                                            REPLICAS_LABEL: str(replicas)}}},
                             _content_type=MERGE_PATCH)
