"""Benchmark: how close the plugin's load generator comes to bare Locust, against a null server.

    PYTHONPATH=. .venv/bin/python benchmarks/loadgen_capacity.py [--quick] [--out DIR] [--only SEARCH,...]
    PYTHONPATH=. .venv/bin/python benchmarks/loadgen_capacity.py --profile embedding:3000 | bare-embedding

The server is nginx answering fixed, valid OpenAI replies (loadgen_nginx.py) on core SERVER_CORE;
the load generator under test runs alone on core SENDER_CORE. Side by side in one run:

1. bare Locust (loadgen_bare.py): one process of FastHttpUsers posting the plugin's own request in
   a closed loop; its req/s is the reference R_bare, per class (embedding; LLM streaming), taken
   before and (full mode) after the plugin's searches;
2. the plugin's users in one Locust worker (its master, on SERVER_CORE, keeps the results, as in
   a distributed campaign), open-loop Poisson stages at rising rates through the manual backend: a
   coarse sweep from a fraction of R_bare, then a finer one between its last sustained and first
   failed rate, each rate tried twice. A stage is sustained when >= 98% of its offered arrivals
   left within it, send lag P99 < 5 ms and nothing failed (loadgen_stages.py); the ratio is the
   highest sustained rate / R_bare;
3. the same embedding search on the local runner (one process on SENDER_CORE, results kept there
   too), and with two workers: both on SENDER_CORE (splitting, at equal CPU), and one on each core
   (the second shares SERVER_CORE with nginx and the master).

Each search reports, per stage, the sending processes' CPU and, from the GC log every process of
loadgen_locustfile.py writes, whether bench_plugin/loadgen/collector.py was in effect in the
sender and how long its collections paused it. ``--profile CLASS:RATE`` instead runs one stage at
RATE and prints py-spy's top functions of the sending worker (loadgen_profile.py); ``--profile
bare-CLASS`` those of bare Locust. Every process started is stopped on any exit; results go to
--out as loadgen_capacity.json and loadgen_capacity.md (what docs/benchmarks.md quotes).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from contextlib import closing
from dataclasses import dataclass, replace
from importlib import metadata
from pathlib import Path
from typing import Any

import loadgen_nginx as nginx
import loadgen_profile
import loadgen_stages as stages
import yaml
from loadgen_procs import ROOT, CpuSampler, Processes, cpu_probe
from loadgen_report import Campaign, Search, bare_stats, markdown

from bench_plugin.scenario import load_scenario

LOCUST = str(Path(sys.executable).parent / "locust")
SERVER_CORE = "0"
"""nginx, the plugin's master and py-spy."""
SENDER_CORE = "1"
"""The load generator measured: bare Locust, or the plugin's worker."""
BATCH = 4
"""Embedding inputs per request."""
CHUNKS = 8
"""Content chunks (tokens) per LLM stream."""
SEED = 7
BARE_USERS = 32
"""Closed-loop users of the bare reference: enough to keep its one core busy (4-64 measured alike)."""


@dataclass(frozen=True)
class Settings:
    """How long and how finely to measure."""

    bare_s: int
    stage_s: float
    coarse_from: float
    """First coarse rate, as a fraction of R_bare."""
    growth: float
    coarse_steps: int
    fine_steps: int
    tries: int
    """Stages per rate (loadgen_stages.sustained: a rate is sustained when one of its tries is)."""
    extra: tuple[str, ...]
    """The embedding searches to run besides one worker (SEARCHES)."""


FULL = Settings(bare_s=10, stage_s=3.0, coarse_from=0.2, growth=1.35, coarse_steps=7, fine_steps=2, tries=2,
                extra=("local", "2w-same", "2w-spread"))
QUICK = Settings(bare_s=5, stage_s=2.0, coarse_from=0.2, growth=1.5, coarse_steps=5, fine_steps=0, tries=2,
                 extra=("2w-spread",))


SEARCHES: dict[str, dict[str, list[str]]] = {
    "embedding": {"1w": [SENDER_CORE], "local": [], "2w-same": [SENDER_CORE, SENDER_CORE],
                  "2w-spread": [SENDER_CORE, SERVER_CORE]},
    "llm": {"1w": [SENDER_CORE]},
}
"""Per class, each search by name and the cores of its workers (one entry per worker; none: the local runner)."""


