"""How benchmarks/loadgen_capacity.py runs things: the cores, and the plugin's and bare Locust's processes.

The null server, the plugin's master and this script run on the server cores; every load generator
measured runs elsewhere. One plugin process (a worker) and bare Locust take turns on one core, the
sender core; the default command (the plugin sizing its own processes) gets every core but the
server's. ``Bench`` starts each of them through one ``Processes`` (every one stopped on any exit) and
has the CPU of each, and of every other program on the host, sampled from /proc (``CpuSampler``).
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loadgen_nullserver import free_port
from loadgen_procs import ROOT, CpuSampler, Processes
from loadgen_workloads import ARM, Workload

LOCUST = [sys.executable, "-m", "locust"]
"""Locust, as this interpreter finds it (on PYTHONPATH too: the GPU host installs it into /tmp/site)."""
LOCUSTFILE = "benchmarks/loadgen_locustfile.py"
"""locustfiles/mixed.py's users plus a GC log (the CPU rounds and the searches)."""
DEFAULT_LOCUSTFILE = "locustfiles/mixed.py"
"""What the default command runs, as a user runs it."""


def cpu_list(cores: list[int]) -> str:
    """``[0, 1, 2, 5]`` -> ``"0-2,5"`` (taskset's form)."""
    parts, run = [], [cores[0]]
    for core in cores[1:]:
        if core == run[-1] + 1:
            run.append(core)
        else:
            parts.append(run)
            run = [core]
    parts.append(run)
    return ",".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else str(r[0]) for r in parts)


