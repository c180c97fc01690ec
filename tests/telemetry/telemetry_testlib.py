"""Helpers of the telemetry tests: the H200 recording and a constructed MIG instance.

fixtures/h200_readings.json was written by gpu_check.py on the lent H200 (driver 580.159.04) while a
child process held ~3.4 GiB and ran matmuls. The MIG instance here is constructed, not recorded: the
lent GPU runs with MIG disabled and its MIG layout must never be changed. It holds what NVML gives on a
MIG device handle (memory and processes; no utilisation, clocks or power).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from bench_plugin.results.telemetry_rows import DeviceInfo
from bench_plugin.telemetry.readings import DeviceReading, ProcessMemory

FIXTURES = Path(__file__).parent / "fixtures"

MIG_UUID = "MIG-5f1c2a9e-7b3d-5e2a-9c41-0d8e6f3a1b27"


@dataclass(frozen=True)
class Recorded:
    """Readings recorded on a GPU host, with the device identities the exporter needs."""

    devices: list[DeviceInfo]
    driver_version: str
    readings: list[DeviceReading]
    process_classes: dict[str, str]


def load_recorded() -> Recorded:
    """The H200 recording (one whole GPU, one CUDA process attributed to 'llm')."""
    data = json.loads((FIXTURES / "h200_readings.json").read_text())
    return Recorded(
        devices=[DeviceInfo(**d) for d in data["devices"]],
        driver_version=data["driver_version"],
        readings=[DeviceReading.from_json(r) for r in data["readings"]],
        process_classes=data["process_classes"],
    )


def mig_device(parent: DeviceInfo) -> DeviceInfo:
    """A constructed MIG instance of ``parent`` (GPU instance 9, profile 1g.18gb)."""
    return DeviceInfo(
        key=MIG_UUID, index=parent.index, uuid=parent.uuid, pci_bus_id=parent.pci_bus_id, model=parent.model,
        mig_profile="1g.18gb", gpu_instance_id=9,
    )


def mig_reading(t: float) -> DeviceReading:
    """A constructed reading of the MIG instance: memory and two processes, nothing NVML refuses there."""
    return DeviceReading(
        device=MIG_UUID, t=t, fb_total_bytes=17_920 * 2**20, fb_free_bytes=15_000 * 2**20 + 12345,
        fb_used_bytes=2_900 * 2**20, fb_reserved_bytes=20 * 2**20,
        processes=(ProcessMemory(5001, 1_500 * 2**20 + 7), ProcessMemory(5002, None)),
    )
