"""MPS daemon control: own directories, environment passed through, quit on release, nothing left behind.

These run against a stand-in ``nvidia-cuda-mps-control`` (tests/sharing/mps_standin.py, the same
command-line and control interface): the real daemon only runs on a host with an NVIDIA driver and
GPU, and the device run on the lent H200 covers it (the same MpsDaemon with the real binary, real
reference servers as its clients). Servers here are small Python programs that record the
environment they were started with.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from sharing_testlib import CLASSES, GPUS, arm, backend

from bench_plugin.sharing.base import ApplyError
from bench_plugin.sharing.mps import MpsDaemon, MpsError, find_control_binary, processes_with_env

HERE = Path(__file__).resolve().parent
# No braces: server commands go through str.format.
RECORD_ENV = "import json, os, sys, time; json.dump(dict(os.environ), open(sys.argv[1] + '.tmp', 'w')); " \
             "os.replace(sys.argv[1] + '.tmp', sys.argv[1]); time.sleep(120)"


@pytest.fixture
def standin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The stand-in as an executable called nvidia-cuda-mps-control; its record file is standin.parent/record."""
    folder = tmp_path / "bin"
    folder.mkdir()
    binary = folder / "nvidia-cuda-mps-control"
    binary.write_text(f"#!{sys.executable}\n" + (HERE / "mps_standin.py").read_text())
    binary.chmod(0o755)
    monkeypatch.setenv("STUB_MPS_RECORD", str(folder / "record"))
    return binary


def record(standin: Path) -> list[dict[str, Any]]:
    path = standin.parent / "record"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


def daemon_pid(standin: Path) -> int:
    return next(r["pid"] for r in record(standin) if r["event"] == "serve")


def wait_for(path: Path, timeout_s: float = 20.0) -> dict[str, str]:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)
    return dict(json.loads(path.read_text()))


