"""Readings: what one NVML poll of one device returned, in NVML's own units, and its conversion to rows.

Keeping the raw reading apart from the NVML calls (nvml.py) and from the exposition (exposition.py)
lets the conversion be tested on a host without a GPU, from readings recorded on one (a reading
serialises to plain JSON). A field NVML could not give (NOT_SUPPORTED on this device, or a MIG
instance that has no such counter) is None and yields no row: a missing value is never a zero.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from bench_plugin.results.telemetry_rows import TelemetryRow
from bench_plugin.telemetry import fields as F

MIB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class ProcessMemory:
    """One entry of nvmlDeviceGetComputeRunningProcesses."""

    pid: int
    used_bytes: int | None
    """None where NVML reports the value as not available (e.g. no permission to see it)."""


@dataclass(frozen=True, slots=True)
class ProcessUtilization:
    """One sample of nvmlDeviceGetProcessUtilization (NVML keeps a short buffer of these per device)."""

    pid: int
    t: float
    """When NVML took the sample: its timestamp (microseconds since the epoch) in seconds."""
    sm_util: float
    mem_util: float


@dataclass(frozen=True, slots=True)
class DeviceReading:
    """One poll of one device (a whole GPU or a MIG instance), in NVML's units."""

    device: str
    t: float
    gpu_util: float | None = None
    """nvmlDeviceGetUtilizationRates().gpu, %."""
    mem_util: float | None = None
    """nvmlDeviceGetUtilizationRates().memory, %: DCGM's MEM_COPY_UTIL."""
    fb_total_bytes: int | None = None
    fb_free_bytes: int | None = None
    fb_used_bytes: int | None = None
    fb_reserved_bytes: int | None = None
    sm_clock_mhz: float | None = None
    mem_clock_mhz: float | None = None
    power_mw: float | None = None
    energy_mj: float | None = None
    gpu_temp_c: float | None = None
    processes: tuple[ProcessMemory, ...] = ()
    process_utilization: tuple[ProcessUtilization, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """Plain data, for recording readings on a GPU host as test fixtures."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> DeviceReading:
        """The inverse of to_json."""
        data = dict(data)
        data["processes"] = tuple(ProcessMemory(**p) for p in data.get("processes", ()))
        data["process_utilization"] = tuple(ProcessUtilization(**p) for p in data.get("process_utilization", ()))
        return cls(**data)


def _mib(n_bytes: int) -> float:
    # DCGM divides by 1024*1024 in integers (DcgmCacheManager.cpp), so do we: both sources agree.
    return float(n_bytes // MIB)


def reading_rows(reading: DeviceReading) -> list[TelemetryRow]:
    """The rows of one reading: DCGM-named device series, then per-process series."""
    device_values: list[tuple[str, float | None]] = [
        (F.SM_CLOCK, reading.sm_clock_mhz),
        (F.MEM_CLOCK, reading.mem_clock_mhz),
        (F.GPU_TEMP, reading.gpu_temp_c),
        (F.POWER_USAGE, None if reading.power_mw is None else reading.power_mw / 1000.0),
        (F.TOTAL_ENERGY, reading.energy_mj),
        (F.GPU_UTIL, reading.gpu_util),
        (F.MEM_COPY_UTIL, reading.mem_util),
        (F.FB_FREE, None if reading.fb_free_bytes is None else _mib(reading.fb_free_bytes)),
        (F.FB_USED, None if reading.fb_used_bytes is None else _mib(reading.fb_used_bytes)),
        (F.FB_RESERVED, None if reading.fb_reserved_bytes is None else _mib(reading.fb_reserved_bytes)),
        (F.FB_TOTAL, None if reading.fb_total_bytes is None else _mib(reading.fb_total_bytes)),
    ]
    rows = [TelemetryRow(reading.t, reading.device, m, float(v)) for m, v in device_values if v is not None]
    rows.extend(
        TelemetryRow(reading.t, reading.device, F.PROCESS_MEMORY, _mib(p.used_bytes), str(p.pid))
        for p in reading.processes
        if p.used_bytes is not None
    )
    for s in reading.process_utilization:
        rows.append(TelemetryRow(s.t, reading.device, F.PROCESS_SM_UTIL, float(s.sm_util), str(s.pid)))
        rows.append(TelemetryRow(s.t, reading.device, F.PROCESS_MEM_UTIL, float(s.mem_util), str(s.pid)))
    return rows


def readings_rows(readings: Iterable[DeviceReading]) -> list[TelemetryRow]:
    """The rows of several readings, in order."""
    return [row for r in readings for row in reading_rows(r)]
