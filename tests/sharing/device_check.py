"""GPU-host check of the local backend's sharing modes: run on the lent H200, not collected by pytest.

    PYTHONPATH=. python3 tests/sharing/device_check.py $OUT/device_check.json

(The H200 image lacks pydantic: carry cp312 wheels of pydantic, pydantic-core, annotated-types,
typing-inspection and typing-extensions in .whl/ and pip-install them with --target first, as
/work/.library/device/README.md describes.)

What the CPU-only tests cannot show, with the real driver: NVML's device and MIG-mode listing; a
MIG arm refused while MIG mode is disabled; the real ``nvidia-cuda-mps-control`` started in its own
directories, real reference servers as its clients (seen in get_server_list / get_client_list),
CUDA_MPS_PINNED_DEVICE_MEM_LIMIT and CUDA_MPS_ACTIVE_THREAD_PERCENTAGE as a client sees them, the
daemon and its MPS server gone after release, and after a server that failed to start; the
time-slicing flags (--memory-limit-mib caps PyTorch's allocator, --stream-priority gives the model
thread a stream at the ends of the priority range); and that compute mode and MIG mode are unchanged.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

import requests
import yaml

from bench_plugin.results.placement import Placement
from bench_plugin.scenario import load_scenario
from bench_plugin.sharing.base import ApplyError
from bench_plugin.sharing.local import LocalBackend

ROOT = Path(__file__).resolve().parents[2]
CLASSES = ["llm", "embedding", "asr"]
GIB = 1024**3

# A command-kind MPS client that reports what the driver lets it see and allocate. No braces (str.format).
PROBE = """
import json, os, sys, time, torch
out = dict(env=dict((k, v) for k, v in os.environ.items() if k.startswith('CUDA_')))
free, total = torch.cuda.mem_get_info()
out.update(mem_free_mib=free >> 20, mem_total_mib=total >> 20,
           sm_count=torch.cuda.get_device_properties(0).multi_processor_count)
try:
    x = torch.empty(4 << 30, dtype=torch.uint8, device='cuda')
    out['alloc_4gib'] = 'succeeded'
    del x
except Exception as exc:
    out['alloc_4gib'] = 'refused: ' + str(exc).splitlines()[0][:200]
json.dump(out, open(sys.argv[1], 'w'))
time.sleep(600)
"""

FLAGS_PROBE = """
import json, sys, threading, torch
from bench_plugin.servers import torch_common as tc
device = torch.device('cuda:0')
tc.configure_torch(None, device, 1024, sys.argv[2])
out = dict(range=list(torch.cuda.Stream.priority_range()))
def model_thread():
    tc.build_model(lambda: torch.nn.Linear(8, 8), device, torch.bfloat16, 0)
    out['model_thread_stream_priority'] = torch.cuda.current_stream().priority
t = threading.Thread(target=model_thread); t.start(); t.join()
out['main_thread_stream_priority'] = torch.cuda.current_stream().priority
try:
    x = torch.empty(2 << 30, dtype=torch.uint8, device='cuda')
    out['alloc_2gib_under_1gib_cap'] = 'succeeded'
except torch.OutOfMemoryError as exc:
    out['alloc_2gib_under_1gib_cap'] = 'refused: ' + str(exc).splitlines()[0][:160]
json.dump(out, open(sys.argv[1], 'w'))
"""


def mps_processes() -> list[str]:
    """Every process on the host whose command line names an MPS binary."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
            except OSError:
                continue  # ended meanwhile
            if "nvidia-cuda-mps" in cmd:
                found.append(f"{entry.name} {cmd}")
    return found


def gpu_modes() -> list[dict[str, Any]] | str:
    """Compute mode and MIG mode of every GPU, read through NVML (never set)."""
    try:
        import pynvml
        pynvml.nvmlInit()
    except Exception as exc:
        return f"NVML unavailable: {exc}"
    try:
        modes = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            modes.append({"index": i, "uuid": pynvml.nvmlDeviceGetUUID(handle),
                          "compute_mode": pynvml.nvmlDeviceGetComputeMode(handle),
                          "mig_mode": pynvml.nvmlDeviceGetMigMode(handle)})
        return modes
    finally:
        pynvml.nvmlShutdown()


def backend(tmp: Path, arms: list[dict[str, Any]], servers: dict[str, Any]) -> LocalBackend:
    data = yaml.safe_load((ROOT / "scenarios" / "day19.yaml").read_text())
    data["arms"] = arms
    data["allow_multiple_changes"] = True
    for name, server in servers.items():
        data["classes"][name]["server"] = server
    path = tmp / "scenario.yaml"
    path.write_text(yaml.safe_dump(data))
    return LocalBackend(load_scenario(path), tmp / "logs")


def wait_ready(placement: Placement, names: list[str], timeout_s: float = 180.0) -> dict[str, float]:
    start = time.monotonic()
    ready: dict[str, float] = {}
    while len(ready) < len(names) and time.monotonic() - start < timeout_s:
        for name in names:
            if name in ready:
                continue
            try:
                if requests.get(placement.classes[name].url + "/health", timeout=2).status_code == 200:
                    ready[name] = round(time.monotonic() - start, 1)
            except requests.ConnectionError:
                pass  # still loading
        time.sleep(0.2)
    return ready


