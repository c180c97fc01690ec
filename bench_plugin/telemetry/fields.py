"""The metric catalogue: every series name the telemetry package writes, with its Prometheus type and HELP.

Device-wide series carry DCGM field names, with the type and HELP text that NVIDIA's dcgm-exporter
gives them in etc/default-counters.csv (release 4.5.3-4.8.2), so PromQL and dashboards written for a
DCGM host read ours unchanged. The values follow DCGM's own conversions from NVML
(dcgmlib/src/DcgmCacheManager.cpp in NVIDIA/DCGM): framebuffer sizes from nvmlDeviceGetMemoryInfo_v2
in whole MiB (integer division), power in W, utilisation in whole percent.

DCGM_FI_DEV_FB_TOTAL is a DCGM field (dcgmlib/dcgm_fields.h: "Total Frame Buffer of the GPU in MB")
that the default CSV does not list; its HELP follows the CSV's wording for FB_FREE and FB_USED.

Per-process series are this project's own (``bench_process_*``): dcgm-exporter has no per-pid series.
Its Kubernetes mode re-labels DCGM_FI_DEV_FB_USED and DCGM_FI_DEV_GPU_UTIL with pod labels instead
(internal/pkg/transformation/process_metrics.go), which needs a kubelet and names no pid.

DCGM's profiling fields (PROFILING_FIELDS) are only read, from a dcgm-exporter through Prometheus
(prometheus.py): they are named here so that every module spells them the same way.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Field:
    """One series: its name, Prometheus type, HELP text and unit."""

    name: str
    prom_type: str
    """``gauge`` or ``counter`` (a counter keeps its DCGM name: no ``_total`` suffix, as dcgm-exporter)."""
    help: str
    unit: str
    """What a value is in (``MiB``, ``W``, ``%``; ``ratio`` for a profiling field): the HELP text's ``(in ...)``."""


SM_CLOCK = "DCGM_FI_DEV_SM_CLOCK"
MEM_CLOCK = "DCGM_FI_DEV_MEM_CLOCK"
GPU_TEMP = "DCGM_FI_DEV_GPU_TEMP"
POWER_USAGE = "DCGM_FI_DEV_POWER_USAGE"
TOTAL_ENERGY = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"
GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"
MEM_COPY_UTIL = "DCGM_FI_DEV_MEM_COPY_UTIL"
FB_FREE = "DCGM_FI_DEV_FB_FREE"
FB_USED = "DCGM_FI_DEV_FB_USED"
FB_RESERVED = "DCGM_FI_DEV_FB_RESERVED"
FB_TOTAL = "DCGM_FI_DEV_FB_TOTAL"

PROCESS_MEMORY = "bench_process_gpu_memory_used_mib"
PROCESS_SM_UTIL = "bench_process_sm_util"
PROCESS_MEM_UTIL = "bench_process_mem_util"

DRIVER_VERSION = "DCGM_FI_DRIVER_VERSION"
"""A ``label`` counter in the default CSV: dcgm-exporter adds it as a label to every series."""

FIELDS: dict[str, Field] = {
    f.name: f
    for f in (
        Field(SM_CLOCK, "gauge", "SM clock frequency (in MHz).", "MHz"),
        Field(MEM_CLOCK, "gauge", "Memory clock frequency (in MHz).", "MHz"),
        Field(GPU_TEMP, "gauge", "GPU temperature (in C).", "C"),
        Field(POWER_USAGE, "gauge", "Power draw (in W).", "W"),
        Field(TOTAL_ENERGY, "counter", "Total energy consumption since boot (in mJ).", "mJ"),
        Field(GPU_UTIL, "gauge", "GPU utilization (in %).", "%"),
        Field(MEM_COPY_UTIL, "gauge", "Memory utilization (in %).", "%"),
        Field(FB_FREE, "gauge", "Framebuffer memory free (in MiB).", "MiB"),
        Field(FB_USED, "gauge", "Framebuffer memory used (in MiB).", "MiB"),
        Field(FB_RESERVED, "gauge", "Framebuffer memory reserved (in MiB).", "MiB"),
        Field(FB_TOTAL, "gauge", "Framebuffer memory total (in MiB).", "MiB"),
        Field(PROCESS_MEMORY, "gauge", "GPU memory used by one process (in MiB), from NVML's running processes.",
              "MiB"),
        Field(PROCESS_SM_UTIL, "gauge", "SM utilization of one process over NVML's last sample period (in %).",
              "%"),
        Field(PROCESS_MEM_UTIL, "gauge",
              "Memory utilization of one process over NVML's last sample period (in %).", "%"),
    )
}
"""Every series we write, in dcgm-exporter's CSV order, then ours."""

PROCESS_METRICS = frozenset({PROCESS_MEMORY, PROCESS_SM_UTIL, PROCESS_MEM_UTIL})

PROF_GR_ENGINE_ACTIVE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
PROF_SM_ACTIVE = "DCGM_FI_PROF_SM_ACTIVE"
PROF_DRAM_ACTIVE = "DCGM_FI_PROF_DRAM_ACTIVE"

PROFILING_FIELDS: dict[str, Field] = {
    f.name: f
    for f in (
        Field(PROF_GR_ENGINE_ACTIVE, "gauge", "Ratio of time the graphics engine is active.", "ratio"),
        Field(PROF_SM_ACTIVE, "gauge", "The ratio of cycles an SM has at least 1 warp assigned.", "ratio"),
        Field(PROF_DRAM_ACTIVE, "gauge",
              "Ratio of cycles the device memory interface is active sending or receiving data.", "ratio"),
    )
}
"""DCGM's profiling (DCP) fields that the plugin reads from a dcgm-exporter (through Prometheus) and never writes:
NVML has no such counters. Values are ratios in [0, 1], not percent. HELP texts as in dcgm-exporter's
etc/default-counters.csv (4.5.3-4.8.2), where DCGM_FI_PROF_SM_ACTIVE is commented out: a dcgm-exporter
with its default counters does not export it, and a campaign gets a note saying so instead of a series."""
