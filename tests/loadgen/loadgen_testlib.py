"""Helpers for the distributed tests: run a campaign on a real master with real workers, read its counts."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import time
import wave
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import harness
import numpy as np
import yaml
from harness import ROOT, run_locust, start_locust, start_worker, stop_process

from bench_plugin.loadgen.arrivals import arrival_count
from bench_plugin.results.store import CampaignReader, StoreError, open_campaign
from bench_plugin.sharing.processes import free_port

SCENARIO = ROOT / "scenarios" / "distributed.yaml"
SEED = 3
"""The seed of scenarios/distributed.yaml."""

SYNTHETIC_FLAGS = ["--ttft-ms", "40", "--itl-ms", "8", "--latency-ms", "25", "--slow-fraction", "0.2",
                   "--slow-extra-ms", "150", "--slow-by", "content", "--seed", "5"]
"""One synthetic server for every class (the manual backend): the scenario's llm and embedding latencies."""


def small_clips_scenario(directory: Path) -> Path:
    """scenarios/distributed.yaml with 20 short ASR clips (0.4-1.0 s, 8 kHz) written under ``directory``.

    The packaged clips are 100-420 kB; their upload and decoding add milliseconds of host noise that
    differ between runs. Short clips keep the comparison of one process with N workers about the
    load generators, not about copying audio on a busy machine. The servers pick slow requests by
    content (for ASR: the clip's name): with these names, seed 4 (the scenario's asr server) makes 4
    of the 20 clips slow and seed 5 (SYNTHETIC_FLAGS) 4, near the scenario's 20%.
    """
    clips = directory / "clips"
    clips.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    for i in range(20):
        seconds = (0.4, 0.6, 0.8, 1.0)[i % 4]
        with wave.open(str(clips / f"clip-{i:02d}.wav"), "wb") as wav:
            wav.setnchannels(1)
            wav.setsampwidth(2)
            wav.setframerate(8000)
            wav.writeframes((rng.standard_normal(int(8000 * seconds)) * 3000).astype("<i2").tobytes())
    data = yaml.safe_load(SCENARIO.read_text())
    data["classes"]["asr"]["requests"] = {"clips": str(clips)}
    for name, spec in data["classes"].items():  # each server logs its own timings, by X-Request-Id
        spec["server"]["command"] += ["--timing-log", f"{{log_dir}}/synthetic-{name}.jsonl"]
    path = directory / "distributed.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@dataclass
class Run:
    """One finished campaign: the master's exit and output, each worker's exit, the results."""

    returncode: int
    output: str
    worker_codes: list[int]
    results: Path
    worker_logs: list[Path] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        return json.loads((self.results / "summary.json").read_text())

    def reader(self) -> AbstractContextManager[CampaignReader]:
        """The package's reader of the results store (read-only), closed when the ``with`` block ends."""
        return open_campaign(self.results / "results.sqlite")


def master_args(port: int, workers: int) -> list[str]:
    return ["--master", "--master-bind-host", "127.0.0.1", "--master-bind-port", str(port),
            "--expect-workers", str(workers), "--expect-workers-max-wait", "60"]


def campaign(tmp_path: Path, workers: int, *args: str, scenario: Path = SCENARIO) -> Run:
    """The scenario on one process (``workers=0``) or on a master with ``workers`` real workers."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    results = tmp_path / "results"
    base = ["-f", "locustfiles/mixed.py", "--scenario", str(scenario), "--results-dir", str(results), *args]
    if workers == 0:
        done = run_locust(base, timeout=180)
        return Run(done.returncode, done.stdout, [], results)
    port = free_port()
    logs = [tmp_path / f"worker{i}.log" for i in range(workers)]
    procs = [start_worker(port, log) for log in logs]
    try:
        done = run_locust([*base, *master_args(port, workers)], timeout=180)
    finally:
        codes = [stop_process(p) for p in procs]
    return Run(done.returncode, done.stdout, codes, results, logs)


@contextmanager
def background_master(tmp_path: Path, workers: int, *args: str, scenario: Path = SCENARIO
                      ) -> Iterator[tuple[subprocess.Popen[bytes], int, Path, Path]]:
    """A master running in the background: (process, its port, results dir, its log)."""
    port, results, log = free_port(), tmp_path / "results", tmp_path / "master.log"
    proc = start_locust(["-f", "locustfiles/mixed.py", "--scenario", str(scenario), "--results-dir", str(results),
                         *master_args(port, workers), *args], log)
    try:
        yield proc, port, results, log
    finally:
        stop_process(proc, timeout=120)


def wait_for(condition: Any, what: str, timeout: float = 90) -> None:
    """Poll ``condition()`` until it is true; fail naming ``what`` after ``timeout`` s."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def stage_running(results: Path, stage: int) -> bool:
    """Whether the campaign under ``results`` has stage ``stage`` of trial 1 running."""
    path = results / "results.sqlite"
    if not path.exists():
        return False
    try:
        with open_campaign(path) as reader:
            trials = reader.trials()
    except (StoreError, sqlite3.OperationalError):  # the store is still being created
        return False
    return any(t.id == 1 and s.index == stage and s.status == "running" for t in trials for s in t.stages)


def seeded_counts(run: Run) -> dict[tuple[int, str], int]:
    """(stage, class) -> round(rate * duration): the arrivals a stage of the scenario must send, exactly."""
    out = {}
    with run.reader() as reader:
        (trial,) = (t for t in reader.trials() if t.id == 1)
    for stage in trial.stages:
        assert stage.planned_s is not None, stage
        for name, rate in stage.offered.items():
            out[(stage.index, name)] = arrival_count(rate, stage.planned_s)
    return out


def sent_arrivals(run: Run) -> dict[tuple[int, str], list[int]]:
    """(stage, class) -> the arrival numbers of the samples recorded, sorted (repeats kept)."""
    out: dict[tuple[int, str], list[int]] = {}
    with run.reader() as reader:
        samples = reader.samples(1)
    for sample in sorted(samples, key=lambda s: s.seq):
        out.setdefault((sample.stage, sample.workload), []).append(sample.seq)
    return out


def workers_of(run: Run, stage: int) -> dict[str, set[str]]:
    """Class -> the workers whose samples stage ``stage`` holds."""
    out: dict[str, set[str]] = {}
    with run.reader() as reader:
        samples = reader.samples(1)
    for sample in samples:
        if sample.stage == stage:
            out.setdefault(sample.workload, set()).add(sample.worker)
    return out


def server_records(*logs: Path) -> dict[str, dict[str, Any]]:
    """X-Request-Id -> the synthetic server's own record of that request, from its timing logs."""
    out = {}
    for log in logs:
        for line in log.read_text().splitlines():
            record = json.loads(line)
            if record.get("request_id"):
                out[record["request_id"]] = record
    return out


def accounting(run: Run) -> list[dict[str, Any]]:
    """The stage_accounting events of the campaign, in order."""
    with run.reader() as reader:
        return [event.detail for event in reader.events("stage_accounting")]


@contextmanager
def synthetic_server(log: Path, timing_log: Path | None = None) -> Iterator[str]:
    """One synthetic server (SYNTHETIC_FLAGS) for every class, as a user's own server would be: its base URL."""
    timing = ["--timing-log", str(timing_log)] if timing_log else []
    with harness.synthetic_server(log, *SYNTHETIC_FLAGS, *timing) as url:
        yield url