def scenario(workload: str, rates: Sequence[float], stage_s: float, tries: int = 1) -> dict[str, Any]:
    """A one-class, one-arm scenario for the manual backend with ``tries`` stages per rate.

    The P95 SLO is loose: the rollback (P95 past 10x the SLO) only cuts a stage that is far behind,
    and then skips the higher ones, which saves the time of sweeping past the point.
    """
    spec: dict[str, Any] = {"model": nginx.MODEL, "slo": {"p95_ms": 50}, "request_timeout_s": 10,
                            "max_in_flight": 2048}
    if workload == "embedding":
        spec["requests"] = {"count": 64, "batch_size": BATCH, "input_tokens": 16, "seed": 1}
    else:
        spec.update(api="chat", requests={"count": 64, "input_tokens": 16, "output_tokens": CHUNKS, "seed": 1})
    return {
        "name": f"loadgen-{workload}", "description": "load-generator capacity against a null server",
        "repeats": 1, "seed": SEED, "backend": "manual", "readiness_timeout_s": 20, "drain_timeout_s": 10,
        "classes": {workload: spec}, "arms": [{"name": "null-server", "control": True}],
        "stages": [{"duration_s": stage_s, "load": {workload: round(rate)}} for rate in rates for _ in range(tries)],
    }


def write_scenario(path: Path, data: dict[str, Any]) -> Path:
    """Write ``data`` as YAML, checked by the plugin's own loader."""
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    load_scenario(path)
    return path


