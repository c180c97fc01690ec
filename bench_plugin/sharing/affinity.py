"""CPU affinity on this host: what the local backend may pin a server to, how, and what it reads back.

An arm's ``cpu_affinity`` (bench_plugin/scenario/affinity.py) gives a class's server CPU cores, a
NUMA node, or cores of a NUMA node. Before the campaign starts anything, :func:`check_affinity`
refuses what this host cannot apply: a core outside this process's allowed set
(``os.sched_getaffinity(0)``: a container's cpuset, or a ``taskset`` around the campaign), a NUMA node
that /sys/devices/system/node does not list, cores outside the node named with them.

Each local server is its own process (one per class), so every class gets its own set. The server
pins itself between fork and exec (``os.sched_setaffinity(0, cores)`` in the child), so every thread it
ever starts inherits the set; PyTorch's default thread count follows it too. A NUMA node given alone
means those of its cores this process may use. Memory is bound to the node only through ``numactl
--membind=<node>``, and only where numactl is installed; otherwise the placement says memory is not
bound (the kernel's default policy allocates on the node of the core that asks, the named node's,
but falls back to other nodes when that one is full). What the kernel applied is read back from
/proc/<pid>/status (``Cpus_allowed_list``) and recorded; a read-back that differs fails the start.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from bench_plugin.scenario import Arm, CpuPlacement, format_cpulist, parse_cpulist

NODE_ROOT = Path("/sys/devices/system/node")
"""Where Linux lists the NUMA nodes (node<N>/cpulist)."""


@dataclass(frozen=True)
class HostCpus:
    """The CPU cores this process may use, the host's NUMA nodes, and numactl where installed."""

    allowed: frozenset[int]
    numa_nodes: Mapping[int, frozenset[int]]
    """NUMA node -> its cores (empty where the kernel lists no nodes)."""
    numactl: str | None

    def describe(self) -> dict[str, object]:
        """For the conditions table: the allowed cores, each node's cores, numactl."""
        return {"cpus_allowed": format_cpulist(self.allowed),
                "numa_nodes": {str(n): format_cpulist(c) for n, c in sorted(self.numa_nodes.items())},
                "numactl": self.numactl}


def host_cpus(node_root: Path = NODE_ROOT) -> HostCpus:
    """This host's CPUs as this process sees them."""
    nodes: dict[int, frozenset[int]] = {}
    for entry in sorted(node_root.glob("node[0-9]*")):
        try:
            text = (entry / "cpulist").read_text().strip()
        except OSError:
            continue
        # a node with memory but no CPUs has an empty cpulist
        nodes[int(entry.name.removeprefix("node"))] = parse_cpulist(text) if text else frozenset()
    return HostCpus(frozenset(os.sched_getaffinity(0)), nodes, shutil.which("numactl"))


@dataclass(frozen=True)
class CpuPin:
    """How one server is pinned: its cores, its NUMA node, and whether its memory is bound there."""

    cores: frozenset[int]
    numa_node: int | None = None
    membind: str | None = None
    """The numactl binary that binds the server's memory to ``numa_node``; None: memory is not bound."""

    def note(self) -> str:
        """``cpus 0-3, numa node 0, memory bound`` (or ``not bound``), for the server's log."""
        if self.numa_node is None:
            return f"cpus {format_cpulist(self.cores)}"
        return (f"cpus {format_cpulist(self.cores)}, numa node {self.numa_node}, memory "
                + (f"bound ({self.membind} --membind={self.numa_node})" if self.membind else "not bound (no numactl)"))

    def prefix(self) -> list[str]:
        """What goes before the server's command line: ``numactl --membind=<node>`` or nothing."""
        return [self.membind, f"--membind={self.numa_node}"] if self.membind and self.numa_node is not None else []


def pin_for(placement: CpuPlacement, host: HostCpus) -> CpuPin:
    """The pin of a placement that passed :func:`check_affinity` on ``host``."""
    cores = placement.cores()
    if cores is None:
        assert placement.numa_node is not None
        cores = host.numa_nodes[placement.numa_node] & host.allowed
    membind = host.numactl if placement.numa_node is not None else None
    return CpuPin(cores, placement.numa_node, membind)


def pins(arm: Arm, class_names: list[str], host: HostCpus) -> dict[str, CpuPin]:
    """The pin of every class of ``class_names`` that the arm pins."""
    return {name: pin_for(arm.cpu_affinity[name], host)
            for name in class_names if name in arm.cpu_affinity}


def check_affinity(arm: Arm, class_names: list[str], host: HostCpus) -> None:
    """Raise ValueError, naming the class and the value, for a placement this host cannot apply."""
    for name in class_names:
        placement = arm.cpu_affinity.get(name)  # type: ignore[call-overload]
        if placement is not None:
            _check_placement(f"cpu_affinity.{name}", placement, host)


def _check_placement(key: str, placement: CpuPlacement, host: HostCpus) -> None:
    allowed = format_cpulist(host.allowed)
    cores = placement.cores()
    node = placement.numa_node
    if node is not None:
        if node not in host.numa_nodes:
            listed = ", ".join(str(n) for n in sorted(host.numa_nodes)) or f"none under {NODE_ROOT}"
            raise ValueError(f"{key}.numa_node {node}: this host has no NUMA node {node} (nodes: {listed})")
        on_node = host.numa_nodes[node]
        if cores is not None and not cores <= on_node:
            raise ValueError(f"{key}.cpus {placement.cpus}: not all on numa node {node} "
                             f"(its cores: {format_cpulist(on_node) or 'none'}; outside it: "
                             f"{format_cpulist(cores - on_node)})")
        if cores is None and not on_node & host.allowed:
            raise ValueError(f"{key}.numa_node {node}: none of its cores ({format_cpulist(on_node) or 'none'}) "
                             f"is one this process may use (allowed: {allowed})")
    if cores is not None and not cores <= host.allowed:
        raise ValueError(f"{key}.cpus {placement.cpus}: core(s) {format_cpulist(cores - host.allowed)} not in the "
                         f"cores this process may use (allowed: {allowed}, os.sched_getaffinity)")


def read_cores(pid: int) -> frozenset[int] | None:
    """The cores process ``pid`` may run on (/proc/<pid>/status Cpus_allowed_list); None if unreadable."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("Cpus_allowed_list:"):
            return parse_cpulist(line.split(":", 1)[1].strip())
    return None
