"""Local backend planning: segments per arm, a device per class, server command lines and environment."""

from __future__ import annotations

from pathlib import Path

from sharing_testlib import CLASSES, CPU, GPUS, MIG_HOST, ONE_GPU, arm, backend


def test_exclusive_on_one_device_measures_each_class_alone(tmp_path: Path) -> None:
    for devices in (CPU, ONE_GPU):
        b = backend(tmp_path, devices)
        assert b.segments(b.scenario.arm("exclusive"), CLASSES) == [["llm"], ["embedding"], ["asr"]]
        assert b.segments(b.scenario.arm("shared"), CLASSES) == [CLASSES]


def test_exclusive_with_a_gpu_per_class_runs_them_together_on_their_own_gpus(tmp_path: Path) -> None:
    b = backend(tmp_path, GPUS)
    exclusive = b.scenario.arm("exclusive")
    assert b.segments(exclusive, CLASSES) == [CLASSES]
    plans = b.plans(exclusive, CLASSES)
    assert {n: p.device.name for n, p in plans.items()} == {"llm": "cuda:0", "embedding": "cuda:1", "asr": "cuda:2"}
    assert {n: p.env["CUDA_VISIBLE_DEVICES"] for n, p in plans.items()} == {
        "llm": "GPU-0", "embedding": "GPU-1", "asr": "GPU-2"}
    shared = b.plans(b.scenario.arm("shared"), CLASSES)
    assert {p.device.name for p in shared.values()} == {"cuda:0"}


def test_every_mode_plans_segments_and_devices(tmp_path: Path) -> None:
    cases = [
        (GPUS, "time-slicing", [CLASSES], ["cuda:0"] * 3),
        (GPUS, "mps", [CLASSES], ["cuda:0"] * 3),
        (MIG_HOST, "mig", [CLASSES], ["MIG-0", "MIG-1", "MIG-2"]),
        (CPU, "time-slicing", [CLASSES], ["cpu"] * 3),
    ]
    for devices, sharing, segments, placed in cases:
        b = backend(tmp_path, devices, arm("x", sharing))
        x = b.scenario.arm("x")
        b.check(x)
        assert b.segments(x, CLASSES) == segments, sharing
        assert [p.device.name for p in b.plans(x, CLASSES).values()] == placed, sharing


def test_a_class_named_device_is_kept_and_others_take_the_rest(tmp_path: Path) -> None:
    b = backend(tmp_path, MIG_HOST, arm("mig", "mig", llm={"device": "MIG-2"}))
    plans = b.plans(b.scenario.arm("mig"), CLASSES)
    assert {n: p.device.name for n, p in plans.items()} == {"llm": "MIG-2", "embedding": "MIG-0", "asr": "MIG-1"}
    b = backend(tmp_path, GPUS, arm("ts", "time-slicing", asr={"device": "cuda:2"}))
    plans = b.plans(b.scenario.arm("ts"), CLASSES)
    assert {n: p.device.name for n, p in plans.items()} == {"llm": "cuda:0", "embedding": "cuda:0", "asr": "cuda:2"}


def test_auto_size_follows_the_device_and_gpu_servers_see_cuda_0(tmp_path: Path) -> None:
    b = backend(tmp_path, CPU)
    cmd = b.command("llm", CPU[0], 8123)
    assert cmd[1:4] == ["-m", "bench_plugin.servers", "llm"]
    assert cmd[cmd.index("--size") + 1] == "tiny" and cmd[cmd.index("--port") + 1] == "8123"
    assert cmd[cmd.index("--model-name") + 1] == "bench-llm" and cmd[cmd.index("--device") + 1] == "cpu"
    for device in (GPUS[2], MIG_HOST[2]):
        gpu = b.command("llm", device, 8123)
        assert gpu[gpu.index("--size") + 1] == "1b" and gpu[gpu.index("--device") + 1] == "cuda:0"


def test_sharing_flags_go_before_the_users_own_args(tmp_path: Path) -> None:
    b = backend(tmp_path, GPUS, arm("cap", llm={"memory_limit_mib": 4096, "priority": "high"}),
                servers={"llm": {"args": ["--max-batch-size", "8"]}})
    plan = b.plans(b.scenario.arm("cap"), ["llm"])["llm"]
    cmd = b.command("llm", plan.device, 8000, plan.args)
    assert cmd[-6:] == ["--memory-limit-mib", "4096", "--stream-priority", "high", "--max-batch-size", "8"]


def test_command_servers_get_cuda_0_as_device(tmp_path: Path) -> None:
    servers = {"llm": {"kind": "command", "command": ["serve", "--device", "{device}", "--port", "{port}"]}}
    b = backend(tmp_path, GPUS, servers=servers)
    assert b.command("llm", GPUS[1], 9000) == ["serve", "--device", "cuda:0", "--port", "9000"]
    assert b.command("llm", CPU[0], 9000) == ["serve", "--device", "cpu", "--port", "9000"]


def test_exclusive_short_of_gpus_runs_as_many_classes_at_once_as_there_are_gpus(tmp_path: Path) -> None:
    b = backend(tmp_path, GPUS[:2])
    arm = b.scenario.arm("exclusive")
    assert b.segments(arm, CLASSES) == [["llm", "embedding"], ["asr"]]
