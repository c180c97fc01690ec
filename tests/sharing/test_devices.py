"""Device listing through NVML: whole GPUs, MIG mode, and the MIG instances that exist.

NVML is replaced by a stand-in module here: this host has no GPU, and the lent H200 has MIG mode
disabled (no instances to list), so neither can show a MIG listing. The stand-in answers the same
calls with the same shapes as nvidia-ml-py; the device run reads the real card (MIG disabled).
"""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest

from bench_plugin.sharing.devices import Device, gpus, host_devices, mig_profile


class NotFound(Exception):
    pass


class NotSupported(Exception):
    pass


def fake_nvml(cards: list[dict[str, Any]]) -> types.ModuleType:
    """An nvidia-ml-py stand-in: each card has name, uuid, mib, mig (None: unsupported) and instances."""
    nvml = types.ModuleType("pynvml")
    handles: dict[str, dict[str, Any]] = {}
    for i, card in enumerate(cards):
        handles[f"gpu{i}"] = card
        for j, inst in enumerate(card.get("instances", [])):
            if inst is not None:
                handles[f"gpu{i}-mig{j}"] = inst
    ns: dict[str, Any] = {
        "NVMLError": Exception, "NVMLError_NotFound": NotFound, "NVMLError_NotSupported": NotSupported,
        "NVML_DEVICE_MIG_ENABLE": 1,
        "nvmlInit": lambda: None, "nvmlShutdown": lambda: None,
        "nvmlDeviceGetCount": lambda: len(cards),
        "nvmlDeviceGetHandleByIndex": lambda i: f"gpu{i}",
        "nvmlDeviceGetName": lambda h: handles[h]["name"],
        "nvmlDeviceGetUUID": lambda h: handles[h]["uuid"],
        "nvmlDeviceGetMemoryInfo": lambda h: types.SimpleNamespace(total=handles[h]["mib"] * 1024 * 1024),
        "nvmlDeviceGetMaxMigDeviceCount": lambda h: len(handles[h].get("instances", [])),
        "nvmlSystemGetDriverVersion": lambda: b"580.159.04",
        "nvmlSystemGetCudaDriverVersion": lambda: 13000,
    }

    def mig_mode(h: str) -> list[int]:
        if handles[h]["mig"] is None:
            raise NotSupported()
        return [int(handles[h]["mig"]), int(handles[h]["mig"])]

    def mig_handle(h: str, j: int) -> str:
        if f"{h}-mig{j}" not in handles:
            raise NotFound()
        return f"{h}-mig{j}"

    ns["nvmlDeviceGetMigMode"] = mig_mode
    ns["nvmlDeviceGetMigDeviceHandleByIndex"] = mig_handle
    nvml.__dict__.update(ns)
    return nvml


def test_mig_instances_are_listed_by_uuid_and_their_gpu_is_not_given_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    cards = [
        {"name": "NVIDIA H200", "uuid": "GPU-a", "mib": 143771, "mig": True, "instances": [
            {"name": "NVIDIA H200 MIG 3g.71gb", "uuid": "MIG-a0", "mib": 71424},
            None,  # an empty slot
            {"name": "NVIDIA H200", "uuid": "MIG-a2", "mib": 16640},  # a driver whose name has no profile
        ]},
        {"name": b"NVIDIA H200", "uuid": b"GPU-b", "mib": 143771, "mig": False},
        {"name": "NVIDIA L4", "uuid": "GPU-c", "mib": 23034, "mig": None},
    ]
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(cards))
    found, info = gpus()
    assert found == [
        Device("cuda:0", "NVIDIA H200", "GPU-a", 143771, mig_enabled=True),
        Device("MIG-a0", "NVIDIA H200 MIG 3g.71gb", "MIG-a0", 71424, parent="cuda:0"),
        Device("MIG-a2", "NVIDIA H200 MIG 16gb", "MIG-a2", 16640, parent="cuda:0"),
        Device("cuda:1", "NVIDIA H200", "GPU-b", 143771),
        Device("cuda:2", "NVIDIA L4", "GPU-c", 23034),
    ]
    assert info.mig_mode == {"cuda:0": "enabled", "cuda:1": "disabled", "cuda:2": "disabled"}
    assert info.driver == "580.159.04"
    assert [d.is_gpu for d in found] == [True] * 5 and [d.gpu for d in found][:3] == ["cuda:0"] * 3


def test_no_nvml_means_the_cpu_is_the_device(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails as if not installed
    devices, info = host_devices()
    assert [d.name for d in devices] == ["cpu"] and info.nvml == "nvidia-ml-py not installed"
    assert not devices[0].is_gpu


def test_mig_profile_names() -> None:
    assert mig_profile("NVIDIA H200 MIG 1g.18gb", 16384) == "1g.18gb"
    assert mig_profile("NVIDIA H200", 35840) == "35gb"
