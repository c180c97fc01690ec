"""GPU figures of a stage: each device's utilisation and VRAM, and each class's own VRAM, from sampled telemetry.

The telemetry rows a stage's window holds (NVML on this host, or a dcgm-exporter scrape) give, per
device, the mean and peak of DCGM_FI_DEV_GPU_UTIL (%) and DCGM_FI_DEV_FB_USED (MiB); and, per class,
the mean and peak of its server processes' memory (``bench_process_gpu_memory_used_mib``, summed over
the class's processes and devices at each poll: telemetry/attribution.py) and of their SM
utilisation where the driver reports it. Memory of a process that belongs to no class is kept under
``unattributed``: another tenant on the GPU is contention too. No rows, no figures.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping

from bench_plugin.results.summary import MeanPeak, StageGpu
from bench_plugin.results.telemetry_rows import TelemetryRow
from bench_plugin.telemetry import fields as F
from bench_plugin.telemetry.attribution import class_series

DEVICE_FIGURES: dict[str, str] = {"util_pct": F.GPU_UTIL, "vram_used_mib": F.FB_USED}
CLASS_FIGURES: dict[str, str] = {"vram_mib": F.PROCESS_MEMORY, "sm_util_pct": F.PROCESS_SM_UTIL}
GPU_METRICS: tuple[str, ...] = (*DEVICE_FIGURES.values(), *CLASS_FIGURES.values())
"""Every telemetry metric the stage's GPU figures read."""


def _figures(values: list[float]) -> MeanPeak:
    return MeanPeak(mean=sum(values) / len(values), peak=max(values), points=len(values))


def stage_gpu(rows: Iterable[TelemetryRow], process_classes: Mapping[str, str]) -> StageGpu:
    """The GPU figures of one stage's telemetry ``rows``; ``process_classes`` maps a process (pid text) to its class."""
    rows = list(rows)
    out = StageGpu()
    for key, metric in DEVICE_FIGURES.items():
        per_device: dict[str, list[float]] = defaultdict(list)
        for row in rows:
            if row.metric == metric and row.process is None:
                per_device[row.device].append(row.value)
        for device, values in sorted(per_device.items()):
            out.devices.setdefault(device, {})[key] = _figures(values)
    for key, metric in CLASS_FIGURES.items():
        per_poll: dict[tuple[str, float], float] = defaultdict(float)
        for value in class_series(rows, process_classes, metric):
            per_poll[(value.workload, value.t)] += value.value  # a class on two devices holds both
        per_class: dict[str, list[float]] = defaultdict(list)
        for (workload, _), total in sorted(per_poll.items()):
            per_class[workload].append(total)
        for workload, values in per_class.items():
            out.classes.setdefault(workload, {})[key] = _figures(values)
    return out
