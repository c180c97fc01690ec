"""Placement: where each class's server ran during a segment, as a backend reports it and the store keeps it.

The backends (sharing/) build it when they apply an arm; the store keeps it as JSON in ``segments.placement``
and the timeline's ``arm_applied`` entry; the summary, the report and the telemetry read it back as the same
model. One rule writes it: every field that all backends share is written (null where unknown), and a field
only one backend sets (OPTIONAL) only where it is set, so a placement of another backend reads as before.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_serializer

CAMPAIGN_ENV = "BENCH_PLUGIN_CAMPAIGN"
"""Set in the environment of every server the local backend starts to the campaign's results directory, so its
processes can be found (and told from another campaign's)."""
CLASS_ENV = "BENCH_PLUGIN_CLASS"
"""Set beside CAMPAIGN_ENV to the server's class: a GPU process whose parents lead to no known server (one
started anew mid-stage, sharing/restart.py) is still attributed to its class (telemetry/attribution.py)."""

OPTIONAL = frozenset({"cpus", "node", "numa_membind", "numa_node", "pod", "resources", "server_url"})
"""Fields only one backend sets (the kubernetes backend's node, pod and resources; the local backend's CPU
placement and front): written only where set to something (not None, {} or "")."""


class ClassPlacement(BaseModel):
    """Where one class runs during a segment."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # In the order of their names, as the store keeps them (JSON with sorted keys).
    command: list[str] | None = None
    cpus: str | None = None
    """The CPU cores the server may run on, read back from /proc/<pid>/status (local backend): the arm's
    ``cpu_affinity`` where it sets one, else what the server inherited."""
    device: str | None = None
    """The host's name for the device: ``cpu``, ``cuda:N``, or a MIG instance's UUID."""
    device_uuid: str | None = None
    """The GPU or MIG UUID the server was pinned to (its CUDA_VISIBLE_DEVICES)."""
    env: dict[str, str] = Field(default_factory=dict)
    """Every environment variable the backend set for this server (device pinning, sharing knobs)."""
    gpu: str | None = None
    """The physical GPU under the device (a MIG instance's parent), so shares of one GPU count once."""
    log: str | None = None
    mps_daemon_pid: int | None = None
    """The MPS control daemon this server was a client of (sharing ``mps``)."""
    node: str | None = None
    """The Kubernetes node the class's pod ran on (kubernetes backend)."""
    numa_membind: bool | None = None
    """With ``numa_node``: whether the server's memory is bound to it (``numactl --membind``; false: no numactl)."""
    numa_node: int | None = None
    """The NUMA node of the arm's ``cpu_affinity`` (local backend)."""
    pid: int | None = None
    pod: str | None = None
    """The class's pod, ``namespace/name`` (kubernetes backend)."""
    resources: dict[str, str] = Field(default_factory=dict)
    """The GPU resources the pod asked (requests equal limits), e.g. ``{"nvidia.com/gpu.shared": "1"}``."""
    server_url: str | None = None
    """The first server's own address where the class is reached through a front (local backend, an arm a
    disruption hits: sharing/front.py); ``url`` is then the front's, which stays through every restart."""
    url: str

    @model_serializer(mode="plain")
    def _stored_form(self) -> dict[str, Any]:
        # Plain, not wrap: the rule holds inside a timeline entry that is dumped with exclude_unset too.
        # Every value is JSON already (str, int, bool, None, list or dict of str).
        return {key: getattr(self, key) for key in type(self).model_fields
                if key not in OPTIONAL or getattr(self, key) not in (None, {}, "")}

    @property
    def charged(self) -> str | None:
        """The device this server is charged to: the GPU under a MIG instance where recorded, else its device."""
        return self.gpu or self.device


@dataclass(frozen=True)
class Placement:
    """Where every class of a segment runs."""

    classes: dict[str, ClassPlacement]

    def to_json(self) -> dict[str, dict[str, Any]]:
        """The stored form (class -> its placement's fields), for the store, the timeline and the hook."""
        return {name: where.model_dump(mode="json") for name, where in self.classes.items()}