@dataclass(frozen=True)
class Layout:
    """Which cores run what."""

    server: list[int]
    """The null server, the plugin's master, this script."""
    rest: list[int]
    """Every other core: the default command's; the first of them is the sender core."""

    @classmethod
    def of(cls, cores: list[int], server: int | None) -> Layout:
        """Split ``cores`` (this process's, sorted): ``server`` cores (default: a quarter, at least one) first."""
        if len(cores) < 2:
            raise RuntimeError(f"needs at least 2 cores (the null server apart from the load generator); have {cores}")
        n = server if server is not None else max(1, len(cores) // 4)
        if not 1 <= n < len(cores):
            raise RuntimeError(f"--server-cores {n}: between 1 and {len(cores) - 1} on this host")
        return cls(cores[:n], cores[n:])

    @property
    def sender(self) -> str:
        """The core of the one plugin process measured, and of bare Locust."""
        return str(self.rest[0])

    def to_dict(self) -> dict[str, str]:
        """JSON-ready, as taskset lists."""
        return {"null server, master, harness": cpu_list(self.server), "one process measured": self.sender,
                "default command": cpu_list(self.rest)}


@dataclass
class Plugin:
    """A running campaign of the plugin: a master and its workers."""

    name: str
    results: Path
    gc_dir: Path
    master: subprocess.Popen[bytes]
    workers: list[subprocess.Popen[bytes]]


class Bench:
    """One benchmark run: where the null server listens, the layout, the processes and their CPU."""

    def __init__(self, procs: Processes, sampler: CpuSampler, url: str, out: Path, layout: Layout,
                 bare_arrivals: str = "poisson", variant: str | None = None) -> None:
        self.procs = procs
        self.sampler = sampler
        self.url = url
        self.out = out
        self.layout = layout
        self.bare_arrivals = bare_arrivals
        """When bare Locust's users send (loadgen_bare.py's BARE_ARRIVALS)."""
        self.variant = variant
        """What the plugin's processes change in how they send (loadgen_locustfile.py's BENCH_VARIANT)."""

    def other_work(self, start_s: float, end_s: float) -> tuple[float | None, float | None]:
        """(other programs' cores, anywhere on the host; the hypervisor's steal of the benchmark's cores) between
        ``start_s`` and ``end_s`` (CpuSampler.other, steal)."""
        return (self.sampler.other(start_s, end_s),
                self.sampler.steal([*self.layout.server, *self.layout.rest], start_s, end_s))

    def plugin(self, name: str, scenario: Path) -> Plugin:
        """Start the campaign of ``scenario``: a master on the server cores, one worker on the sender core."""
        results, gc_dir, port = self.out / name, self.out / f"{name}-gc", free_port()
        gc_dir.mkdir()
        env = {"BENCH_GC_DIR": str(gc_dir), **({"BENCH_VARIANT": self.variant} if self.variant else {})}
        server = cpu_list(self.layout.server)
        master = self.procs.start(f"{name}-master", [
            *LOCUST, "--headless", "--only-summary", "-f", LOCUSTFILE, "--scenario", str(scenario), "--results-dir",
            str(results), "--no-report", "--host", self.url, "--arm", ARM, "--master", "--master-bind-host",
            "127.0.0.1", "--master-bind-port", str(port), "--expect-workers", "1", "--expect-workers-max-wait",
            "30"], server, env)
        worker = self.procs.start(f"{name}-worker", [
            *LOCUST, "-f", LOCUSTFILE, "--worker", "--master-host", "127.0.0.1", "--master-port", str(port)],
            self.layout.sender, env)
        self.sampler.watch(worker.pid)
        return Plugin(name, results, gc_dir, master, [worker])

    def finish(self, run: Plugin, timeout_s: float) -> list[dict[str, Any]]:
        """Wait for ``run`` to end; the GC log of each of its processes. RuntimeError if it failed (every
        process of it stopped)."""
        try:
            code = self.procs.wait(run.master, timeout_s)
            for proc in run.workers:
                self.procs.wait(proc, 30)
        finally:
            self.stop(run)
        if code != 0:
            raise RuntimeError(f"campaign {run.name} exited {code}: {self.procs.last_line(run.master)}")
        gc = [json.loads(p.read_text()) for p in sorted(run.gc_dir.glob("gc-*.json"))]
        elsewhere = {g["bench_plugin"] for g in gc if not g["bench_plugin"].startswith(str(ROOT))}
        if len(gc) != len(run.workers) + 1 or elsewhere:
            raise RuntimeError(f"campaign {run.name}: {len(gc)} of {len(run.workers) + 1} GC logs; bench_plugin "
                               f"from {sorted(elsewhere) or 'here'}")
        return gc

    def stop(self, run: Plugin) -> None:
        """Stop whatever of ``run`` still runs (after a failure: nothing of it may load the next measurement)."""
        for proc in [*run.workers, run.master]:
            self.procs.stop(proc)

    def wait_stage(self, run: Plugin, stage: int, timeout_s: float = 60.0) -> tuple[float, float]:
        """(start, planned seconds) of ``stage`` of trial 1, as soon as the master has announced it."""
        deadline = time.time() + timeout_s
        path = run.results / "results.sqlite"
        while time.time() < deadline:
            if run.master.poll() is not None:
                raise RuntimeError(f"campaign {run.name} exited {run.master.returncode} before stage {stage}: "
                                   f"{self.procs.last_line(run.master)}")
            row = None
            if path.exists():
                try:
                    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1)) as db:
                        row = db.execute("SELECT started_s, planned_s, status, reason FROM stages WHERE trial=1 "
                                         "AND stage=?", (stage,)).fetchone()
                except sqlite3.OperationalError:  # the store or its tables are not there yet
                    row = None
            if row is not None and row[0] is not None:
                return float(row[0]), float(row[1])
            if row is not None and row[2] == "skipped":
                raise RuntimeError(f"campaign {run.name}: stage {stage} was skipped ({row[3]})")
            time.sleep(0.02)
        raise RuntimeError(f"campaign {run.name}: stage {stage} did not start within {timeout_s:g} s")

    def bare(self, name: str, w: Workload, rate: float, scenario: Path) -> tuple[subprocess.Popen[bytes], Path]:
        """Start bare Locust for ``w`` at ``rate`` on the sender core, its users held (loadgen_bare.py); the
        process and the directory its rounds' records go to."""
        rounds = self.out / f"{name}-rounds"
        rounds.mkdir()
        users = w.bare_users(rate)
        env = {"BARE_SCENARIO": str(scenario), "BARE_RATE": str(rate), "BARE_USERS": str(users),
               "BARE_DIR": str(rounds), "BARE_ARRIVALS": self.bare_arrivals}
        proc = self.procs.start(name, [*LOCUST, "--headless", "--only-summary", "-f", "benchmarks/loadgen_bare.py",
                                       "-u", str(users), "-r", str(users), "--host", self.url, w.bare],
                                self.layout.sender, env)
        self.sampler.watch(proc.pid)
        return proc, rounds

    @staticmethod
    def wait_ready(proc: subprocess.Popen[bytes], rounds: Path, timeout_s: float = 60.0) -> None:
        """Return once bare Locust ``proc`` has spawned its users (they wait for their first round)."""
        deadline = time.time() + timeout_s
        while not (rounds / "ready").exists():
            if proc.poll() is not None or time.time() > deadline:
                raise RuntimeError(f"bare Locust did not spawn its users (exit status {proc.poll()})")
            time.sleep(0.05)

    @staticmethod
    def bare_round(proc: subprocess.Popen[bytes], rounds: Path, number: int, seconds: float) -> dict[str, Any]:
        """Let ``proc``'s users send for ``seconds`` (from now); the round's record (loadgen_bare.Round), with
        the epoch times the round was opened and closed."""
        opened = time.time()
        proc.send_signal(signal.SIGUSR2)
        time.sleep(seconds)
        closed = time.time()
        proc.send_signal(signal.SIGUSR1)
        path = rounds / f"round-{number}.json"
        deadline = time.time() + 10
        while not path.exists():
            if proc.poll() is not None or time.time() > deadline:
                raise RuntimeError(f"bare Locust wrote no {path.name} (exit status {proc.poll()})")
            time.sleep(0.02)
        return {**json.loads(path.read_text()), "opened": opened, "closed": closed}

    def default(self, name: str, scenario: Path) -> tuple[subprocess.Popen[bytes], Path]:
        """Start the default command (locustfiles/mixed.py, no --processes) on every core but the server's,
        its whole process tree sampled; the process and its results directory."""
        results = self.out / name
        proc = self.procs.start(name, [
            *LOCUST, "--headless", "--only-summary", "-f", DEFAULT_LOCUSTFILE, "--scenario", str(scenario),
            "--host", self.url, "--arm", ARM, "--results-dir", str(results), "--no-report"],
            cpu_list(self.layout.rest))
        self.sampler.watch_tree(proc.pid)
        return proc, results


def sleep_until(when_s: float) -> None:
    """Return at epoch ``when_s`` (at once if it has passed)."""
    time.sleep(max(0.0, when_s - time.time()))


def own_cores() -> list[int]:
    """The cores this process may run on, sorted."""
    return sorted(os.sched_getaffinity(0))
