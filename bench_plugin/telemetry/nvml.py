"""NVML sampler: GPU series for the devices a trial uses, read through pynvml at a fixed rate (default 5 Hz).

Per device, each poll reads utilisation (nvmlDeviceGetUtilizationRates), framebuffer total/free/used/
reserved (nvmlDeviceGetMemoryInfo, v2 where the driver has it, as DCGM does), SM and memory clocks,
power (mW, written as W), total energy and temperature; per process, the GPU memory it holds
(nvmlDeviceGetComputeRunningProcesses) and, where NVML keeps them, its SM and memory utilisation
samples (nvmlDeviceGetProcessUtilization, asked only for samples newer than the last one seen).

A GPU in MIG mode is sampled as a whole (clocks, power, temperature, total memory) and each of its MIG
instances by MIG UUID (memory and processes; NVML refuses the rest on an instance, which is learned on
the first poll and not asked again). Processes of a MIG GPU are read per instance only, as
dcgm-exporter does (internal/pkg/nvmlprovider/provider.go), so no process is counted twice. Nothing
here changes any GPU setting: every call is a query.

Each GPU process is attributed to a workload class when first seen, from the server pids the campaign
passes (``pids``) and the process's parents (attribution.py); ``process_classes()`` returns the result.

The NVML calls only run on a GPU host. Everything they return goes through ``DeviceReading``
(readings.py), so the conversion to rows is tested anywhere from recorded readings.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from bench_plugin.results.telemetry_rows import Availability, DeviceInfo, TelemetryRow
from bench_plugin.telemetry.attribution import UNATTRIBUTED, proc_marked_class, proc_parent, resolve_class
from bench_plugin.telemetry.readings import DeviceReading, ProcessMemory, ProcessUtilization, readings_rows
from bench_plugin.telemetry.source import DEFAULT_MAX_BUFFERED, PollingSource

log = logging.getLogger(__name__)

T = TypeVar("T")

# NVML error codes (nvml.h). Asking again will not help with these: stop asking that device.
_NOT_SUPPORTED, _NO_PERMISSION, _NOT_FOUND, _FUNCTION_NOT_FOUND = 3, 4, 6, 13
_NEVER_AGAIN = {_NOT_SUPPORTED, _NO_PERMISSION, _FUNCTION_NOT_FOUND}

_MIG_PROFILE = re.compile(r"MIG (\S+)\s*$")


def load_nvml() -> Any:
    """The pynvml module (package nvidia-ml-py), imported on first use: the core install does not need it."""
    import pynvml

    return pynvml


def _unavailable(exc: BaseException) -> Availability:
    if isinstance(exc, ImportError):
        return Availability(False, "NVML unavailable: nvidia-ml-py is not installed (pip install nvidia-ml-py)")
    return Availability(False, f"NVML unavailable: {exc} (no NVIDIA driver on this host?)")


@dataclass
class _Target:
    """One device being sampled, with what the sampler learned about it."""

    info: DeviceInfo
    handle: Any
    is_mig_instance: bool = False
    mig_enabled: bool = False
    """A whole GPU in MIG mode: its processes are read on its instances."""
    last_sample_us: int = 0
    """Newest process-utilisation timestamp seen (NVML microseconds), so each sample is read once."""
    unsupported: set[str] = field(default_factory=set)


def _gpu_info(nv: Any, index: int, handle: Any) -> DeviceInfo:
    return DeviceInfo(
        key=f"cuda:{index}",
        index=index,
        uuid=nv.nvmlDeviceGetUUID(handle),
        pci_bus_id=nv.nvmlDeviceGetPciInfo(handle).busId,
        model=nv.nvmlDeviceGetName(handle),
    )


def _mig_enabled(nv: Any, handle: Any) -> bool:
    try:
        current, _pending = nv.nvmlDeviceGetMigMode(handle)
    except nv.NVMLError:  # GPUs without MIG answer NOT_SUPPORTED: whole GPU only
        return False
    return bool(current == nv.NVML_DEVICE_MIG_ENABLE)


def _mig_target(nv: Any, parent: DeviceInfo, handle: Any) -> _Target:
    match = _MIG_PROFILE.search(nv.nvmlDeviceGetName(handle))
    info = DeviceInfo(
        key=nv.nvmlDeviceGetUUID(handle),
        index=parent.index,
        uuid=parent.uuid,
        pci_bus_id=parent.pci_bus_id,
        model=parent.model,
        mig_profile=match.group(1) if match else "unknown",
        gpu_instance_id=int(nv.nvmlDeviceGetGpuInstanceId(handle)),
    )
    return _Target(info, handle, is_mig_instance=True)


def _mig_instances(nv: Any, parent: DeviceInfo, handle: Any) -> list[_Target]:
    found = []
    for i in range(nv.nvmlDeviceGetMaxMigDeviceCount(handle)):
        try:
            mig = nv.nvmlDeviceGetMigDeviceHandleByIndex(handle, i)
        except nv.NVMLError as exc:  # an empty slot is NOT_FOUND: fewer instances than the maximum
            if getattr(exc, "value", None) != _NOT_FOUND:
                raise
            continue
        found.append(_mig_target(nv, parent, mig))
    return found


def resolve_targets(nv: Any, devices: list[str] | None) -> list[_Target]:
    """The devices to sample: all GPUs (None) or those named (``cuda:N``, ``N``, ``GPU-...``, ``MIG-...``).

    A GPU in MIG mode brings its MIG instances along. Raises LookupError naming what this host has.
    """
    count = nv.nvmlDeviceGetCount()
    gpus: dict[int, _Target] = {}
    for index in range(count):
        handle = nv.nvmlDeviceGetHandleByIndex(index)
        gpus[index] = _Target(_gpu_info(nv, index, handle), handle, mig_enabled=_mig_enabled(nv, handle))
    by_uuid = {t.info.uuid: t for t in gpus.values()}
    chosen: list[_Target] = []
    for name in devices if devices is not None else [f"cuda:{i}" for i in gpus]:
        if name.startswith("MIG-"):
            try:
                mig = nv.nvmlDeviceGetHandleByUUID(name)
                parent = by_uuid[nv.nvmlDeviceGetUUID(nv.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(mig))]
            except (nv.NVMLError, KeyError) as exc:
                raise LookupError(f"no MIG device {name} on this host ({exc})") from exc
            chosen.append(_mig_target(nv, parent.info, mig))
            continue
        target = by_uuid.get(name) if name.startswith("GPU-") else None
        if target is None:
            digits = name.removeprefix("cuda:")
            target = gpus.get(int(digits)) if digits.isdigit() else None
        if target is None:
            have = ", ".join(f"{t.info.key} ({t.info.uuid})" for t in gpus.values()) or "none"
            raise LookupError(f"no GPU {name!r} on this host; it has: {have}")
        chosen.append(target)
        if target.mig_enabled:
            chosen.extend(_mig_instances(nv, target.info, target.handle))
    unique: dict[str, _Target] = {t.info.key: t for t in chosen}
    return list(unique.values())


class NvmlReader:
    """Reads devices through NVML into DeviceReadings; each query is guarded, none changes a setting."""

    def __init__(self, nv: Any, note: Callable[[str], None]) -> None:
        self._nv = nv
        self._note = note

    def _ask(self, target: _Target, query: str, call: Callable[[], T]) -> T | None:
        if query in target.unsupported:
            return None
        try:
            return call()
        except AttributeError as exc:  # an older nvidia-ml-py without this call: as good as unsupported
            target.unsupported.add(query)
            self._note(f"{target.info.key}: {query}: this nvidia-ml-py lacks it ({exc})")
            return None
        except self._nv.NVMLError as exc:
            code = getattr(exc, "value", None)
            if code in _NEVER_AGAIN:
                target.unsupported.add(query)
                log.debug("%s: %s not available: %s", target.info.key, query, exc)
            elif code != _NOT_FOUND:  # NOT_FOUND: no process samples since the last poll, which is normal
                self._note(f"{target.info.key}: {query}: {exc}")
            return None

    def read(self, target: _Target, t: float) -> DeviceReading:
        """One reading of one device, stamped ``t``."""
        nv, h = self._nv, target.handle
        util = self._ask(target, "utilization", lambda: nv.nvmlDeviceGetUtilizationRates(h))
        v2 = getattr(nv, "nvmlMemory_v2", None)
        memory = self._ask(target, "memory_v2", lambda: nv.nvmlDeviceGetMemoryInfo(h, version=v2)) if v2 else None
        if memory is None:
            memory = self._ask(target, "memory", lambda: nv.nvmlDeviceGetMemoryInfo(h))
        power = self._ask(target, "power", lambda: nv.nvmlDeviceGetPowerUsage(h))
        energy = self._ask(target, "energy", lambda: nv.nvmlDeviceGetTotalEnergyConsumption(h))
        sm_clock = self._ask(target, "sm_clock", lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM))
        mem_clock = self._ask(target, "mem_clock", lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM))
        temp = self._ask(target, "temperature", lambda: nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU))
        processes: tuple[ProcessMemory, ...] = ()
        samples: tuple[ProcessUtilization, ...] = ()
        if not target.mig_enabled:
            processes = self._processes(target)
            samples = self._process_samples(target)
        return DeviceReading(
            device=target.info.key,
            t=t,
            gpu_util=None if util is None else float(util.gpu),
            mem_util=None if util is None else float(util.memory),
            fb_total_bytes=None if memory is None else int(memory.total),
            fb_free_bytes=None if memory is None else int(memory.free),
            fb_used_bytes=None if memory is None else int(memory.used),
            fb_reserved_bytes=int(memory.reserved) if memory is not None and hasattr(memory, "reserved") else None,
            sm_clock_mhz=None if sm_clock is None else float(sm_clock),
            mem_clock_mhz=None if mem_clock is None else float(mem_clock),
            power_mw=None if power is None else float(power),
            energy_mj=None if energy is None else float(energy),
            gpu_temp_c=None if temp is None else float(temp),
            processes=processes,
            process_utilization=samples,
        )

    def _processes(self, target: _Target) -> tuple[ProcessMemory, ...]:
        procs = self._ask(target, "processes", lambda: self._nv.nvmlDeviceGetComputeRunningProcesses(target.handle))
        # usedGpuMemory is None where NVML cannot say (pynvml maps NVML_VALUE_NOT_AVAILABLE to None)
        return tuple(ProcessMemory(int(p.pid), p.usedGpuMemory) for p in procs or ())

    def _process_samples(self, target: _Target) -> tuple[ProcessUtilization, ...]:
        since = target.last_sample_us
        raw = self._ask(
            target, "process_utilization", lambda: self._nv.nvmlDeviceGetProcessUtilization(target.handle, since)
        )
        fresh = [s for s in raw or () if s.pid and s.timeStamp > since]
        if fresh:
            target.last_sample_us = max(s.timeStamp for s in fresh)
        return tuple(
            ProcessUtilization(int(s.pid), s.timeStamp / 1e6, float(s.smUtil), float(s.memUtil)) for s in fresh
        )


class NvmlSampler(PollingSource):
    """Samples NVML for the given devices in a background thread; ``drain()`` returns the rows.

    ``devices``: ``cuda:N`` (NVML index), a GPU UUID or a MIG UUID; None samples every GPU.
    ``pids``: server pid -> workload class, for ``process_classes()``; replace it with ``set_pids``.
    ``campaign``: the results directory, whose servers' environments name their class where their parents
    lead to no pid of ``pids`` (attribution.proc_marked_class).
    On a host without NVML nothing raises: ``available()`` is falsy and says why, ``start()`` polls nothing.
    """

    native_thread = True
    """NVML's calls block in C for up to tens of ms (ctypes releases the GIL meanwhile): an OS thread."""

    def __init__(
        self,
        devices: list[str] | None = None,
        interval_s: float = 0.2,
        pids: Mapping[int, str] | None = None,
        *,
        campaign: str | None = None,
        max_buffered: int = DEFAULT_MAX_BUFFERED,
    ) -> None:
        super().__init__(interval_s, max_buffered=max_buffered, name="nvml")
        self._wanted = list(devices) if devices is not None else None
        self._nv: Any = None
        self._reader: NvmlReader | None = None
        self._targets: list[_Target] = []
        self._driver_version: str | None = None
        self._class_lock = self._allocate_lock()  # the poll thread's and the campaign's: an OS lock
        self._pid_classes: dict[int, str] = dict(pids or {})
        self._process_classes: dict[str, str] = {}
        self._campaign = campaign

    def available(self) -> Availability:
        """Whether NVML works here and has the requested devices; never raises."""
        if self.running:
            return Availability(True)
        opened = self._open()
        if opened:
            self._close()
        return opened

    def _open(self) -> Availability:
        try:
            nv = load_nvml()
            nv.nvmlInit()
        except Exception as exc:  # ImportError or NVMLError (no driver, no library): a CPU host, say so
            return _unavailable(exc)
        try:
            targets = resolve_targets(nv, self._wanted)
            driver = nv.nvmlSystemGetDriverVersion()
        except (LookupError, nv.NVMLError) as exc:
            nv.nvmlShutdown()
            return Availability(False, f"NVML: {exc}")
        if not targets:
            nv.nvmlShutdown()
            return Availability(False, "NVML: this host has no GPU")
        self._nv, self._targets, self._driver_version = nv, targets, str(driver)
        now_us = int(time.time() * 1e6)
        for target in targets:  # only process samples from now on: the trial window, not NVML's backlog
            target.last_sample_us = now_us
        self._reader = NvmlReader(nv, self._note)
        return Availability(True)

    def _close(self) -> None:
        if self._nv is not None:
            self._nv.nvmlShutdown()
        self._nv, self._reader = None, None

    def read(self) -> list[DeviceReading]:
        """One reading of every device, all stamped with the same time (one poll); after start()."""
        if self._reader is None:
            raise RuntimeError("the NVML sampler is not started")
        t = time.time()
        readings = [self._reader.read(target, t) for target in self._targets]
        self._classify(readings)
        return readings

    def _poll(self) -> list[TelemetryRow]:
        return readings_rows(self.read())

    def devices_info(self) -> list[DeviceInfo]:
        """What identifies each sampled device (the exporter's labels); known once available() or start() succeeded."""
        return [t.info for t in self._targets]

    @property
    def driver_version(self) -> str | None:
        """The NVIDIA driver version, once started."""
        return self._driver_version

    def set_pids(self, pids: Mapping[int, str]) -> None:
        """Replace the server pid -> class map (servers restarted for a new segment)."""
        with self._class_lock:
            self._pid_classes = dict(pids)
            self._process_classes.clear()

    def process_classes(self) -> dict[str, str]:
        """Every GPU process seen since the last set_pids: pid (text, as in rows) -> class or UNATTRIBUTED."""
        with self._class_lock:
            return dict(self._process_classes)

    def _classify(self, readings: list[DeviceReading]) -> None:
        with self._class_lock:
            for reading in readings:
                for pid in {p.pid for p in reading.processes} | {s.pid for s in reading.process_utilization}:
                    if str(pid) not in self._process_classes:
                        workload = resolve_class(pid, self._pid_classes, proc_parent)
                        if workload is None and self._campaign is not None:
                            workload = proc_marked_class(pid, self._campaign)
                        self._process_classes[str(pid)] = workload or UNATTRIBUTED
