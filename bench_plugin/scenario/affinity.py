"""CPU affinity of an arm (local backend): each class's server on given CPU cores or a NUMA node.

Not Kubernetes node affinity (``classes.<class>.node_labels`` picks nodes for pods): this pins the
processes the local backend starts on this host. An arm's ``cpu_affinity`` maps a class to a
:class:`CpuPlacement`; written as a bare cpulist (``llm: "0-3"``) it means ``{cpus: "0-3"}``.

Only the syntax is checked here. Whether this host has those cores and nodes, and whether this
process may use them, is the local backend's preflight (bench_plugin/sharing/affinity.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from pydantic import Field, field_validator, model_validator

from bench_plugin.scenario.base import StrictModel

CPULIST_SYNTAX = "a Linux cpulist: cores and ranges separated by commas, e.g. '0-3,8'"
"""What a cpulist looks like, for error messages."""

_ITEM = re.compile(r"^([0-9]+)(?:-([0-9]+))?$")

MAX_CORES = 8192
"""Linux's largest configurable CPU count (NR_CPUS with MAXSMP): a core number past it is a typo."""


def parse_cpulist(text: str) -> frozenset[int]:
    """The cores of a Linux cpulist (``0-3,8``: cores 0, 1, 2, 3 and 8); ValueError naming the bad part.

    The syntax of /proc/<pid>/status ``Cpus_allowed_list`` and /sys/devices/system/node/node<N>/cpulist,
    without the kernel's stride form (``0-15:2/4``). A range runs low to high; nothing is empty.
    """
    if not text.strip():
        raise ValueError(f"an empty cpulist names no core; expected {CPULIST_SYNTAX}")
    cores: set[int] = set()
    for raw in text.split(","):
        part = raw.strip()
        within = "" if part == text.strip() else f" in cpulist {text!r}"
        match = _ITEM.match(part)
        if match is None:
            raise ValueError(f"{part!r}{within} is not a core or a range; expected {CPULIST_SYNTAX}")
        low = int(match.group(1))
        high = int(match.group(2)) if match.group(2) is not None else low
        if high < low:
            raise ValueError(f"range {part!r}{within} runs backwards; write it low-high")
        if high >= MAX_CORES:
            raise ValueError(f"core {high}{within} is past any Linux host's cores (at most {MAX_CORES})")
        cores.update(range(low, high + 1))
    return frozenset(cores)


def format_cpulist(cores: Iterable[int]) -> str:
    """``cores`` as the shortest cpulist, ranges ascending (``{0, 1, 2, 3, 8}`` is ``0-3,8``)."""
    ordered = sorted(set(cores))
    parts: list[str] = []
    start = previous = None
    for core in [*ordered, None]:
        if core is not None and previous is not None and core == previous + 1:
            previous = core
            continue
        if start is not None:
            parts.append(str(start) if start == previous else f"{start}-{previous}")
        start = previous = core
    return ",".join(parts)


class CpuPlacement(StrictModel):
    """Where one class's server may run on this host: CPU cores, a NUMA node, or cores of a NUMA node.

    ``numa_node`` alone means every core of that node this process may use; with ``cpus``, the cores
    must lie in the node. The node also binds the server's memory where numactl is installed.
    """

    cpus: str | None = None
    """A Linux cpulist (``0-3,8``), stored in its shortest form so equal sets are one value."""
    numa_node: int | None = Field(default=None, ge=0)

    @model_validator(mode="before")
    @classmethod
    def _bare_cpulist(cls, value: Any) -> Any:
        if isinstance(value, bool):
            return value  # refused below as not a mapping: True is not core 1
        if isinstance(value, str | int):
            return {"cpus": str(value)}
        return value

    @field_validator("cpus", mode="before")
    @classmethod
    def _cpulist(cls, value: Any) -> Any:
        if isinstance(value, int) and not isinstance(value, bool):
            value = str(value)
        if isinstance(value, str):
            return format_cpulist(parse_cpulist(value))
        return value

    @model_validator(mode="after")
    def _something(self) -> CpuPlacement:
        if self.cpus is None and self.numa_node is None:
            raise ValueError("give cpus (a cpulist), numa_node, or both")
        return self

    def cores(self) -> frozenset[int] | None:
        """The cores ``cpus`` names; None when only a NUMA node is given."""
        return parse_cpulist(self.cpus) if self.cpus is not None else None

    def label(self) -> str:
        """``cpus 0-3``, ``numa node 1`` or ``cpus 0-3 on numa node 0``, for messages."""
        parts = ([f"cpus {self.cpus}"] if self.cpus is not None else []) + (
            [f"numa node {self.numa_node}"] if self.numa_node is not None else [])
        return " on ".join(parts)