class Bench:
    """One benchmark run: the null server's URL, the processes and their CPU, where results go."""

    def __init__(self, procs: Processes, sampler: CpuSampler, url: str, out: Path, settings: Settings) -> None:
        self.procs = procs
        self.sampler = sampler
        self.url = url
        self.out = out
        self.settings = settings

    def bare(self, workload: str, label: str, raw: Path | None = None) -> dict[str, Any]:
        """One bare-Locust run on SENDER_CORE: its req/s and the CPU it used (profiled into ``raw`` if given)."""
        path = write_scenario(self.out / f"bare-{workload}.yaml", scenario(workload, [1], 1))
        stats = self.out / f"bare-{workload}-{label}"
        cls = "BareEmbedding" if workload == "embedding" else "BareLLM"
        cmd = [LOCUST, "--headless", "--only-summary", "-f", "benchmarks/loadgen_bare.py", "-u", str(BARE_USERS),
               "-r", str(BARE_USERS), "-t", f"{self.settings.bare_s}s", "--host", self.url, "--json-file", str(stats),
               cls]
        proc = self.procs.start(f"bare-{workload}-{label}", cmd, SENDER_CORE, env={"BARE_SCENARIO": str(path)})
        self.sampler.watch(proc.pid)
        if raw is not None:
            time.sleep(3.0)  # past its start-up
            self.procs.wait(self.procs.start("py-spy", loadgen_profile.command(proc.pid, self.settings.bare_s - 5, raw),
                                             SERVER_CORE), self.settings.bare_s + 30)
        code = self.procs.wait(proc, self.settings.bare_s + 60)
        if code != 0:
            raise RuntimeError(f"bare Locust ({workload}) exited {code}: {self.procs.last_line(proc)}")
        return bare_stats(json.loads(Path(f"{stats}.json").read_text()), self.sampler, proc.pid)

    def campaign(self, name: str, workload: str, rates: Sequence[float], cores: list[str]) -> Campaign:
        """The plugin's campaign of one stage per rate: on a master and one worker per entry of ``cores``, or,
        with no cores, on Locust's local runner on SENDER_CORE."""
        path = write_scenario(self.out / f"{name}.yaml", scenario(workload, rates, self.settings.stage_s,
                                                                  self.settings.tries))
        results, gc_dir, port = self.out / name, self.out / f"{name}-gc", nginx.free_port()
        gc_dir.mkdir()
        env = {"BENCH_GC_DIR": str(gc_dir)}
        base = [LOCUST, "--headless", "--only-summary", "-f", "benchmarks/loadgen_locustfile.py", "--scenario",
                str(path), "--results-dir", str(results), "--host", self.url]
        if not cores:
            master = self.procs.start(f"{name}-local", base, SENDER_CORE, env)
            senders = [master]
        else:
            master = self.procs.start(f"{name}-master", [
                *base, "--master", "--master-bind-host", "127.0.0.1", "--master-bind-port", str(port),
                "--expect-workers", str(len(cores)), "--expect-workers-max-wait", "30"], SERVER_CORE, env)
            senders = [self.procs.start(f"{name}-worker{i}", [
                LOCUST, "-f", "benchmarks/loadgen_locustfile.py", "--worker", "--master-host", "127.0.0.1",
                "--master-port", str(port)], core, env) for i, core in enumerate(cores)]
        for proc in senders:
            self.sampler.watch(proc.pid)
        started = time.time()
        code = self.procs.wait(master, len(rates) * self.settings.tries * (self.settings.stage_s + 2) + 90)
        for proc in senders:
            self.procs.wait(proc, 30)
        if code != 0:
            raise RuntimeError(f"campaign {name} exited {code}: {self.procs.last_line(master)}")
        gc = [json.loads(p.read_text()) for p in sorted(gc_dir.glob("gc-*.json"))]
        elsewhere = {g["bench_plugin"] for g in gc if not g["bench_plugin"].startswith(str(ROOT))}
        if len(gc) != len(cores) + 1 or elsewhere:
            raise RuntimeError(f"campaign {name}: {len(gc)} of {len(cores) + 1} GC logs; bench_plugin from "
                               f"{sorted(elsewhere) or 'here'}")
        pauses = [(float(t), int(gen), float(ms))
                  for g in gc if g["role"] != "master" for t, gen, ms in g["long_pauses"]]
        judged = stages.judge(results, workload, self.settings.stage_s, [p.pid for p in senders], self.sampler)
        judged = [stages.with_pauses(r, pauses) for r in judged]
        return Campaign(name, cores, judged, gc, time.time() - started)

    def search(self, name: str, workload: str, reference: float, cores: list[str]) -> Search:
        """The highest sustained rate: a coarse sweep from a fraction of ``reference``, then a finer one."""
        s = self.settings
        coarse = [round(reference * s.coarse_from * s.growth**i) for i in range(s.coarse_steps)]
        runs = [self.campaign(f"{name}-coarse", workload, coarse, cores)]
        best, fail = stages.sustained(runs[0].stages), stages.first_failure(runs[0].stages)
        if best is not None and fail is not None and s.fine_steps:
            step = (fail.rate - best.rate) / (s.fine_steps + 1)
            fine = [round(best.rate + step * k) for k in range(1, s.fine_steps + 1)]
            runs.append(self.campaign(f"{name}-fine", workload, fine, cores))
        every = [r for c in runs for r in c.stages]
        return Search(name, workload, cores, runs, stages.sustained(every), stages.first_failure(every))

    def profile(self, what: str) -> str:
        """py-spy's top functions of the process sending ``CLASS:RATE`` (the plugin's worker) or ``bare-CLASS``."""
        raw = self.out / "profile.raw"
        if what.startswith("bare-"):
            found = self.bare(what[5:], "profiled", raw)
            return f"bare Locust, {what[5:]}: {found['rate']:,.0f} req/s\n\n" + loadgen_profile.table(raw)
        workload, rate = what.split(":")
        s = replace(self.settings, stage_s=max(self.settings.stage_s, 8.0))
        path = write_scenario(self.out / "profile.yaml", scenario(workload, [float(rate)], s.stage_s))
        results, port = self.out / "profile", nginx.free_port()
        master = self.procs.start("profile-master", [
            LOCUST, "--headless", "--only-summary", "-f", "benchmarks/loadgen_locustfile.py", "--scenario", str(path),
            "--results-dir", str(results), "--host", self.url, "--master", "--master-bind-host", "127.0.0.1",
            "--master-bind-port", str(port), "--expect-workers", "1"], SERVER_CORE)
        worker = self.procs.start("profile-worker", [LOCUST, "-f", "benchmarks/loadgen_locustfile.py", "--worker",
                                                     "--master-host", "127.0.0.1", "--master-port", str(port)],
                                  SENDER_CORE)
        self.sampler.watch(worker.pid)
        _wait_for_stage(results, master, self.procs, timeout_s=60)
        spy = self.procs.start("py-spy", loadgen_profile.command(worker.pid, s.stage_s - 2, raw), SERVER_CORE)
        self.procs.wait(spy, s.stage_s + 30)
        code = self.procs.wait(master, s.stage_s + 90)
        if code != 0:
            raise RuntimeError(f"profile campaign exited {code}: {self.procs.last_line(master)}")
        judged = stages.judge(results, workload, s.stage_s, [worker.pid], self.sampler)
        head = f"plugin worker, {workload} at {rate}/s: " + (json.dumps(judged[0].to_dict()) if judged else "no stage")
        return head + "\n\n" + loadgen_profile.table(raw)


