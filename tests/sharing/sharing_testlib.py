"""Helpers for the sharing tests: scenarios with given arms and servers, backends planning for given devices."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from bench_plugin.scenario import Scenario, load_scenario
from bench_plugin.sharing.devices import Device
from bench_plugin.sharing.local import LocalBackend

ROOT = Path(__file__).resolve().parents[2]
CLASSES = ["llm", "embedding", "asr"]

CPU = [Device("cpu", "test cpu")]
GPUS = [Device(f"cuda:{i}", "NVIDIA H200", f"GPU-{i}", 143771) for i in range(3)]
ONE_GPU = GPUS[:1]
MIG_GPU = Device("cuda:0", "NVIDIA H200", "GPU-0", 143771, mig_enabled=True)
MIGS = [Device(f"MIG-{i}", "NVIDIA H200 MIG 1g.18gb", f"MIG-{i}", 16384, parent="cuda:0") for i in range(3)]
MIG_HOST = [MIG_GPU, *MIGS]


def scenario(tmp_path: Path, arms: list[dict[str, Any]] | None = None,
             servers: dict[str, dict[str, Any]] | None = None) -> Scenario:
    """scenarios/day19.yaml with ``arms`` and per-class ``server`` specs replaced where given."""
    data = yaml.safe_load((ROOT / "scenarios" / "day19.yaml").read_text())
    if arms is not None:
        data["arms"] = arms
        data["allow_multiple_changes"] = True  # planning tests set several knobs against one control
    for name, server in (servers or {}).items():
        data["classes"][name]["server"] = server
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_scenario(path)


def backend(
    tmp_path: Path,
    devices: list[Device],
    arms: list[dict[str, Any]] | None = None,
    servers: dict[str, dict[str, Any]] | None = None,
    mps_control: str | None = "/usr/bin/true",
) -> LocalBackend:
    """A local backend that plans for ``devices`` instead of the host's, with the given MPS control binary."""
    b = LocalBackend(scenario(tmp_path, arms, servers), tmp_path / "logs")
    b.devices = devices  # the host's real devices are probed in the constructor; plan for given ones
    b.mps_control = mps_control
    b.default_mps_pipe_directory = tmp_path / "no-default-mps"  # never the host's /tmp/nvidia-mps
    return b


def arm(name: str, sharing: str = "time-slicing", **classes: dict[str, Any]) -> list[dict[str, Any]]:
    """A control arm plus one arm ``name`` with ``sharing`` and per-class settings."""
    return [{"name": "control", "control": True}, {"name": name, "sharing": sharing, "classes": classes}]
