"""What each server gets per sharing mode and knob, and the arms the local backend refuses, with why.

Planned for given device lists (no GPU is needed): the environment and flags are exactly what the
servers would be started with; tests/sharing/test_mps.py starts real processes with them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sharing_testlib import CLASSES, CPU, GPUS, MIG_GPU, MIG_HOST, MIGS, ONE_GPU, arm, backend

from bench_plugin.sharing.base import ApplyError
from bench_plugin.sharing.devices import Device
from bench_plugin.sharing.local import LocalBackend
from bench_plugin.sharing.plan import ServerPlan

MPS_DIRS = {"CUDA_MPS_PIPE_DIRECTORY": "/tmp/bench-mps-x/pipe", "CUDA_MPS_LOG_DIRECTORY": "/tmp/bench-mps-x/log"}
COMMAND = {"kind": "command", "command": ["{python}", "-m", "http.server", "{port}"]}


def plans(b: LocalBackend, name: str = "x", mps_env: dict[str, str] | None = None) -> dict[str, ServerPlan]:
    x = b.scenario.arm(name)
    b.check(x)
    return b.plans(x, CLASSES, mps_env)


def refused(b: LocalBackend, name: str = "x") -> str:
    with pytest.raises(ApplyError) as info:
        b.check(b.scenario.arm(name))
    return str(info.value)


# -- the environment and flags of each mode ---------------------------------------------------------------------

def test_time_slicing_pins_every_server_to_the_gpu_uuid(tmp_path: Path) -> None:
    for name, plan in plans(backend(tmp_path, GPUS, arm("x"))).items():
        assert plan.env == {"PYTHONUNBUFFERED": "1", "CUDA_VISIBLE_DEVICES": "GPU-0"}, name
        assert plan.args == [] and plan.device_arg == "cuda:0"


def test_cpu_servers_get_no_cuda_variables(tmp_path: Path) -> None:
    for plan in plans(backend(tmp_path, CPU, arm("x"))).values():
        assert plan.env == {"PYTHONUNBUFFERED": "1"} and plan.device_arg == "cpu"


def test_time_slicing_memory_cap_and_priority_are_reference_server_flags(tmp_path: Path) -> None:
    b = backend(tmp_path, GPUS, arm("x", llm={"memory_limit_mib": 2048, "priority": "high"},
                                    embedding={"priority": "low"}))
    got = plans(b)
    assert got["llm"].args == ["--memory-limit-mib", "2048", "--stream-priority", "high"]
    assert got["embedding"].args == ["--stream-priority", "low"]
    assert got["asr"].args == []
    assert all(p.env == {"PYTHONUNBUFFERED": "1", "CUDA_VISIBLE_DEVICES": "GPU-0"} for p in got.values())


def test_mps_knobs_are_client_environment_variables(tmp_path: Path) -> None:
    b = backend(tmp_path, GPUS, arm("x", "mps", llm={"thread_percentage": 60, "memory_limit_mib": 40960},
                                    embedding={"priority": "low"}, asr={"thread_percentage": 20}))
    got = plans(b, mps_env=MPS_DIRS)
    base = {"PYTHONUNBUFFERED": "1", "CUDA_VISIBLE_DEVICES": "GPU-0", **MPS_DIRS}
    assert got["llm"].env == {**base, "CUDA_MPS_CLIENT_PRIORITY": "0", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "60",
                              "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": "0=40960M"}
    assert got["embedding"].env == {**base, "CUDA_MPS_CLIENT_PRIORITY": "1"}
    assert got["asr"].env == {**base, "CUDA_MPS_CLIENT_PRIORITY": "0", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "20"}
    # Under MPS the driver enforces the cap: no allocator flag on top of it.
    assert all(p.args == [] for p in got.values())


def test_mps_knobs_reach_command_servers_too(tmp_path: Path) -> None:
    b = backend(tmp_path, GPUS, arm("x", "mps", llm={"memory_limit_mib": 1024, "priority": "low"}),
                servers={"llm": COMMAND})
    llm = plans(b, mps_env=MPS_DIRS)["llm"]
    assert llm.env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == "0=1024M" and llm.env["CUDA_MPS_CLIENT_PRIORITY"] == "1"
    assert llm.args == []


def test_mig_pins_each_server_to_its_instance_uuid(tmp_path: Path) -> None:
    got = plans(backend(tmp_path, MIG_HOST, arm("x", "mig", asr={"memory_limit_mib": 8000})))
    assert {n: p.env["CUDA_VISIBLE_DEVICES"] for n, p in got.items()} == {
        "llm": "MIG-0", "embedding": "MIG-1", "asr": "MIG-2"}
    assert got["asr"].args == ["--memory-limit-mib", "8000"] and got["asr"].device_arg == "cuda:0"
    assert {p.device.gpu for p in got.values()} == {"cuda:0"}


# -- what is refused, and the reason given ----------------------------------------------------------------------

@pytest.mark.parametrize(
    ("devices", "arms", "servers", "message"),
    [
        (CPU, arm("x", "mps"), None, "sharing 'mps' needs an NVIDIA GPU; this host has none"),
        (CPU, arm("x", "mig"), None, "sharing 'mig' needs an NVIDIA GPU; this host has none"),
        (CPU, arm("x", llm={"memory_limit_mib": 100}), None, "classes.llm.memory_limit_mib needs an NVIDIA GPU"),
        (CPU, arm("x", llm={"priority": "low"}), None, "classes.llm.priority needs an NVIDIA GPU"),
        (GPUS, arm("x", llm={"thread_percentage": 50}), None, "classes.llm.thread_percentage needs sharing 'mps'"),
        (GPUS, arm("x", llm={"memory_limit_mib": 100}), {"llm": COMMAND},
         "classes.llm.memory_limit_mib: a server of kind 'command' can only be capped or prioritised through MPS"),
        (GPUS, arm("x", asr={"priority": "high"}), {"asr": COMMAND},
         "classes.asr.priority: a server of kind 'command' can only be capped or prioritised through MPS"),
        (GPUS, arm("x", "mps", llm={"priority": "high"}), None,
         "classes.llm.priority 'high': MPS has no level above normal (CUDA_MPS_CLIENT_PRIORITY is 0 normal or 1 "
         "below normal, per NVIDIA's MPS docs); to favour llm, set the other classes to priority: low"),
        (GPUS, arm("x", "exclusive", llm={"priority": "high"}), None,
         "classes.llm.priority 'high' has no effect under sharing 'exclusive'"),
        (MIG_HOST, arm("x", "mig", llm={"priority": "low"}), None,
         "classes.llm.priority 'low' has no effect under sharing 'mig'"),
        (GPUS, arm("x", llm={"memory_limit_mib": 200000}), None,
         "classes.llm.memory_limit_mib 200000 is more than cuda:0 has (143771 MiB)"),
        (CPU, arm("x", llm={"device": "cuda:7"}), None,
         "classes.llm.device 'cuda:7' is not on this host (devices: cpu)"),
        (MIG_HOST, arm("x", "time-slicing"), None,
         "sharing 'time-slicing' needs a whole GPU, but every GPU has MIG mode enabled"),
        (MIG_HOST, arm("x", "mig", llm={"device": "cuda:0"}), None,
         "classes.llm.device 'cuda:0' is not a MIG instance"),
        (MIG_HOST, arm("x", "mig", llm={"device": "MIG-1"}, asr={"device": "MIG-1"}), None,
         "classes llm and asr both name MIG instance MIG-1"),
        ([*GPUS, *MIGS], arm("x", llm={"device": "MIG-0"}), None,
         "classes.llm.device 'MIG-0' is a MIG instance; use it with sharing 'mig'"),
        (GPUS, arm("x", llm={"node_labels": {"pool": "fast"}}), None,
         "classes.llm.node_labels is a Kubernetes-only setting (required node affinity)"),
    ],
)
def test_refusals_name_the_arm_the_class_and_the_reason(
    tmp_path: Path, devices: list[Device], arms: list[dict[str, Any]], servers: dict[str, Any] | None, message: str
) -> None:
    text = refused(backend(tmp_path, devices, arms, servers))
    assert text.startswith("arm 'x': ") and message in text, text


def test_accepted_combinations(tmp_path: Path) -> None:
    ok: list[tuple[list[Device], list[dict[str, Any]], dict[str, Any] | None]] = [
        (GPUS, arm("x", "mps", llm={"priority": "low", "memory_limit_mib": 100}), {"llm": COMMAND}),
        (GPUS, arm("x", "mps", llm={"thread_percentage": 30}), None),
        (GPUS, arm("x", "exclusive", llm={"memory_limit_mib": 4096}), None),
        (ONE_GPU, arm("x", llm={"priority": "high"}, asr={"priority": "low"}), None),
        (MIG_HOST, arm("x", "mig", llm={"memory_limit_mib": 4096}), None),
    ]
    for devices, arms, servers in ok:
        b = backend(tmp_path, devices, arms, servers)
        b.check(b.scenario.arm("x"))


def test_mps_without_the_control_binary_names_what_is_missing(tmp_path: Path) -> None:
    text = refused(backend(tmp_path, GPUS, arm("x", "mps"), mps_control=None))
    assert "sharing 'mps' needs the MPS control daemon, but nvidia-cuda-mps-control is neither on PATH nor in " \
           "/usr/local/nvidia/bin" in text


def test_mig_mode_disabled_is_refused_with_how_to_create_instances(tmp_path: Path) -> None:
    text = refused(backend(tmp_path, GPUS, arm("x", "mig")))
    assert "MIG mode is disabled on every GPU (cuda:0 NVIDIA H200, cuda:1 NVIDIA H200, cuda:2 NVIDIA H200)" in text
    assert "this tool never changes MIG mode or creates instances" in text
    assert "nvidia-smi mig -i <gpu> -cgi <profiles> -C" in text
    assert "https://docs.nvidia.com/datacenter/tesla/mig-user-guide/" in text


def test_fewer_mig_instances_than_classes_is_refused(tmp_path: Path) -> None:
    text = refused(backend(tmp_path, [MIG_GPU, *MIGS[:2]], arm("x", "mig")))
    assert "sharing 'mig' places each class on its own MIG instance: 3 classes, 2 instances (MIG-0 (NVIDIA H200 " \
           "MIG 1g.18gb, parent cuda:0), MIG-1" in text
    assert "never changes MIG mode" in text


def test_a_foreign_mps_daemon_refuses_non_mps_gpu_arms(tmp_path: Path) -> None:
    b = backend(tmp_path, GPUS, arm("x"))
    pipe = tmp_path / "nvidia-mps"
    pipe.mkdir()
    (pipe / "control").touch()
    b.default_mps_pipe_directory = pipe
    text = refused(b)
    assert f"an MPS control daemon this tool did not start listens at {pipe / 'control'}" in text
    with pytest.raises(ApplyError, match="would silently run under MPS"):
        b.check(b.scenario.arm("control"))  # exclusive too
    mps = backend(tmp_path, GPUS, arm("x", "mps"))
    mps.default_mps_pipe_directory = pipe
    mps.check(mps.scenario.arm("x"))  # its own daemon in its own directory: the foreign one is not joined


# -- scenarios/day19-multi-gpu.yaml on a host of four GPUs (the run itself needs one) --------------------------

def _multi_gpu(tmp_path: Path, devices: list[Device]) -> LocalBackend:
    from bench_plugin.scenario import load_scenario

    b = LocalBackend(load_scenario(Path(__file__).resolve().parents[2] / "scenarios" / "day19-multi-gpu.yaml"),
                     tmp_path / "logs")
    b.devices = devices
    b.mps_control = "/usr/bin/true"
    b.default_mps_pipe_directory = tmp_path / "no-default-mps"
    return b


def test_the_multi_gpu_arms_place_and_charge_as_designed(tmp_path: Path) -> None:
    four = [Device(f"cuda:{i}", "NVIDIA H200", f"GPU-{i}", 143771) for i in range(4)]
    b = _multi_gpu(tmp_path, four)
    placed: dict[str, list[dict[str, str]]] = {}
    for arm_ in b.scenario.arms:
        b.check(arm_)
        segments = b.segments(arm_, CLASSES)
        placed[arm_.name] = [{name: plan.env["CUDA_VISIBLE_DEVICES"] for name, plan in b.plans(arm_, seg).items()}
                             for seg in segments]
    assert placed == {
        "exclusive": [{"llm": "GPU-0", "embedding": "GPU-1", "asr": "GPU-2"}],  # all three at once
        "time-slicing": [{"llm": "GPU-0", "embedding": "GPU-0", "asr": "GPU-0"}],
        "mps": [{"llm": "GPU-0", "embedding": "GPU-0", "asr": "GPU-0"}],
        "two-plus-one": [{"llm": "GPU-0", "embedding": "GPU-1", "asr": "GPU-1"}],
    }
    charged = {arm_: sum(len(set(seg.values())) for seg in segs) for arm_, segs in placed.items()}
    assert charged == {"exclusive": 3, "time-slicing": 1, "mps": 1, "two-plus-one": 2}


def test_on_one_gpu_the_multi_gpu_control_runs_in_turn_and_two_plus_one_is_refused(tmp_path: Path) -> None:
    b = _multi_gpu(tmp_path, ONE_GPU)
    control = b.scenario.arm("exclusive")
    b.check(control)
    assert b.segments(control, CLASSES) == [["llm"], ["embedding"], ["asr"]]  # the one-at-a-time approximation
    assert "cuda:1" in refused(b, "two-plus-one")
