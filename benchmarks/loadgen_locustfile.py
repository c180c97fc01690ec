"""The plugin's locustfile for benchmarks/loadgen_capacity.py: locustfiles/mixed.py's users, plus a GC log.

    BENCH_GC_DIR=DIR locust -f benchmarks/loadgen_locustfile.py --scenario S --host URL ...

The campaign is exactly locustfiles/mixed.py's. With BENCH_GC_DIR set, every process (master,
worker or local runner) also times each of its garbage collections and writes, when it quits,
``DIR/gc-<pid>.json``: its role, the collector's thresholds and frozen-object count at that time
(bench_plugin/loadgen/collector.py must have run in the process that sends) and, per generation,
the number of collections and their longest and total pause, plus the epoch time of every pause
of at least LONG_MS (so the benchmark can tell which stage each fell in). Timing a collection
costs two clock reads, against the milliseconds a full collection takes.

BENCH_VARIANT changes one thing in how the process sends, to measure what that thing costs
(``loadgen_capacity.py --variant``; loadgen_variants.py says what each does). The campaign is otherwise the same.
"""

from __future__ import annotations

import gc
import json
import os
import time
from pathlib import Path
from typing import Any

import loadgen_variants
from locust import events
from locust.env import Environment
from locust.runners import MasterRunner, WorkerRunner

import bench_plugin
from bench_plugin import ASRUser, CampaignShape, EmbeddingUser, LLMUser, add_arguments, register

__all__ = ["ASRUser", "CampaignShape", "EmbeddingUser", "LLMUser"]

LONG_MS = 1.0
"""Pauses this long or longer are listed with their time."""
MAX_LISTED = 2000


class GcLog:
    """Counts and times this process's garbage collections per generation."""

    def __init__(self) -> None:
        self.started: float | None = None
        self.count = [0, 0, 0]
        self.max_ms = [0.0, 0.0, 0.0]
        self.total_ms = [0.0, 0.0, 0.0]
        self.long: list[tuple[float, int, float]] = []
        """(epoch seconds at the end, generation, ms) of each pause of LONG_MS or more."""

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self.started = time.perf_counter()
        elif self.started is not None:
            ms = (time.perf_counter() - self.started) * 1000.0
            gen = int(info["generation"])
            self.count[gen] += 1
            self.max_ms[gen] = max(self.max_ms[gen], ms)
            self.total_ms[gen] += ms
            self.started = None
            if ms >= LONG_MS and len(self.long) < MAX_LISTED:
                self.long.append((time.time(), gen, round(ms, 2)))

    def report(self, role: str) -> dict[str, Any]:
        """What the process saw, JSON-ready."""
        return {"pid": os.getpid(), "role": role, "thresholds": list(gc.get_threshold()),
                "frozen": gc.get_freeze_count(), "collections": self.count,
                "max_pause_ms": [round(v, 2) for v in self.max_ms],
                "total_pause_ms": [round(v, 1) for v in self.total_ms], "long_pauses": self.long,
                "bench_plugin": bench_plugin.__file__}


def _role(environment: Environment) -> str:
    if isinstance(environment.runner, WorkerRunner):
        return "worker"
    return "master" if isinstance(environment.runner, MasterRunner) else "local"


def _on_init(environment: Environment, **_: Any) -> None:
    register(environment)
    if os.environ.get("BENCH_VARIANT"):
        loadgen_variants.apply(os.environ["BENCH_VARIANT"])
    directory = os.environ.get("BENCH_GC_DIR")
    if not directory:
        return
    log = GcLog()
    gc.callbacks.append(log)

    def write(**_: Any) -> None:
        path = Path(directory) / f"gc-{os.getpid()}.json"
        path.write_text(json.dumps(log.report(_role(environment))))

    environment.events.quitting.add_listener(write)


events.init_command_line_parser.add_listener(add_arguments)
events.init.add_listener(_on_init)
