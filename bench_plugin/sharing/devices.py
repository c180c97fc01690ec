"""The devices of this host that the local backend can place servers on.

NVIDIA GPUs are found through NVML (nvidia-ml-py, in the ``servers`` extra); without a driver or the
package the host is CPU-only, and the CPU is the one device every server shares.
"""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Device:
    """A device a server can be pinned to: ``cpu`` or ``cuda:N``."""

    name: str
    model: str
    uuid: str | None = None
    memory_mib: int | None = None

    @property
    def is_gpu(self) -> bool:
        """Whether this is an NVIDIA GPU."""
        return self.name.startswith("cuda")


def cpu_model() -> str:
    """The CPU's model name."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def gpus() -> tuple[list[Device], dict[str, Any]]:
    """The NVIDIA GPUs (empty without NVML) and driver facts."""
    try:
        import pynvml
    except ImportError:
        return [], {"nvml": "nvidia-ml-py not installed"}
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        return [], {"nvml": f"unavailable: {exc}"}
    try:
        found = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            memory = pynvml.nvmlDeviceGetMemoryInfo(handle).total // (1024 * 1024)
            found.append(Device(f"cuda:{i}", pynvml.nvmlDeviceGetName(handle), pynvml.nvmlDeviceGetUUID(handle),
                                int(memory)))
        info = {"driver": pynvml.nvmlSystemGetDriverVersion(), "cuda_driver": pynvml.nvmlSystemGetCudaDriverVersion()}
        return found, info
    finally:
        pynvml.nvmlShutdown()


def host_devices() -> tuple[list[Device], dict[str, Any]]:
    """The GPUs if there are any, else the CPU as a single device; plus facts for the conditions table."""
    found, info = gpus()
    cpu = Device("cpu", cpu_model())
    info = {**info, "cpu": cpu.model, "cpu_count": os.cpu_count()}
    return (found or [cpu]), info
