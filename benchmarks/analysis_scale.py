"""Benchmark: analyse a campaign of N stored samples and write every report.

    python benchmarks/analysis_scale.py [--samples 1000000] [--dir /tmp/bench-analysis]

Builds a results store shaped like a real campaign (3 arms x 3 repeats x 3 stages x 3 classes, the
exclusive control measured alone in turn) with N samples whose latencies grow with the load and the
sharing, then times, in one process: writing the store, the summary (summary.json, summary.md, with
the comparison), and the report (report.html, report.md). Prints one JSON line with the timings and
the machine, so results in docs/benchmarks.md can be rerun as they were taken.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import time
from pathlib import Path

import numpy as np

from bench_plugin.report.html import write_report
from bench_plugin.report.outputs import write_summaries
from bench_plugin.results.placement import ClassPlacement, Placement
from bench_plugin.results.recorder import Recorder
from bench_plugin.results.samples import Sample
from bench_plugin.scenario import Arm
from bench_plugin.sharing.devices import cpu_model

CLASSES = ("llm", "embedding", "asr")
ARMS = (("exclusive", "exclusive"), ("time-slicing", "time-slicing"), ("mps", "mps"))
STAGES = ({"llm": 2.0, "embedding": 8.0, "asr": 2.0}, {"llm": 4.0, "embedding": 16.0, "asr": 4.0},
          {"llm": 8.0, "embedding": 32.0, "asr": 8.0})
SLO = {"llm": {"p95_ms": 2000.0, "ttft_p95_ms": 500.0, "tpot_p95_ms": 50.0},
       "embedding": {"p95_ms": 300.0}, "asr": {"p95_ms": 1500.0}}
BASE_MS = {"llm": 600.0, "embedding": 60.0, "asr": 400.0}


def scenario_meta() -> dict[str, object]:
    arms = [{"name": name, "control": name == "exclusive", "sharing": sharing, "classes": {}}
            for name, sharing in ARMS]
    classes = {name: {"model": f"bench-{name}", "slo": SLO[name], "error_budget": 0.01} for name in CLASSES}
    stages = [{"duration_s": 20.0, "load": load, "name": f"s{i}"} for i, load in enumerate(STAGES)]
    return {"name": "bench-analysis", "path": "benchmarks/analysis_scale.py", "sha256": "0" * 64,
            "resolved": {"name": "bench-analysis", "classes": classes, "arms": arms, "stages": stages}}


def build_store(directory: Path, n_samples: int, seed: int = 0) -> None:
    """Write a results.sqlite with about ``n_samples`` samples."""
    rng = np.random.default_rng(seed)
    rec = Recorder(directory / "results.sqlite")
    rec.set_meta("scenario", scenario_meta())
    rec.set_meta("classes", list(CLASSES))
    rec.set_meta("conditions", {"backend": {"backend": "local", "devices": [{"name": "cpu", "model": "bench"}]}})
    rec.set_meta("request_sets", {n: {"workload": n, "count": 64, "sha256": "0" * 64, "source": "bench"}
                                  for n in CLASSES})
    per_stage = n_samples // (len(ARMS) * 3 * len(STAGES) * len(CLASSES))
    trial, t0 = 0, 1_800_000_000.0
    for repeat in (1, 2, 3):
        for arm_index, (arm, sharing) in enumerate(ARMS):
            trial += 1
            rec.add_trial(trial, trial - 1, Arm.model_validate({"name": arm, "control": arm == "exclusive",
                                                                 "sharing": sharing}), repeat)
            rec.trial_started(trial)
            segments = [[c] for c in CLASSES] if sharing == "exclusive" else [list(CLASSES)]
            for seg, classes in enumerate(segments):
                rec.segment_applied(trial, seg, classes, Placement(
                    {c: ClassPlacement(url="http://127.0.0.1:1", device="cpu") for c in classes}))
                for index, load in enumerate(STAGES):
                    start = t0
                    rec.stage_started(trial, seg, index, f"s{index}", {c: load[c] for c in classes},
                                      {c: "poisson" for c in classes}, start)
                    for name in classes:
                        rec.add_samples(_samples(rng, name, trial, seg, index, start, per_stage, arm_index))
                    t0 += 20.0
                    rec.stage_ended(trial, seg, index, start + 20.0, "completed")
            rec.trial_ended(trial, "completed")
    rec.set_meta("status", {"status": "completed", "reason": None, "ended_s": t0})
    rec.close()


def _samples(rng: np.random.Generator, name: str, trial: int, seg: int, stage: int, start: float, n: int,
             arm_index: int) -> list[Sample]:
    intended = start + np.sort(rng.uniform(0, 20.0, n))
    latency = rng.lognormal(np.log(BASE_MS[name] * (1 + 0.4 * stage) * (1 + 0.3 * arm_index)), 0.35, n) / 1000
    ok = rng.random(n) > 0.002
    out = []
    for k in range(n):
        end = float(intended[k] + latency[k])
        first = float(intended[k] + latency[k] * 0.2) if name == "llm" else None
        out.append(Sample(name, trial, seg, stage, k, k % 64, float(intended[k]), float(intended[k]) + 1e-4, end,
                          bool(ok[k]), first_token_s=first, error=None if ok[k] else "http_503",
                          output_tokens=32 if name == "llm" else None, inputs=8 if name == "embedding" else None,
                          audio_s=4.0 if name == "asr" else None))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=1_000_000)
    parser.add_argument("--dir", default="/tmp/bench-analysis")
    args = parser.parse_args()
    directory = Path(args.dir)
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    t = time.perf_counter()
    build_store(directory, args.samples)
    store_s = time.perf_counter() - t
    t = time.perf_counter()
    write_summaries(directory)
    summary_s = time.perf_counter() - t
    t = time.perf_counter()
    write_report(directory)
    report_s = time.perf_counter() - t
    print(json.dumps({
        "samples": args.samples, "store_s": round(store_s, 2), "summary_s": round(summary_s, 2),
        "report_s": round(report_s, 2), "analysis_and_report_s": round(summary_s + report_s, 2),
        "report_html_bytes": (directory / "report.html").stat().st_size,
        "machine": {"cpu": cpu_model(), "cores": os.cpu_count(), "python": platform.python_version()},
    }))


if __name__ == "__main__":
    main()