def test_the_control_binary_is_found_on_path(standin: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", f"{standin.parent}:{os.environ['PATH']}")
    assert find_control_binary() == str(standin)


def test_daemon_starts_in_its_own_directories_and_quits_leaving_nothing(
    standin: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "5")  # the caller's own: must not set a daemon default
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    daemon = MpsDaemon(str(standin), ["GPU-0", "GPU-1"], timeout_s=10, log_archive=tmp_path / "logs" / "seg0-mps")
    daemon.start()
    directory = daemon.directory
    assert directory is not None and directory.parent == Path(tempfile.gettempdir())
    assert directory.name.startswith("bench-mps-") and (daemon.pipe_directory / "control").exists()
    assert daemon.env == {"CUDA_MPS_PIPE_DIRECTORY": str(directory / "pipe"),
                          "CUDA_MPS_LOG_DIRECTORY": str(directory / "log")}
    (start,) = [r for r in record(standin) if r["event"] == "start"]
    assert start["argv"] == ["-d"]
    assert start["env"] == {**daemon.env, "CUDA_VISIBLE_DEVICES": "GPU-0,GPU-1"}
    assert daemon.pid == daemon_pid(standin) and alive(daemon.pid)
    assert daemon.pid in daemon.processes()

    assert daemon.stop() == []
    commands = [r["line"] for r in record(standin) if r["event"] == "command"]
    assert commands == ["get_server_list", "get_server_list", "quit"]
    assert not alive(daemon.pid) and not directory.exists()
    assert processes_with_env("CUDA_MPS_PIPE_DIRECTORY", str(directory / "pipe")) == []
    assert "User command: quit" in (tmp_path / "logs" / "seg0-mps-control.log").read_text()
    assert daemon.stop() == []  # safe to repeat


def test_a_daemon_that_fails_to_start_leaves_no_directory(standin: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STUB_MPS_MODE", "fail")
    daemon = MpsDaemon(str(standin), ["GPU-0"], timeout_s=5)
    with pytest.raises(MpsError, match=r"did not start: '.*nvidia-cuda-mps-control -d' exited 1: stand-in: cannot"):
        daemon.start()
    (start,) = record(standin)
    assert daemon.directory is None and not Path(start["env"]["CUDA_MPS_PIPE_DIRECTORY"]).parent.exists()


def test_a_daemon_that_never_opens_its_pipe_is_stopped(standin: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STUB_MPS_MODE", "no-pipe")
    daemon = MpsDaemon(str(standin), ["GPU-0"], timeout_s=1)
    with pytest.raises(MpsError, match=r"did not start: no control pipe at .*/pipe/control after 1 s"):
        daemon.start()
    pid = daemon_pid(standin)
    assert not alive(pid)
    start = next(r for r in record(standin) if r["event"] == "start")
    assert not Path(start["env"]["CUDA_MPS_PIPE_DIRECTORY"]).parent.exists()


def test_a_daemon_that_ignores_quit_is_terminated(standin: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STUB_MPS_MODE", "ignore-quit")
    daemon = MpsDaemon(str(standin), ["GPU-0"], timeout_s=1)
    daemon.start()
    directory, pid = daemon.directory, daemon_pid(standin)
    problems = daemon.stop()
    assert problems == [f"still running after quit, terminated: [{pid}]"]
    assert not alive(pid) and directory is not None and not directory.exists()


def mps_backend(tmp_path: Path, standin: Path, servers: dict[str, Any] | None = None) -> Any:
    logs = tmp_path / "logs"
    if servers is None:
        servers = {name: {"kind": "command", "command": ["{python}", "-c", RECORD_ENV, f"{logs}/env-{name}.json"]}
                   for name in CLASSES}
    arms = arm("x", "mps", llm={"thread_percentage": 40, "memory_limit_mib": 1000}, embedding={"priority": "low"})
    b = backend(tmp_path, GPUS, arms, servers, mps_control=str(standin))
    b.mps_timeout_s = 10
    return b


def test_apply_gives_every_server_the_daemon_and_its_knobs_and_release_stops_all(
    standin: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "5")  # inherited settings never reach a server
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    b = mps_backend(tmp_path, standin)
    x = b.scenario.arm("x")
    b.check(x)
    placement = b.apply(x, CLASSES, 1, 0)
    assert b.mps is not None
    dirs, daemon = b.mps.env, b.mps.pid
    (start,) = [r for r in record(standin) if r["event"] == "start"]
    assert start["env"] == {**dirs, "CUDA_VISIBLE_DEVICES": "GPU-0"}

    base = {"PYTHONUNBUFFERED": "1", "CUDA_VISIBLE_DEVICES": "GPU-0", **dirs}
    expected = {
        "llm": {**base, "CUDA_MPS_CLIENT_PRIORITY": "0", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "40",
                "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": "0=1000M"},
        "embedding": {**base, "CUDA_MPS_CLIENT_PRIORITY": "1"},
        "asr": {**base, "CUDA_MPS_CLIENT_PRIORITY": "0"},
    }
    for name in CLASSES:
        where = placement.classes[name]
        assert where.env == expected[name], name
        assert (where.device, where.device_uuid, where.gpu, where.mps_daemon_pid) == ("cuda:0", "GPU-0", "cuda:0",
                                                                                      daemon)
        got = wait_for(tmp_path / "logs" / f"env-{name}.json")
        assert {k: v for k, v in got.items() if k.startswith("CUDA_")} == {
            k: v for k, v in expected[name].items() if k.startswith("CUDA_")}, name
        assert f"CUDA_MPS_PIPE_DIRECTORY={dirs['CUDA_MPS_PIPE_DIRECTORY']}" in Path(where.log or "").read_text()
    server_pids = [placement.classes[n].pid for n in CLASSES]

    b.release()
    assert not any(alive(pid) for pid in [daemon, *server_pids] if pid is not None)
    assert not Path(dirs["CUDA_MPS_PIPE_DIRECTORY"]).parent.exists() and b.mps is None
    assert processes_with_env("CUDA_MPS_PIPE_DIRECTORY", dirs["CUDA_MPS_PIPE_DIRECTORY"]) == []
    assert [r["line"] for r in record(standin) if r["event"] == "command"][-1] == "quit"
    assert "User command: quit" in (tmp_path / "logs" / "trial-001-seg0-mps-control.log").read_text()


def test_a_server_that_fails_to_start_takes_the_daemon_down(standin: Path, tmp_path: Path) -> None:
    servers = {"asr": {"kind": "command", "command": [str(tmp_path / "no-such-server"), "{port}"]}}
    b = mps_backend(tmp_path, standin, servers)
    with pytest.raises(ApplyError, match=r"arm 'x': could not start: .*no-such-server"):
        b.apply(b.scenario.arm("x"), CLASSES, 1, 0)
    assert b.mps is None and b.running == []
    start = next(r for r in record(standin) if r["event"] == "start")
    assert not Path(start["env"]["CUDA_MPS_PIPE_DIRECTORY"]).parent.exists()
    assert not alive(daemon_pid(standin))


def test_a_daemon_that_fails_to_start_fails_the_apply(
    standin: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STUB_MPS_MODE", "fail")
    b = mps_backend(tmp_path, standin)
    with pytest.raises(ApplyError, match=r"arm 'x': could not start: MPS control daemon .* did not start"):
        b.apply(b.scenario.arm("x"), CLASSES, 1, 0)
    assert b.mps is None and b.running == []


def test_restore_after_an_interrupted_trial_stops_everything(standin: Path, tmp_path: Path) -> None:
    b = mps_backend(tmp_path, standin)
    placement = b.apply(b.scenario.arm("x"), CLASSES, 2, 0)
    daemon = b.mps.pid if b.mps else None
    b.restore()  # what the conductor calls at the end and on Ctrl-C
    b.restore()
    assert daemon is not None and not alive(daemon)
    assert not any(alive(p.pid) for p in placement.classes.values() if p.pid is not None)
