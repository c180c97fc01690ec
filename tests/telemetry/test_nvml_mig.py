"""MIG discovery and NVML's refusals, against a FAKE pynvml.

Why a fake: the only GPU this project can reach (the lent H200) runs with MIG disabled, and its MIG
layout must never be changed, so the real NVML cannot be made to show MIG instances; this CPU host has
no NVML at all. The fake answers the calls nvml.py makes the way NVML documents them (nvml.h): a GPU
without MIG refuses nvmlDeviceGetMigMode with NOT_SUPPORTED, an empty MIG slot is NOT_FOUND, a MIG
device handle refuses utilisation, clocks, power and temperature with NOT_SUPPORTED, and process
utilisation with no new samples is NOT_FOUND. The whole-GPU path runs against the real NVML on the H200
(gpu_check.py). What is checked here is nvml.py's own logic around those answers.
"""

from __future__ import annotations

from collections import Counter
from types import SimpleNamespace
from typing import Any

import pytest

from bench_plugin.telemetry import fields as F
from bench_plugin.telemetry import nvml
from bench_plugin.telemetry.nvml import NvmlReader, NvmlSampler, resolve_targets

NOT_SUPPORTED, NOT_FOUND = 3, 6
G0, G1 = "GPU-00000000-0000-0000-0000-000000000000", "GPU-11111111-1111-1111-1111-111111111111"
MIG_A, MIG_B = "MIG-aaaaaaaa-aaaa-5aaa-8aaa-aaaaaaaaaaaa", "MIG-bbbbbbbb-bbbb-5bbb-8bbb-bbbbbbbbbbbb"


class FakeNvmlError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__(f"NVML error {value}")
        self.value = value


def _proc(pid: int, used: int | None) -> SimpleNamespace:
    return SimpleNamespace(pid=pid, usedGpuMemory=used)


class FakeNvml:
    """GPU 0 whole (no MIG); GPU 1 in MIG mode with instances in slots 0 and 3 of 7."""

    NVMLError = FakeNvmlError
    NVML_DEVICE_MIG_ENABLE = 1
    NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 1, 2, 0
    nvmlMemory_v2 = 0x02000028

    def __init__(self) -> None:
        self.calls: Counter[tuple[str, str]] = Counter()
        gpu = {"kind": "gpu"}
        self.handles: dict[str, dict[str, Any]] = {
            G0: {**gpu, "index": 0, "mig": False, "bus": "00000000:18:00.0"},
            G1: {**gpu, "index": 1, "mig": True, "bus": "00000000:2A:00.0"},
            MIG_A: {"kind": "mig", "parent": G1, "gi": 1, "name": "NVIDIA H200 MIG 3g.71gb"},
            MIG_B: {"kind": "mig", "parent": G1, "gi": 5, "name": "NVIDIA H200 MIG 1g.18gb"},
        }
        self.samples = [SimpleNamespace(pid=11, timeStamp=t, smUtil=70, memUtil=9) for t in (1_000, 2_000)]

    def _h(self, uuid: str, call: str) -> dict[str, Any]:
        self.calls[(uuid, call)] += 1
        return self.handles[uuid] | {"uuid": uuid}

    def nvmlInit(self) -> None: ...
    def nvmlShutdown(self) -> None: ...
    def nvmlSystemGetDriverVersion(self) -> str: return "580.159.04"
    def nvmlDeviceGetCount(self) -> int: return 2
    def nvmlDeviceGetHandleByIndex(self, i: int) -> str: return [G0, G1][i]
    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> str:
        if uuid not in self.handles:
            raise FakeNvmlError(NOT_FOUND)
        return uuid
    def nvmlDeviceGetUUID(self, h: str) -> str: return h
    def nvmlDeviceGetName(self, h: str) -> str: return self.handles[h].get("name", "NVIDIA H200")
    def nvmlDeviceGetPciInfo(self, h: str) -> SimpleNamespace: return SimpleNamespace(busId=self.handles[h]["bus"])
    def nvmlDeviceGetMigMode(self, h: str) -> list[int]:
        if not self.handles[h]["mig"]:
            raise FakeNvmlError(NOT_SUPPORTED)
        return [1, 1]
    def nvmlDeviceGetMaxMigDeviceCount(self, h: str) -> int: return 7
    def nvmlDeviceGetMigDeviceHandleByIndex(self, h: str, i: int) -> str:
        if i not in (0, 3):
            raise FakeNvmlError(NOT_FOUND)
        return MIG_A if i == 0 else MIG_B
    def nvmlDeviceGetGpuInstanceId(self, h: str) -> int: return int(self.handles[h]["gi"])
    def nvmlDeviceGetDeviceHandleFromMigDeviceHandle(self, h: str) -> str: return str(self.handles[h]["parent"])

    def _gpu_only(self, h: str, call: str) -> dict[str, Any]:
        handle = self._h(h, call)
        if handle["kind"] == "mig":
            raise FakeNvmlError(NOT_SUPPORTED)
        return handle

    def nvmlDeviceGetUtilizationRates(self, h: str) -> SimpleNamespace:
        self._gpu_only(h, "util")
        return SimpleNamespace(gpu=97, memory=31)
    def nvmlDeviceGetPowerUsage(self, h: str) -> int: return self._gpu_only(h, "power") and 512_345
    def nvmlDeviceGetTotalEnergyConsumption(self, h: str) -> int: return self._gpu_only(h, "energy") and 9_000
    def nvmlDeviceGetClockInfo(self, h: str, clock: int) -> int: return self._gpu_only(h, "clock") and 1980
    def nvmlDeviceGetTemperature(self, h: str, sensor: int) -> int: return self._gpu_only(h, "temp") and 44
    def nvmlDeviceGetMemoryInfo(self, h: str, version: int | None = None) -> SimpleNamespace:
        self._h(h, "memory")
        gib = 2**30
        return SimpleNamespace(total=18 * gib, free=15 * gib, used=2 * gib, reserved=gib)
    def nvmlDeviceGetComputeRunningProcesses(self, h: str) -> list[SimpleNamespace]:
        self._h(h, "processes")
        return {MIG_A: [_proc(21, 3 * 2**30)], MIG_B: [_proc(22, None)]}.get(h, [_proc(11, 2**30), _proc(21, 5)])
    def nvmlDeviceGetProcessUtilization(self, h: str, since: int) -> list[SimpleNamespace]:
        self._gpu_only(h, "process_util")
        fresh = [s for s in self.samples if s.timeStamp > since]
        if not fresh:
            raise FakeNvmlError(NOT_FOUND)
        return self.samples  # NVML may hand back older samples too: the reader filters them


