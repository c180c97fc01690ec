"""Stage series: per-class GPU series of one stage's window, as a query source returns them.

A campaign asks a series source (Prometheus, through prometheus.py) for each stage's window once the
stage has ended, naming where each class runs with a ClassTarget; the answer is a StageSeries: per
class the points as the usual TelemetryRow (device, metric, value, and the pod as ``process``), plus
notes, one line each, for what could not be had (a series missing, the server unreachable). The
recorder stores both (table ``stage_series`` and ``stage_series_notes``), and the report sets the
per-stage figures (SeriesSummary: mean and peak) beside the NVML ones.

Nothing here talks to a server, so the report and the recorder use these types without the client.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from bench_plugin.results.telemetry_rows import DeviceInfo, TelemetryRow

_CUDA_DEVICE = re.compile(r"cuda:(\d+)")


@dataclass(frozen=True, slots=True)
class ClassTarget:
    """Where one workload class's GPU series are to be found: what the placement says about its device.

    Give what identifies the class's share of a GPU in dcgm-exporter's labels: the pod (Kubernetes
    mode labels a GPU's series with the pod using it), the GPU UUID (the parent's for a MIG
    instance) with the GPU instance id for MIG, or, on one host, just ``device="cuda:N"`` (the
    ``gpu`` label). All given fields must match. A class on several GPUs has one target per GPU.
    """

    workload: str
    """The class: ``llm``, ``embedding`` or ``asr``."""
    device: str | None = None
    """The plugin's name for the device (``cuda:N`` or a MIG UUID): the rows' ``device``. None names
    rows from the labels instead (``cuda:<gpu>``, or ``<UUID>/<GPU_I_ID>`` for MIG)."""
    gpu_uuid: str | None = None
    """The GPU's UUID (``GPU-...``), the PARENT GPU's for a MIG instance: dcgm-exporter's ``UUID`` label."""
    gpu_instance_id: int | None = None
    """The MIG GPU instance id (``GPU_I_ID``); None for a whole GPU."""
    pod: str | None = None
    namespace: str | None = None

    def __post_init__(self) -> None:
        if not self.workload:
            raise ValueError("a ClassTarget needs a workload class name")
        if (self.pod is None) != (self.namespace is None):
            raise ValueError(f"{self.workload}: give both pod and namespace, or neither")
        if self.gpu_instance_id is not None and self.gpu_uuid is None and self.pod is None:
            raise ValueError(f"{self.workload}: a GPU instance id needs the parent GPU's UUID (or a pod)")
        if self.pod is None and self.gpu_uuid is None and self.gpu_index is None:
            raise ValueError(f"{self.workload}: give a pod, a GPU UUID or a cuda:N device, not only {self.device!r}")

    @classmethod
    def for_device(cls, workload: str, info: DeviceInfo) -> ClassTarget:
        """The target of a class placed on a device NVML knows (NvmlSampler.devices_info() on the same host)."""
        return cls(workload, device=info.key, gpu_uuid=info.uuid, gpu_instance_id=info.gpu_instance_id)

    @property
    def gpu_index(self) -> int | None:
        """N of a ``cuda:N`` device (the ``gpu`` label), else None."""
        match = _CUDA_DEVICE.fullmatch(self.device or "")
        return int(match.group(1)) if match else None

    def describe(self) -> str:
        """What identifies the target, for a note: ``pod bench/llm-0, UUID GPU-..., GPU_I_ID 1``."""
        parts = []
        if self.pod is not None:
            parts.append(f"pod {self.namespace}/{self.pod}")
        if self.gpu_uuid is not None:
            parts.append(f"UUID {self.gpu_uuid}")
        elif self.gpu_index is not None and self.pod is None:  # with a pod, the device only names the rows
            parts.append(f"gpu {self.gpu_index}")
        if self.gpu_instance_id is not None:
            parts.append(f"GPU_I_ID {self.gpu_instance_id}")
        return ", ".join(parts)


@dataclass(frozen=True, slots=True)
class SeriesSummary:
    """One class's figures for one metric on one device over a stage: mean and peak of the points."""

    workload: str
    device: str
    metric: str
    mean: float
    peak: float
    points: int
    """How many points the figures come from (all series of the class on the device pooled)."""


def summarise(rows: Mapping[str, Iterable[TelemetryRow]]) -> list[SeriesSummary]:
    """Mean and peak per (class, device, metric) of ``class -> rows``; NaN values are left out.

    Sorted by class (as given), then device and metric, so a report lists them in a stable order.
    """
    out: list[SeriesSummary] = []
    for workload, class_rows in rows.items():
        grouped: dict[tuple[str, str], list[float]] = {}
        for row in class_rows:
            if not math.isnan(row.value):
                grouped.setdefault((row.device, row.metric), []).append(row.value)
        for (device, metric), values in sorted(grouped.items()):
            out.append(SeriesSummary(workload, device, metric, math.fsum(values) / len(values), max(values),
                                     len(values)))
    return out


@dataclass
class StageSeries:
    """What a series source returned for one stage window: per class the points as rows, and notes."""

    start_s: float
    end_s: float
    step_s: float
    """The resolution the points have (seconds between points of one series)."""
    rows: dict[str, list[TelemetryRow]] = field(default_factory=dict)
    """Class -> its points, each a TelemetryRow (``process`` is ``pod:<namespace>/<pod>`` where the
    series names a pod). Every class asked about has a key, with no rows where nothing came back."""
    notes: list[str] = field(default_factory=list)
    """One line each: what is missing and why (a series absent, a failed query, an unreachable server)."""

    def summaries(self) -> list[SeriesSummary]:
        """Mean and peak per class, device and metric over the stage (see :func:`summarise`)."""
        return summarise(self.rows)
