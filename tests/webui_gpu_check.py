"""GPU-host check of the live view: a master with one worker, reference servers on the GPU, GPU figures per class.

    PYTHONPATH=. python3 tests/webui_gpu_check.py OUTDIR

Runs scenarios/short.yaml (tiny models, arm ``shared``: all three servers on one GPU) behind Locust's
web UI with --autostart, as a master with one real worker, and polls /bench/live.json twice a second
until the campaign ends. It checks that the campaign completed, that while stages ran every class
showed requests in the live window and its GPU utilisation and VRAM (from NVML on this host), and that
the GPU's settings were left as found. A report goes to OUTDIR/webui_gpu_check.json; it exits 1 on a
failed check. The CPU machines cannot run this part (no NVML); test_webui.py holds the rest there.
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
import yaml

ROOT = Path(__file__).resolve().parent.parent


def settings() -> str:
    return subprocess.run(["nvidia-smi", "--query-gpu=index,uuid,compute_mode,mig.mode.current,persistence_mode",
                           "--format=csv,noheader"], capture_output=True, text=True, check=False).stdout.strip()


def main(out: Path) -> int:
    out.mkdir(parents=True, exist_ok=True)
    data = yaml.safe_load((ROOT / "scenarios" / "short.yaml").read_text())
    data["repeats"] = 1
    for stage in data["stages"]:
        stage["duration_s"] = 8
    scenario = out / "scenario.yaml"
    scenario.write_text(yaml.safe_dump(data, sort_keys=False))
    results, web, master_port = Path("/tmp/webui-gpu-check"), 18089, 15557
    subprocess.run(["rm", "-rf", str(results)], check=False)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    locust = [sys.executable, "-m", "locust", "-f", "locustfiles/mixed.py"]
    before = settings()
    with open(out / "master.log", "wb") as mlog, open(out / "worker.log", "wb") as wlog:
        master = subprocess.Popen([*locust, "--master", "--master-bind-host", "127.0.0.1", "--master-bind-port",
                                   str(master_port), "--expect-workers", "1", "--autostart", "--autoquit", "5",
                                   "--web-host", "127.0.0.1", "--web-port", str(web), "--scenario", str(scenario),
                                   "--arm", "shared", "--results-dir", str(results)], cwd=ROOT, env=env,
                                  stdout=mlog, stderr=subprocess.STDOUT)
        worker = subprocess.Popen([*locust, "--worker", "--master-host", "127.0.0.1", "--master-port",
                                   str(master_port)], cwd=ROOT, env=env, stdout=wlog, stderr=subprocess.STDOUT)
        snapshots: list[dict[str, Any]] = []
        deadline = time.time() + 420
        while time.time() < deadline and master.poll() is None:
            try:
                snap = requests.get(f"http://127.0.0.1:{web}/bench/live.json", timeout=5).json()
                snapshots.append(snap)
                if snap["status"] not in ("waiting", "running"):
                    break
            except requests.RequestException:
                pass
            time.sleep(0.5)
        for proc in (master, worker):
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
    after = settings()
    running = [s for s in snapshots if s["status"] == "running" and s["position"].get("stage")]
    seen: dict[str, dict[str, float]] = {}
    for snap in running:
        for row in snap["classes"]:
            if row["window"]["requests"] and row["gpu_util"] is not None and row["vram_mib"] is not None:
                best = seen.setdefault(row["name"], {"gpu_util_max": 0.0, "vram_mib_max": 0.0})
                best["gpu_util_max"] = max(best["gpu_util_max"], row["gpu_util"])
                best["vram_mib_max"] = max(best["vram_mib_max"], row["vram_mib"])
    summary = json.loads((results / "summary.json").read_text()) if (results / "summary.json").exists() else {}
    report = {
        "status": (summary.get("status") or {}).get("status"), "master_exit": master.returncode,
        "worker_exit": worker.returncode, "snapshots": len(snapshots), "running_snapshots": len(running),
        "per_class": seen, "gpu_before": before, "gpu_after": after,
        "last_running": running[-1] if running else None,
    }
    problems = []
    if report["status"] != "completed":
        problems.append(f"campaign status {report['status']}")
    for name in ("llm", "embedding", "asr"):
        if name not in seen:
            problems.append(f"{name}: no live snapshot with requests, GPU utilisation and VRAM")
    if before != after:
        problems.append(f"GPU settings changed: {before!r} -> {after!r}")
    report["problems"] = problems
    (out / "webui_gpu_check.json").write_text(json.dumps(report, indent=2))
    print(json.dumps({k: v for k, v in report.items() if k != "last_running"}, indent=2))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/webui-gpu-check-out")))
