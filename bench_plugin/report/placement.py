"""How a server's placement reads in the report: its node, device and slice, and its CPU cores."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from bench_plugin.scenario import class_rank


def cpus_label(where: Mapping[str, Any]) -> str | None:
    """The cores a server ran on, read back at its start, with its NUMA node (``0-3 (numa node 0, memory
    bound)``); None where the backend recorded none (the manual and kubernetes backends)."""
    cpus = where.get("cpus")
    if cpus is None:
        return None
    node = where.get("numa_node")
    if node is None:
        return str(cpus)
    memory = "memory bound" if where.get("numa_membind") else "memory not bound: no numactl"
    return f"{cpus} (numa node {node}, {memory})"


def where_label(where: Mapping[str, Any]) -> str:
    """A placement as a short label: node, device and slice where the backend says them, and pinned cores."""
    device = " / ".join(str(where[k]) for k in ("node", "device", "slice", "mig") if where.get(k)) or "unknown device"
    cpus = cpus_label(where)
    return f"{device} (cpus {cpus})" if cpus else device


def cpus_by_arm(trials: Iterable[tuple[str, Mapping[str, Mapping[str, Any]]]]) -> dict[str, dict[str, list[str]]]:
    """Arm -> class -> the distinct cores its servers ran on over the arm's trials (``(arm, placement)`` pairs)."""
    out: dict[str, dict[str, list[str]]] = {}
    for arm, placement in trials:
        for name, where in sorted(placement.items(), key=lambda item: class_rank(item[0])):
            label = cpus_label(where)
            if label is None:
                continue
            seen = out.setdefault(arm, {}).setdefault(name, [])
            if label not in seen:
                seen.append(label)
    return out


