"""The NVIDIA device plugin's side of an arm: the sharing configuration, the node label that picks it, and
whether a node advertises what the arm needs.

The device plugin (github.com/NVIDIA/k8s-device-plugin, deployed with ``config.name=bench-plugin-sharing``)
reads one config file per key of its ConfigMap; a node serves the key named by its
``nvidia.com/device-plugin.config`` label, and without the label the deployment's default. For a
time-slicing or MPS arm the backend writes the key ``bench-plugin-<arm>`` in the plugin's own format
(api/config/v1)::

    version: v1
    sharing:
      timeSlicing:            # or mps:
        renameByDefault: true
        failRequestsGreaterThanOne: true
        resources:
        - name: nvidia.com/gpu
          replicas: 4

``renameByDefault`` makes the plugin advertise each GPU as ``replicas`` of ``nvidia.com/gpu.shared``
instead of ``nvidia.com/gpu``, so a shared replica is never mistaken for a whole GPU;
``failRequestsGreaterThanOne`` refuses a pod that asks two replicas in the hope of more compute (the
plugin's own recommendation; every class asks one). The plugin refuses fewer than 2 replicas. Once the
label points at the key, the node advertises ``nvidia.com/gpu.count`` x replicas of
``nvidia.com/gpu.shared``; where GPU feature discovery runs it also labels the node
``nvidia.com/gpu.sharing-strategy`` (``time-slicing``, ``mps`` or ``none``), which tells a switch between
two sharing modes of equal replicas apart. The switch is complete when both say so.
"""

from __future__ import annotations

from typing import Any

import yaml

Json = dict[str, Any]

CONFIG_LABEL = "nvidia.com/device-plugin.config"
"""The node label that picks the device plugin's configuration (a key of its ConfigMap)."""
STRATEGY_LABEL = "nvidia.com/gpu.sharing-strategy"
"""GPU feature discovery's label of the sharing strategy a node serves now."""
PRODUCT_LABEL = "nvidia.com/gpu.product"
COUNT_LABEL = "nvidia.com/gpu.count"
PRESENT_LABEL = "nvidia.com/gpu.present"
WHOLE_RESOURCE = "nvidia.com/gpu"
SHARED_RESOURCE = "nvidia.com/gpu.shared"
"""What renameByDefault makes of nvidia.com/gpu (the plugin's DefaultSharedRename: name + ".shared")."""

STRATEGIES = {"time-slicing": "time-slicing", "mps": "mps"}
"""Sharing mode of an arm -> GPU feature discovery's name for it."""
CONFIG_SECTIONS = {"time-slicing": "timeSlicing", "mps": "mps"}
"""Sharing mode of an arm -> its section under ``sharing`` in the device plugin's config."""


def config_key(arm_name: str) -> str:
    """The ConfigMap key (and node label value) of arm ``arm_name``'s sharing configuration."""
    return f"bench-plugin-{arm_name}"


def sharing_config(sharing: str, replicas: int) -> Json:
    """The device plugin's config (api/config/v1) that shares every GPU ``replicas`` ways by ``sharing``."""
    section = CONFIG_SECTIONS[sharing]
    return {"version": "v1", "sharing": {section: {
        "renameByDefault": True,
        "failRequestsGreaterThanOne": True,
        "resources": [{"name": WHOLE_RESOURCE, "replicas": replicas}],
    }}}


def config_text(sharing: str, replicas: int) -> str:
    """:func:`sharing_config` as the YAML file the ConfigMap key holds."""
    return yaml.safe_dump(sharing_config(sharing, replicas), sort_keys=False)


def is_gpu_node(node: Json) -> bool:
    """Whether ``node`` has NVIDIA GPUs: GPU feature discovery's labels, or a GPU resource in its capacity."""
    node_labels = node.get("metadata", {}).get("labels") or {}
    if PRODUCT_LABEL in node_labels or node_labels.get(PRESENT_LABEL) == "true":
        return True
    capacity = node.get("status", {}).get("capacity") or {}
    return any(key.startswith(("nvidia.com/gpu", "nvidia.com/mig-")) for key in capacity)


def gpu_count(node: Json) -> int | None:
    """The node's physical GPUs per its ``nvidia.com/gpu.count`` label, None when unknown."""
    value = (node.get("metadata", {}).get("labels") or {}).get(COUNT_LABEL)
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def allocatable(node: Json, resource: str) -> int:
    """How many of ``resource`` ``node`` offers (0 when none); extended resources are whole numbers."""
    value = (node.get("status", {}).get("allocatable") or {}).get(resource, "0")
    try:
        return int(str(value))
    except ValueError:
        return 0


def as_advertised(node: Json, sharing: str | None, replicas: int) -> Json:
    """``node`` as it will be once the device plugin serves ``sharing`` (None: whole GPUs): a copy whose
    allocatable has ``nvidia.com/gpu.shared`` = GPUs x ``replicas`` in place of ``nvidia.com/gpu``, or the
    whole GPUs back. A node whose GPU count is not labelled is returned as it is."""
    count = gpu_count(node)
    if count is None:
        return node
    status = dict(node.get("status") or {})
    offered = {k: v for k, v in (status.get("allocatable") or {}).items() if k not in (WHOLE_RESOURCE, SHARED_RESOURCE)}
    if sharing is None:
        offered[WHOLE_RESOURCE] = str(count)
    else:
        offered[SHARED_RESOURCE] = str(count * replicas)
    status["allocatable"] = offered
    return {**node, "status": status}


def not_yet_advertised(node: Json, sharing: str | None, replicas: int) -> str | None:
    """Why ``node`` does not yet serve ``sharing`` (None: whole GPUs), or None once it does.

    Shared: allocatable ``nvidia.com/gpu.shared`` = GPUs x ``replicas`` (any number above 0 when the GPU
    count is not labelled); whole: allocatable ``nvidia.com/gpu`` = GPUs. Where the node carries GPU
    feature discovery's strategy label, it must name the mode too.
    """
    count = gpu_count(node)
    if sharing is None:
        resource, wanted, strategy = WHOLE_RESOURCE, count, "none"
    else:
        resource, wanted, strategy = SHARED_RESOURCE, (count * replicas if count is not None else None), \
            STRATEGIES[sharing]
    has = allocatable(node, resource)
    if (wanted is None and has < 1) or (wanted is not None and has != wanted):
        expected = f"{wanted} = {count} GPUs x {replicas} replicas" if sharing and wanted is not None else \
            str(wanted) if wanted is not None else "at least 1"
        return f"allocatable {resource} is {has}, wanted {expected}"
    label = (node.get("metadata", {}).get("labels") or {}).get(STRATEGY_LABEL)
    if label is not None and label != strategy:
        return f"label {STRATEGY_LABEL} is {label!r}, wanted {strategy!r}"
    return None