def _wait_for_stage(results: Path, master: subprocess.Popen[bytes], procs: Processes, timeout_s: float) -> None:
    """Return once stage 0 of the campaign under ``results`` has started (plus a second to settle)."""
    deadline = time.time() + timeout_s
    path = results / "results.sqlite"
    while time.time() < deadline:
        if master.poll() is not None:
            raise RuntimeError(f"the profiled campaign exited {master.returncode}: {procs.last_line(master)}")
        try:
            with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1)) as db:
                row = db.execute("SELECT status FROM stages WHERE trial=1 AND stage=0").fetchone()
        except sqlite3.OperationalError:  # the store or its tables are not there yet
            row = None
        if row is not None:
            time.sleep(1.0)
            return
        time.sleep(0.1)
    raise RuntimeError(f"the profiled stage did not start within {timeout_s:g} s")


def machine() -> dict[str, Any]:
    """Where and with what this run measured."""
    cpu = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                if ln.startswith("model name")), platform.processor())
    version = subprocess.run(["nginx", "-v"], capture_output=True, text=True, check=True).stderr.strip()
    return {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cpu": cpu,
            "cores": len(os.sched_getaffinity(0)), "python": platform.python_version(),
            "locust": metadata.version("locust"), "nginx": version.split("/")[-1], "kernel": platform.release(),
            "pinning": {"nginx, master, py-spy": SERVER_CORE, "load generator under test": SENDER_CORE},
            "probe_s": {"alone": cpu_probe(SENDER_CORE), "other_core_busy": cpu_probe(SENDER_CORE, SERVER_CORE),
                        "alone_again": cpu_probe(SENDER_CORE)}}


def run(args: argparse.Namespace) -> dict[str, Any]:
    """The whole benchmark; its figures, JSON-ready."""
    settings = QUICK if args.quick else FULL
    out = Path(args.out or tempfile.mkdtemp(prefix="loadgen-capacity-"))
    if out.exists() and any(out.iterdir()):
        raise RuntimeError(f"--out {out}: not an empty directory (the campaigns' results would mix)")
    out.mkdir(parents=True, exist_ok=True)
    port = nginx.free_port()
    conf = nginx.write_config(out / "nginx", port, BATCH, CHUNKS)
    url = f"http://127.0.0.1:{port}"
    figures: dict[str, Any] = {"machine": machine(), "mode": "quick" if args.quick else "full",
                               "settings": settings.__dict__, "out": str(out)}
    with Processes(out / "logs") as procs, CpuSampler() as sampler:
        server = procs.start("nginx", nginx.command(conf), SERVER_CORE)
        nginx.wait_healthy(url)
        bench = Bench(procs, sampler, url, out, settings)
        if args.profile:
            figures["profile"] = bench.profile(args.profile)
            return figures
        for workload in ("embedding", "llm"):
            wanted = [name for name in SEARCHES[workload] if (f"{workload}-{name}" in args.only if args.only else
                                                              name == "1w" or name in settings.extra)]
            if not wanted:
                continue
            before = bench.bare(workload, "before")
            figures[workload] = {"bare": [before]}
            for name in wanted:
                figures[workload][name] = bench.search(f"{workload}-{name}", workload, before["rate"],
                                                       SEARCHES[workload][name]).to_dict()
            if not args.quick:
                figures[workload]["bare"].append(bench.bare(workload, "after"))
        if server.poll() is not None:
            raise RuntimeError(f"nginx exited during the run: {procs.last_line(server)}")
    return figures


def main() -> None:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="shorter runs and a coarser search (1-2 minutes)")
    parser.add_argument("--out", help="directory for results (default: a new temporary directory)")
    parser.add_argument("--profile", metavar="CLASS:RATE|bare-CLASS",
                        help="instead, py-spy the plugin's worker at one rate, or bare Locust")
    parser.add_argument("--only", type=lambda text: text.split(","), metavar="SEARCH,...",
                        help="run only these searches (" + ", ".join(f"{w}-{n}" for w in SEARCHES for n in SEARCHES[w])
                        + ")")
    args = parser.parse_args()
    started = time.time()
    try:
        figures = run(args)
    except (RuntimeError, OSError, subprocess.CalledProcessError) as exc:
        sys.exit(f"loadgen_capacity: error: {exc}")
    figures["seconds"] = round(time.time() - started, 1)
    out = Path(figures["out"])
    (out / "loadgen_capacity.json").write_text(json.dumps(figures, indent=2))
    text = figures["profile"] if "profile" in figures else markdown(figures)
    (out / "loadgen_capacity.md").write_text(text)
    print(text)
    print(f"results in {out} ({figures['seconds']:g} s)")


if __name__ == "__main__":
    main()