def wait_file(path: Path, timeout_s: float = 120.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(0.2)
    return json.loads(path.read_text()) if path.exists() else None


def check_mps(tmp: Path, result: dict[str, Any]) -> None:
    probe_out = tmp / "probe.json"
    servers = {"llm": {"size": "tiny"}, "embedding": {"size": "tiny"},
               "asr": {"kind": "command", "command": ["{python}", "-c", PROBE, str(probe_out)]}}
    arms: list[dict[str, Any]] = [
        {"name": "control", "control": True},
        {"name": "mps", "sharing": "mps", "classes": {
            "llm": {"thread_percentage": 60},
            "embedding": {"priority": "low"},
            "asr": {"thread_percentage": 50, "memory_limit_mib": 2048, "priority": "low"}}},
    ]
    b = backend(tmp, arms, servers)
    arm = b.scenario.arm("mps")
    b.check(arm)
    placement = b.apply(arm, CLASSES, 1, 0)
    assert b.mps is not None
    daemon = b.mps
    result["mps_placement"] = placement.to_json()
    result["mps_ready_s"] = wait_ready(placement, ["llm", "embedding"])
    result["mps_probe"] = wait_file(probe_out)
    servers_list = daemon.command("get_server_list").stdout.split()
    result["mps_server_list"] = servers_list
    result["mps_client_lists"] = {pid: daemon.command(f"get_client_list {pid}").stdout.split() for pid in servers_list}
    result["mps_server_pids_expected"] = sorted(str(p.pid) for p in placement.classes.values())
    result["mps_processes_while_running"] = mps_processes()
    directory = daemon.directory
    b.release()
    result["mps_after_release"] = {"processes": mps_processes(), "directory_exists": bool(directory and
                                                                                        directory.exists())}
    result["mps_logs_archived"] = sorted(p.name for p in (tmp / "logs").glob("*mps*"))
    control_log = next(iter((tmp / "logs").glob("*mps-control.log")), None)
    result["mps_control_log_tail"] = control_log.read_text().splitlines()[-8:] if control_log else None


def check_mps_failed_server(tmp: Path, result: dict[str, Any]) -> None:
    servers = {"llm": {"size": "tiny"}, "embedding": {"size": "tiny"},
               "asr": {"kind": "command", "command": [str(tmp / "no-such-server"), "{port}"]}}
    b = backend(tmp, [{"name": "control", "control": True}, {"name": "mps", "sharing": "mps"}], servers)
    try:
        b.apply(b.scenario.arm("mps"), CLASSES, 2, 0)
        result["mps_failed_start"] = "apply did not fail"
    except ApplyError as exc:
        result["mps_failed_start"] = str(exc)
    result["mps_after_failed_start"] = mps_processes()


def check_time_slicing(tmp: Path, result: dict[str, Any]) -> None:
    servers = {name: {"size": "tiny"} for name in CLASSES}
    arms: list[dict[str, Any]] = [
        {"name": "control", "control": True},
        {"name": "ts", "sharing": "time-slicing", "classes": {
            "llm": {"memory_limit_mib": 4096, "priority": "high"}, "embedding": {"priority": "low"}}},
    ]
    b = backend(tmp, arms, servers)
    arm = b.scenario.arm("ts")
    b.check(arm)
    placement = b.apply(arm, CLASSES, 3, 0)
    result["ts_placement"] = placement.to_json()
    result["ts_ready_s"] = wait_ready(placement, CLASSES)
    result["ts_server_lines"] = {
        name: [line for line in Path(placement.classes[name].log or "").read_text().splitlines()
               if line.startswith(("bench-server", "#"))] for name in CLASSES}
    b.release()
    for priority in ("high", "low"):
        out = tmp / f"flags-{priority}.json"
        done = subprocess.run([sys.executable, "-c", FLAGS_PROBE, str(out), priority], cwd=ROOT, capture_output=True,
                              text=True, timeout=300, check=False, env={**os.environ, "PYTHONPATH": str(ROOT)})
        result[f"flags_probe_{priority}"] = json.loads(out.read_text()) if out.exists() else done.stderr[-2000:]
        result[f"flags_probe_{priority}_stdout"] = done.stdout.strip().splitlines()


def main() -> int:
    out_path = Path(sys.argv[1])
    result: dict[str, Any] = {"modes_before": gpu_modes(), "mps_processes_before": mps_processes()}
    tmp = Path(tempfile.mkdtemp(prefix="device-check-"))
    b = backend(tmp, [{"name": "control", "control": True}, {"name": "mig", "sharing": "mig"}], {})
    result["devices"] = b.describe().model_dump(mode="json")
    try:
        b.check(b.scenario.arm("mig"))
        result["mig_check"] = "accepted"
    except ApplyError as exc:
        result["mig_check"] = str(exc)
    for step in (check_mps, check_mps_failed_server, check_time_slicing):
        folder = tmp / step.__name__
        folder.mkdir()
        try:
            step(folder, result)
        except Exception:
            result[f"{step.__name__}_error"] = traceback.format_exc()
        out_path.write_text(json.dumps(result, indent=2, default=str))
    result["modes_after"] = gpu_modes()
    result["mps_processes_at_end"] = mps_processes()
    out_path.write_text(json.dumps(result, indent=2, default=str))
    print(json.dumps(result, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