def test_every_gpu_and_its_mig_instances_are_found() -> None:
    targets = resolve_targets(FakeNvml(), None)
    assert [t.info.key for t in targets] == ["cuda:0", "cuda:1", MIG_A, MIG_B]
    a = targets[2].info
    assert (a.index, a.uuid, a.pci_bus_id, a.model) == (1, G1, "00000000:2A:00.0", "NVIDIA H200")
    assert (a.mig_profile, a.gpu_instance_id, a.mig_key) == ("3g.71gb", 1, f"{G1}/1")
    assert targets[1].mig_enabled and not targets[0].mig_enabled


def test_devices_can_be_named_by_index_uuid_or_mig_uuid() -> None:
    assert [t.info.key for t in resolve_targets(FakeNvml(), ["0", MIG_B])] == ["cuda:0", MIG_B]
    assert [t.info.key for t in resolve_targets(FakeNvml(), [G0, "cuda:0"])] == ["cuda:0"]
    with pytest.raises(LookupError, match=r"no GPU 'cuda:7' on this host; it has: cuda:0 \(GPU-0"):
        resolve_targets(FakeNvml(), ["cuda:7"])


def test_a_mig_instance_gives_memory_and_processes_and_is_not_asked_again_for_the_rest() -> None:
    fake = FakeNvml()
    notes: list[str] = []
    reader = NvmlReader(fake, notes.append)
    target = resolve_targets(fake, [MIG_A])[0]
    first, second = reader.read(target, 1.0), reader.read(target, 2.0)
    assert first.gpu_util is None and first.power_mw is None and first.sm_clock_mhz is None
    assert (first.fb_used_bytes, first.fb_reserved_bytes) == (2 * 2**30, 2**30)
    assert [(p.pid, p.used_bytes) for p in second.processes] == [(21, 3 * 2**30)]
    assert fake.calls[(MIG_A, "util")] == 1 and fake.calls[(MIG_A, "power")] == 1, "refusals are learned"
    assert fake.calls[(MIG_A, "memory")] == 2
    assert notes == [], "NOT_SUPPORTED on a MIG instance is expected, not a problem"


def test_processes_of_a_mig_gpu_are_read_on_its_instances_only() -> None:
    fake = FakeNvml()
    reader = NvmlReader(fake, [].append)
    parent = resolve_targets(fake, ["cuda:1"])[0]
    reading = reader.read(parent, 1.0)
    assert reading.processes == () and fake.calls[(G1, "processes")] == 0


def test_process_samples_are_read_once_and_no_samples_is_not_a_problem() -> None:
    fake = FakeNvml()
    notes: list[str] = []
    reader = NvmlReader(fake, notes.append)
    target = resolve_targets(fake, ["cuda:0"])[0]
    target.last_sample_us = 1_500
    first = reader.read(target, 1.0)
    assert [(s.pid, s.t, s.sm_util) for s in first.process_utilization] == [(11, 0.002, 70.0)]
    assert reader.read(target, 2.0).process_utilization == ()  # NOT_FOUND: nothing newer
    assert notes == []


def test_sampler_rows_and_classes_with_mig(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeNvml()
    monkeypatch.setattr(nvml, "load_nvml", lambda: fake)
    sampler = NvmlSampler(interval_s=0.2, pids={21: "embedding"})
    assert sampler.available()
    assert sampler.start()
    sampler.poll_once()  # at least one poll, whatever the thread managed before stop()
    sampler.stop()
    rows = sampler.drain()
    memory = {(r.device, r.process): r.value for r in rows if r.metric == F.PROCESS_MEMORY}
    assert memory == {("cuda:0", "11"): 1024.0, ("cuda:0", "21"): 0.0, (MIG_A, "21"): 3072.0}
    assert {r.device for r in rows if r.metric == F.GPU_UTIL} == {"cuda:0", "cuda:1"}
    assert len({r.t for r in rows if r.metric == F.FB_USED}) == sampler.polls, "one time per poll"
    assert sampler.process_classes() == {"11": "unattributed", "21": "embedding", "22": "unattributed"}
    assert sampler.driver_version == "580.159.04"
    assert sampler.problems() == {}
