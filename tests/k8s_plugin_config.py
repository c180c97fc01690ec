"""The NVIDIA device plugin's config file format, as its own source reads it: a checker for k8s/device-plugin.

The device plugin parses a config with sigs.k8s.io/yaml into Go structs, so a misspelt or misplaced
field is silently ignored rather than refused: a sharing config could load and share nothing. This
module says what the fields are and what the plugin does with them, from NVIDIA/k8s-device-plugin
v0.20.0 (commit 1b826acc6af3079d8923bac395c3124b8861a9a6):

- api/config/v1/config.go: ``Config{version, flags, resources, sharing, imex}``; ``parseConfigFrom``
  refuses any version but ``v1`` (empty means v1). ``DisableResourceNamingInConfig`` ignores a
  non-empty ``resources`` with a warning, and in ``sharing.*.resources`` any ``rename`` other than the
  default and any ``devices`` other than ``all``.
- api/config/v1/flags.go: the JSON names of ``CommandLineFlags``, ``PluginCommandLineFlags`` and
  ``GFDCommandLineFlags``; consts.go: the values of migStrategy, deviceListStrategy, deviceIDStrategy
  and sharedDevicesAllocationPolicy (the last new in v0.20.0).
- api/config/v1/sharing.go: ``Sharing{timeSlicing, mps}``; replicas.go: ``ReplicatedResources``
  (``renameByDefault``, ``failRequestsGreaterThanOne``, ``resources``: required, not empty) and
  ``ReplicatedResource`` (``name`` and ``replicas`` required, replicas >= 2; ``devices`` defaults to
  ``all``); with renameByDefault the resource is advertised as ``<name>.shared`` (resources.go,
  ``DefaultSharedRename``; consts.go ``DefaultSharedResourceNameSuffix``).
- api/config/v1/resources.go ``NewResourceName``: ``nvidia.com/`` is prefixed when absent, at most 63
  characters, the rest a DNS subdomain.
- cmd/nvidia-device-plugin/main.go ``validateFlags``: MPS is refused with migStrategy mixed; README:
  time-slicing and MPS are mutually exclusive, MPS shares only ``nvidia.com/gpu`` (full GPUs).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

VERSION = "v1"
TOP_LEVEL = {"version", "flags", "resources", "sharing", "imex"}
FLAGS = {"migStrategy", "failOnInitError", "mpsRoot", "nvidiaDriverRoot", "nvidiaDevRoot", "gdrcopyEnabled",
         "gdsEnabled", "mofedEnabled", "useNodeFeatureAPI", "deviceDiscoveryStrategy", "plugin", "gfd"}
PLUGIN_FLAGS = {"passDeviceSpecs", "deviceListStrategy", "deviceIDStrategy", "cdiAnnotationPrefix", "nvidiaCTKPath",
                "containerDriverRoot", "sharedDevicesAllocationPolicy"}
GFD_FLAGS = {"oneshot", "noTimestamp", "sleepInterval", "outputFile", "machineTypeFile"}
CHOICES = {
    "migStrategy": {"none", "single", "mixed"},
    "deviceDiscoveryStrategy": {"auto", "nvml", "tegra"},
    "deviceIDStrategy": {"uuid", "index"},
    "sharedDevicesAllocationPolicy": {"distributed", "packed"},
    "deviceListStrategy": {"envvar", "volume-mounts", "cdi-annotations", "cdi-cri"},
}
SHARING = {"timeSlicing", "mps"}
REPLICATED = {"renameByDefault", "failRequestsGreaterThanOne", "resources"}
REPLICATED_RESOURCE = {"name", "rename", "devices", "replicas"}
PREFIX = "nvidia.com/"
SHARED_SUFFIX = ".shared"
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def resource_name(name: str) -> str:
    """The fully qualified resource name the device plugin makes of ``name`` (NewResourceName)."""
    return name if name.startswith(PREFIX) else PREFIX + name


def problems(config: Any) -> list[str]:
    """Every way ``config`` (one parsed config file) strays from the format; empty when it follows it."""
    if not isinstance(config, Mapping):
        return [f"a config is a mapping, got {type(config).__name__}"]
    found = [f"{key}: not a field of the config (fields: {', '.join(sorted(TOP_LEVEL))})"
             for key in sorted(set(config) - TOP_LEVEL)]
    if config.get("version", VERSION) != VERSION:
        found.append(f"version: must be {VERSION}, got {config['version']!r}")
    if "version" not in config:
        found.append("version: missing (the plugin assumes v1; say it)")
    if config.get("resources"):
        found.append("resources: ignored by the device plugin (DisableResourceNamingInConfig)")
    found += _flag_problems(config.get("flags") or {})
    found += _sharing_problems(config.get("sharing") or {}, config.get("flags") or {})
    return found


def _flag_problems(flags: Any) -> list[str]:
    if not isinstance(flags, Mapping):
        return ["flags: must be a mapping"]
    found = [f"flags.{key}: not a flag" for key in sorted(set(flags) - FLAGS)]
    plugin = flags.get("plugin") or {}
    found += [f"flags.plugin.{key}: not a plugin flag" for key in sorted(set(plugin) - PLUGIN_FLAGS)]
    found += [f"flags.gfd.{key}: not a gfd flag" for key in sorted(set(flags.get("gfd") or {}) - GFD_FLAGS)]
    for where, values in (("flags", flags), ("flags.plugin", plugin)):
        for key, allowed in CHOICES.items():
            if key not in values:
                continue
            given = values[key] if isinstance(values[key], list) else [values[key]]
            found += [f"{where}.{key}: {value!r} is not one of {sorted(allowed)}" for value in given
                      if value not in allowed]
    return found


def _sharing_problems(sharing: Any, flags: Mapping[str, Any]) -> list[str]:
    if not isinstance(sharing, Mapping):
        return ["sharing: must be a mapping"]
    found = [f"sharing.{key}: not a sharing strategy (strategies: timeSlicing, mps)"
             for key in sorted(set(sharing) - SHARING)]
    if sharing.get("timeSlicing") and sharing.get("mps"):
        found.append("sharing: timeSlicing and mps are mutually exclusive")
    for strategy in sorted(SHARING & set(sharing)):
        found += _replicated_problems(f"sharing.{strategy}", sharing[strategy], mps=strategy == "mps")
    if "mps" in sharing and flags.get("migStrategy") == "mixed":
        found.append("sharing.mps: the device plugin refuses MPS with migStrategy mixed")
    return found


def _replicated_problems(where: str, replicated: Any, *, mps: bool) -> list[str]:
    if not isinstance(replicated, Mapping):
        return [f"{where}: must be a mapping"]
    found = [f"{where}.{key}: not a field (fields: {', '.join(sorted(REPLICATED))})"
             for key in sorted(set(replicated) - REPLICATED)]
    for key in ("renameByDefault", "failRequestsGreaterThanOne"):
        if key in replicated and not isinstance(replicated[key], bool):
            found.append(f"{where}.{key}: must be true or false, got {replicated[key]!r}")
    resources = replicated.get("resources")
    if not isinstance(resources, list) or not resources:
        return [*found, f"{where}.resources: required, a non-empty list (the plugin says 'no resources specified')"]
    for index, resource in enumerate(resources):
        at = f"{where}.resources[{index}]"
        if not isinstance(resource, Mapping):
            found.append(f"{at}: must be a mapping")
            continue
        found += [f"{at}.{key}: not a field" for key in sorted(set(resource) - REPLICATED_RESOURCE)]
        found += _resource_problems(at, resource, mps=mps)
    return found


def _resource_problems(at: str, resource: Mapping[str, Any], *, mps: bool) -> list[str]:
    found: list[str] = []
    name = resource.get("name")
    if not isinstance(name, str):
        found.append(f"{at}.name: required, a resource name")
    else:
        full = resource_name(name)
        if len(full) > 63 or not _DNS_SUBDOMAIN.match(full.removeprefix(PREFIX)):
            found.append(f"{at}.name: {name!r} is not a valid resource name")
        if mps and full != PREFIX + "gpu":
            found.append(f"{at}.name: MPS shares only nvidia.com/gpu, got {name!r}")
    replicas = resource.get("replicas")
    if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 2:
        found.append(f"{at}.replicas: required, a whole number >= 2, got {replicas!r}")
    if "rename" in resource:
        found.append(f"{at}.rename: ignored by the device plugin (use renameByDefault)")
    if resource.get("devices", "all") != "all":
        found.append(f"{at}.devices: ignored by the device plugin (only 'all' is applied)")
    return found


def advertised(config: Mapping[str, Any]) -> dict[str, int]:
    """What one physical GPU is advertised as under ``config``: resource name -> units per GPU.

    No sharing: ``nvidia.com/gpu`` once. A replicated resource: its replicas, under ``<name>.shared``
    when renameByDefault is set.
    """
    sharing = config.get("sharing") or {}
    replicated = sharing.get("mps") or sharing.get("timeSlicing")
    if not replicated:
        return {PREFIX + "gpu": 1}
    suffix = SHARED_SUFFIX if replicated.get("renameByDefault") else ""
    return {resource_name(r["name"]) + suffix: int(r["replicas"]) for r in replicated["resources"]}
