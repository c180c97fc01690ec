"""The devices of this host that the local backend can place servers on.

NVIDIA GPUs, and the MIG instances that already exist on them, are found through NVML (nvidia-ml-py,
in the ``servers`` extra); without a driver or the package the host is CPU-only, and the CPU is the
one device every server shares.

A GPU whose MIG mode is enabled runs CUDA work only inside its instances, so it is listed with
``mig_enabled`` set and is never given to a server whole; each of its instances is listed as a device
of its own, named by its MIG UUID. This module only reads: it never changes MIG mode or creates
instances.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import platform
from dataclasses import dataclass
from typing import Any

from bench_plugin.results.facts import BackendFacts

MIB = 1024 * 1024


@dataclass(frozen=True)
class Device:
    """A device a server can be pinned to: ``cpu``, a whole GPU ``cuda:N``, or a MIG instance.

    A server on a GPU or a MIG instance is started with ``CUDA_VISIBLE_DEVICES=<uuid>``, so inside it
    the device is always ``cuda:0``, whatever the host's numbering.
    """

    name: str
    """``cpu``, ``cuda:N`` (NVML index N), or the MIG instance's UUID."""
    model: str
    uuid: str | None = None
    """The GPU's (``GPU-...``) or MIG instance's (``MIG-...``) UUID."""
    memory_mib: int | None = None
    parent: str | None = None
    """For a MIG instance: the GPU it lives on (``cuda:N``)."""
    mig_enabled: bool = False
    """For a GPU: MIG mode is on, so its compute is only reachable through its instances."""

    @property
    def is_gpu(self) -> bool:
        """Whether this is an NVIDIA GPU or a MIG instance of one."""
        return self.name.startswith("cuda") or self.is_mig

    @property
    def is_mig(self) -> bool:
        """Whether this is a MIG instance."""
        return self.parent is not None

    @property
    def gpu(self) -> str:
        """The physical device this runs on: the parent GPU of a MIG instance, else the device itself."""
        return self.parent or self.name


def cpu_model() -> str:
    """The CPU's model name."""
    # Not Linux (no /proc/cpuinfo): the platform module's answer below is the best there is.
    with contextlib.suppress(OSError), open("/proc/cpuinfo", encoding="utf-8") as fh:
        for line in fh:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def _text(value: str | bytes) -> str:
    # Older nvidia-ml-py releases return bytes.
    return value.decode() if isinstance(value, bytes) else value


def mig_profile(instance_name: str, memory_mib: int | None) -> str:
    """The profile part of a MIG instance's NVML name (``1g.18gb``), or its memory when the name has none."""
    _, sep, profile = instance_name.partition("MIG ")
    if sep and profile.strip():
        return profile.strip()
    return f"{round((memory_mib or 0) / 1024)}gb"


def mig_instances(nvml: Any, handle: Any, parent: Device) -> list[Device]:
    """The MIG instances that exist on the GPU ``handle`` (``parent``), in NVML's index order."""
    found = []
    for index in range(nvml.nvmlDeviceGetMaxMigDeviceCount(handle)):
        try:
            mig = nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, index)
        except nvml.NVMLError_NotFound:
            continue  # an empty slot: fewer instances exist than the GPU could hold
        memory = int(nvml.nvmlDeviceGetMemoryInfo(mig).total // MIB)
        uuid = _text(nvml.nvmlDeviceGetUUID(mig))
        profile = mig_profile(_text(nvml.nvmlDeviceGetName(mig)), memory)
        found.append(Device(uuid, f"{parent.model} MIG {profile}", uuid, memory, parent=parent.name))
    return found


def _mig_enabled(nvml: Any, handle: Any) -> bool:
    try:
        current, _pending = nvml.nvmlDeviceGetMigMode(handle)
    except nvml.NVMLError_NotSupported:
        return False  # a GPU without MIG support
    return bool(current == nvml.NVML_DEVICE_MIG_ENABLE)


def gpus() -> tuple[list[Device], BackendFacts]:
    """The NVIDIA GPUs and their MIG instances (empty without NVML), and driver facts."""
    try:
        import pynvml
    except ImportError:
        return [], BackendFacts(nvml="nvidia-ml-py not installed")
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        return [], BackendFacts(nvml=f"unavailable: {exc}")
    try:
        found: list[Device] = []
        mig_modes: dict[str, str] = {}
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            memory = pynvml.nvmlDeviceGetMemoryInfo(handle).total // MIB
            enabled = _mig_enabled(pynvml, handle)
            gpu = Device(f"cuda:{i}", _text(pynvml.nvmlDeviceGetName(handle)), _text(pynvml.nvmlDeviceGetUUID(handle)),
                         int(memory), mig_enabled=enabled)
            found.append(gpu)
            mig_modes[gpu.name] = "enabled" if enabled else "disabled"
            if enabled:
                found.extend(mig_instances(pynvml, handle, gpu))
        info = BackendFacts(driver=_text(pynvml.nvmlSystemGetDriverVersion()),
                            cuda_driver=pynvml.nvmlSystemGetCudaDriverVersion(), mig_mode=mig_modes)
        return found, info
    finally:
        pynvml.nvmlShutdown()


def host_devices() -> tuple[list[Device], BackendFacts]:
    """The GPUs (and MIG instances) if there are any, else the CPU as a single device; plus facts: the
    driver's (or why NVML could not be read), the CPU's and the devices themselves."""
    found, info = gpus()
    cpu = Device("cpu", cpu_model())
    devices = found or [cpu]
    return devices, BackendFacts.model_validate({**info.model_dump(), "cpu": cpu.model, "cpu_count": os.cpu_count(),
                                                 "devices": [dataclasses.asdict(d) for d in devices]})
