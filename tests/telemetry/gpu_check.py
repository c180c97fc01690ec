"""GPU-host check of the NVML sampler, the exporter and the scraper: the only place NVML calls really run.

    PYTHONPATH=. python3 tests/telemetry/gpu_check.py OUTDIR

It starts a stand-in "server" process whose CHILD holds GPU memory and runs matmuls (so attribution has
to walk the parent chain, as it must for servers that spawn engine processes), samples every GPU at
5 Hz for a few seconds, and checks: the rate reached, which DCGM series NVML gave, per-process memory
attributed to the server's class, per-process SM samples, and the duration of one poll. It records a
few readings as a test fixture (OUTDIR/h200_readings.json), then runs the exporter CLI, scrapes it with
DcgmScraper and checks that the scrape gives back the sampler's series. A report goes to
OUTDIR/gpu_check.json. test_gpu.py runs the same check under pytest where NVML is available.
Needs torch on the GPU host; changes no GPU setting.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import requests

from bench_plugin.telemetry import fields as F
from bench_plugin.telemetry.dcgm import DcgmScraper
from bench_plugin.telemetry.nvml import NvmlSampler

_CHILD = """
import time, torch
x = torch.randn(8192, 8192, device="cuda")
hold = torch.empty(2 * 1024**3, dtype=torch.uint8, device="cuda")
end = time.time() + float(__import__("sys").argv[1])
while time.time() < end:
    y = x @ x
    torch.cuda.synchronize()
"""
_SERVER = "import subprocess, sys; sys.exit(subprocess.call([sys.executable, '-c', sys.argv[1], sys.argv[2]]))"


def _wait_for_process(sampler: NvmlSampler, server_pid: int, timeout_s: float = 90) -> str | None:
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        sampler.read()
        for pid, workload in sampler.process_classes().items():
            if workload == "llm" and int(pid) != server_pid:
                return pid
        time.sleep(0.5)
    return None


def _exporter_roundtrip(out: Path, sampler_metrics: set[str], report: dict[str, Any]) -> None:
    port = 19400
    cmd = [sys.executable, "-m", "bench_plugin.telemetry.exporter", "--port", str(port), "--interval", "0.5"]
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.time() + 20
        while time.time() < deadline:
            try:
                if requests.get(f"{url}/health", timeout=1).ok:
                    break
            except requests.RequestException:
                time.sleep(0.2)
        time.sleep(1.5)  # two polls, so per-process samples have come in
        text = requests.get(f"{url}/metrics", timeout=5).text
        (out / "metrics.txt").write_text(text)
        scraper = DcgmScraper(f"{url}/metrics", interval_s=0.25)
        report["scraper_available"] = str(scraper.start())
        time.sleep(1.0)
        scraper.stop()
        scraped = {row.metric for row in scraper.drain()}
        report["scraper_polls"] = scraper.polls
        report["scraped_metrics"] = sorted(scraped)
        report["sampler_metrics_not_scraped"] = sorted(sampler_metrics - scraped)
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=10)
        report["exporter_stderr"] = err.strip().splitlines()
        report["exporter_rc"] = proc.returncode
    bad = subprocess.run([*cmd[:3], "--devices", "cuda:99"], capture_output=True, text=True, timeout=60)
    report["exporter_bad_device"] = {"rc": bad.returncode, "stderr": bad.stderr.strip().splitlines()}


def run_check(out: Path, seconds: float = 4.0) -> dict[str, Any]:
    """Run the whole check; returns the report (also written to out/gpu_check.json) with 'failures'."""
    out.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {"failures": []}
    fail = report["failures"].append
    sampler = NvmlSampler(interval_s=0.2)
    availability = sampler.available()
    report["available"] = str(availability)
    if not availability:
        fail(f"NVML not available: {availability.reason}")
        return report
    server = subprocess.Popen([sys.executable, "-c", _SERVER, _CHILD, str(seconds + 120)])
    try:
        sampler.set_pids({server.pid: "llm"})
        assert sampler.start()
        report["devices"] = [_info_json(info) for info in sampler.devices_info()]
        report["driver_version"] = sampler.driver_version
        worker = _wait_for_process(sampler, server.pid)
        report["worker_pid"], report["server_pid"] = worker, server.pid
        if worker is None:
            fail("the server's child never showed up as an 'llm' GPU process")
        sampler.drain()
        t0 = time.time()
        time.sleep(seconds)
        rows = sampler.drain()
        elapsed = time.time() - t0
        polls = sorted({r.t for r in rows if r.device == "cuda:0" and r.process is None})
        report["poll_rate_hz"] = round(len(polls) / elapsed, 2)
        report["overruns"] = sampler.overruns
        report["problems"] = sampler.problems()
        metrics = {r.metric for r in rows}
        report["metrics"] = sorted(metrics)
        report["device_metrics_missing"] = sorted(set(F.FIELDS) - F.PROCESS_METRICS - metrics)
        report["process_classes"] = sampler.process_classes()
        mem = [r.value for r in rows if r.metric == F.PROCESS_MEMORY and r.process == worker]
        sm = [r.value for r in rows if r.metric == F.PROCESS_SM_UTIL and r.process == worker]
        util = [r.value for r in rows if r.metric == F.GPU_UTIL]
        report["worker_memory_mib"] = [min(mem), max(mem)] if mem else None
        report["worker_sm_util_samples"] = len(sm)
        report["worker_sm_util_mean"] = round(sum(sm) / len(sm), 1) if sm else None
        report["gpu_util_max"] = max(util) if util else None
        if report["poll_rate_hz"] < 4:
            fail(f"polled at {report['poll_rate_hz']} Hz, under 4 Hz")
        if not mem or max(mem) < 2048:
            fail(f"worker's process memory rows missing or under 2 GiB: {report['worker_memory_mib']}")
        if not util or max(util) == 0:
            fail("GPU utilisation never above 0 under a matmul loop")
        durations = []
        readings = []
        for _ in range(5):
            start = time.perf_counter()
            readings.extend(sampler.read())
            durations.append((time.perf_counter() - start) * 1000)
            time.sleep(0.2)
        report["poll_ms"] = {"mean": round(sum(durations) / len(durations), 2), "max": round(max(durations), 2)}
        fixture = {
            "recorded_on": os.uname().nodename,
            "driver_version": sampler.driver_version,
            "devices": [_info_json(info) for info in sampler.devices_info()],
            "process_classes": sampler.process_classes(),
            "readings": [r.to_json() for r in readings],
        }
        (out / "h200_readings.json").write_text(json.dumps(fixture, indent=1))
        sampler.stop()
        _exporter_roundtrip(out, metrics, report)
        if report["sampler_metrics_not_scraped"]:
            fail(f"exporter lost series: {report['sampler_metrics_not_scraped']}")
        if report["exporter_bad_device"]["rc"] != 2:
            fail(f"exporter with a missing device: {report['exporter_bad_device']}")
    finally:
        sampler.stop()
        server.kill()
        server.wait()
    (out / "gpu_check.json").write_text(json.dumps(report, indent=1, default=str))
    return report


def _info_json(info: Any) -> dict[str, Any]:
    return {name: getattr(info, name) for name in info.__slots__}


if __name__ == "__main__":
    result = run_check(Path(sys.argv[1] if len(sys.argv) > 1 else "gpu_check_out"))
    print(json.dumps(result, indent=1, default=str))
    sys.exit(1 if result["failures"] else 0)
