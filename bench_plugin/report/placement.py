"""How a server's placement reads in the report: its node, device and slice, and its CPU cores."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from bench_plugin.results.placement import ClassPlacement
from bench_plugin.scenario import class_rank


def cpus_label(where: ClassPlacement) -> str | None:
    """The cores a server ran on, read back at its start, with its NUMA node (``0-3 (numa node 0, memory
    bound)``); None where the backend recorded none (the manual and kubernetes backends)."""
    if where.cpus is None:
        return None
    if where.numa_node is None:
        return where.cpus
    memory = "memory bound" if where.numa_membind else "memory not bound: no numactl"
    return f"{where.cpus} (numa node {where.numa_node}, {memory})"


def where_label(where: ClassPlacement | None) -> str:
    """A placement as a short label: node and device where the backend says them, and pinned cores."""
    if where is None:
        return "unknown device"
    device = " / ".join(part for part in (where.node, where.device) if part) or "unknown device"
    cpus = cpus_label(where)
    return f"{device} (cpus {cpus})" if cpus else device


def cpus_by_arm(trials: Iterable[tuple[str, Mapping[str, ClassPlacement]]]) -> dict[str, dict[str, list[str]]]:
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


