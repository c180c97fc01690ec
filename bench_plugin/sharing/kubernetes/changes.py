"""What a campaign changed on the cluster besides its own labelled workloads, with each value before it.

The backend changes three kinds of things it does not own: a node label (``nvidia.com/device-plugin.config``),
a key of the device plugin's ConfigMap, and, where they were absent, the PriorityClasses and the namespace
it creates. Each change goes through here first, which keeps the value it replaces (None: absent) the
first time that label or key is touched, so ``undo`` can put back exactly what was there, and nothing
else. ``undo`` is idempotent (what it put back is forgotten) and goes on past a failure, returning one
line per thing it could not put back.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from bench_plugin.sharing.kubernetes import api as k8s
from bench_plugin.sharing.kubernetes.api import Api, KubeError

logger = logging.getLogger(__name__)


@dataclass
class ClusterChanges:
    """The campaign's changes to shared objects, each with its value before."""

    api: Api
    node_labels: dict[str, dict[str, str | None]] = field(default_factory=dict)
    """Node -> label -> its value before the campaign (None: the node had no such label)."""
    config_keys: dict[tuple[str, str], dict[str, str | None]] = field(default_factory=dict)
    """(namespace, ConfigMap) -> key -> its value before the campaign (None: absent)."""
    priority_classes: list[str] = field(default_factory=list)
    """PriorityClasses this campaign created."""
    namespace: str | None = None
    """The namespace, when this campaign created it."""

    def set_node_label(self, node: k8s.Json, key: str, value: str) -> bool:
        """Set label ``key`` of ``node`` to ``value``; whether it changed."""
        name = node["metadata"]["name"]
        now = (node["metadata"].get("labels") or {}).get(key)
        if now == value:
            return False
        self.node_labels.setdefault(name, {}).setdefault(key, now)
        self.api.merge_patch(k8s.name_path(k8s.NODES, name), {"metadata": {"labels": {key: value}}})
        return True

    def put_back_node_labels(self) -> dict[str, dict[str, str | None]]:
        """Put every node label this campaign changed back as it was; node -> the labels changed now, as put back."""
        changed = {}
        for name in sorted(self.node_labels):
            before = self.node_labels[name]
            node = self.api.get(k8s.name_path(k8s.NODES, name))
            if node is not None:
                now = node["metadata"].get("labels") or {}
                patch = {key: value for key, value in before.items() if now.get(key) != value}
                if patch:
                    self.api.merge_patch(k8s.name_path(k8s.NODES, name), {"metadata": {"labels": patch}})
                    changed[name] = patch
            del self.node_labels[name]
        return changed

    def set_config_key(self, namespace: str, config_map: str, key: str, value: str) -> None:
        """Set ``key`` of ConfigMap ``namespace/config_map`` (which must exist) to ``value``."""
        path = k8s.name_path(k8s.config_maps(namespace), config_map)
        current = self.api.get(path)
        if current is None:
            raise KubeError(f"ConfigMap {namespace}/{config_map} not found", 404)
        now = (current.get("data") or {}).get(key)
        if now == value:
            return
        self.config_keys.setdefault((namespace, config_map), {}).setdefault(key, now)
        self.api.merge_patch(path, {"data": {key: value}})

    def put_back_config_keys(self) -> None:
        """Put every ConfigMap key this campaign set back as it was (removing the keys it added)."""
        for (namespace, config_map) in sorted(self.config_keys):
            before = self.config_keys[(namespace, config_map)]
            path = k8s.name_path(k8s.config_maps(namespace), config_map)
            if self.api.get(path) is not None:
                self.api.merge_patch(path, {"data": dict(before)})
            del self.config_keys[(namespace, config_map)]

    def undo(self) -> list[str]:
        """Put back labels, then ConfigMap keys, delete created PriorityClasses and namespace; what failed."""
        problems: list[str] = []
        steps = [("node labels", self.put_back_node_labels), ("device plugin ConfigMap keys",
                                                               self.put_back_config_keys)]
        for what, step in steps:  # labels first: a key goes only once no node points at it
            try:
                step()
            except KubeError as exc:
                problems.append(f"could not put back the {what}: {exc}")
        for name in list(self.priority_classes):
            try:
                self.api.delete(k8s.name_path(k8s.PRIORITY_CLASSES, name))
                self.priority_classes.remove(name)
            except KubeError as exc:
                problems.append(f"could not delete PriorityClass {name}: {exc}")
        if self.namespace is not None:
            try:
                self.api.delete(k8s.name_path(k8s.NAMESPACES, self.namespace))
                self.namespace = None
            except KubeError as exc:
                problems.append(f"could not delete namespace {self.namespace}: {exc}")
        for line in problems:
            logger.error("kubernetes restore: %s", line)
        return problems
