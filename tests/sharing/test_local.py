"""Local backend planning: segments per arm, devices, server command lines, arms it must refuse."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from bench_plugin.scenario import load_scenario
from bench_plugin.sharing.base import ApplyError
from bench_plugin.sharing.devices import Device
from bench_plugin.sharing.local import LocalBackend

ROOT = Path(__file__).resolve().parents[2]
CLASSES = ["llm", "embedding", "asr"]


def backend(tmp_path: Path, devices: list[Device], arms: list[dict[str, object]] | None = None) -> LocalBackend:
    data = yaml.safe_load((ROOT / "scenarios" / "day19.yaml").read_text())
    if arms is not None:
        data["arms"] = arms
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    b = LocalBackend(load_scenario(path), tmp_path / "logs")
    b.devices = devices  # the host's real devices are probed in the constructor; plan for given ones
    return b


CPU = [Device("cpu", "test cpu")]
GPUS = [Device(f"cuda:{i}", "NVIDIA H200", f"GPU-{i}", 143771) for i in range(3)]


def test_exclusive_on_one_device_measures_each_class_alone(tmp_path: Path) -> None:
    b = backend(tmp_path, CPU)
    assert b.segments(b.scenario.arm("exclusive"), CLASSES) == [["llm"], ["embedding"], ["asr"]]
    assert b.segments(b.scenario.arm("shared"), CLASSES) == [CLASSES]


def test_exclusive_with_a_gpu_per_class_runs_them_together_on_their_own_gpus(tmp_path: Path) -> None:
    b = backend(tmp_path, GPUS)
    arm = b.scenario.arm("exclusive")
    assert b.segments(arm, CLASSES) == [CLASSES]
    assert [b._device_for(arm, name, i).name for i, name in enumerate(CLASSES)] == ["cuda:0", "cuda:1", "cuda:2"]
    shared = b.scenario.arm("shared")
    assert {b._device_for(shared, name, i).name for i, name in enumerate(CLASSES)} == {"cuda:0"}


def test_auto_size_follows_the_device(tmp_path: Path) -> None:
    b = backend(tmp_path, CPU)
    cmd = b.command("llm", CPU[0], 8123)
    assert cmd[1:4] == ["-m", "bench_plugin.servers", "llm"]
    assert cmd[cmd.index("--size") + 1] == "tiny" and cmd[cmd.index("--port") + 1] == "8123"
    assert cmd[cmd.index("--model-name") + 1] == "bench-llm" and cmd[cmd.index("--device") + 1] == "cpu"
    gpu = b.command("llm", GPUS[0], 8123)
    assert gpu[gpu.index("--size") + 1] == "1b" and gpu[gpu.index("--device") + 1] == "cuda:0"


def test_gpu_only_arms_are_refused_on_a_cpu_host(tmp_path: Path) -> None:
    arms = [{"name": "exclusive", "control": True}, {"name": "mps", "sharing": "mps"}]
    b = backend(tmp_path, CPU, arms)
    with pytest.raises(ApplyError, match="sharing 'mps' needs an NVIDIA GPU; this host has none"):
        b.check(b.scenario.arm("mps"))
    arms = [{"name": "exclusive", "control": True}, {"name": "cap", "classes": {"llm": {"device": "cuda:7"}}}]
    b = backend(tmp_path, CPU, arms)
    with pytest.raises(ApplyError, match=r"classes.llm.device 'cuda:7' is not on this host \(devices: cpu\)"):
        b.check(b.scenario.arm("cap"))
