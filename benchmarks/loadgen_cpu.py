"""CPU per request of benchmarks/loadgen_capacity.py: one plugin process against bare Locust at one rate.

Per workload, one campaign of the plugin (a master on the server cores, ONE worker on the sender core,
through the manual backend) alternates idle stages (load 0) with open-loop Poisson stages at rate R; bare
Locust (loadgen_bare.py, on the same core, started before and held between its rounds) sends at the same
rate R during each idle stage, Poisson arrivals as the plugin's (``--bare-arrivals paced``: each user
paced by Locust's constant_throughput, whose users drift into bursts that share the process's wakes; each
window says how bunched its sender's completions were, ``Window.bunched``). So the rounds interleave,
bare, plugin, bare, plugin, ..., in one run, each sender alone on its core while it sends (the other one
idles, and its idle CPU is reported). Each round is measured over a window that leaves its first
``warm_s`` out:

    CPU per request = CPU seconds of the sending process over the window / requests completed in it

(completed: a reply read and decoded; the plugin's from its samples, bare Locust's from its round's
record). Each workload reports every round, the median of each sender, and plugin / bare; and the paired
ratio: each plugin round over the bare round just before it, their geometric mean with its 95% interval
(log-scale Student t, analysis/statistics.ratio_spread). A slow spell of the host lasts longer than a round
and so slows both sides of a pair: the paired ratio and its interval say how far the medians' ratio can be
trusted on a noisy machine.
"""

from __future__ import annotations

import itertools
import sqlite3
import statistics
from contextlib import closing
from dataclasses import asdict, dataclass, replace
from typing import Any

import loadgen_stages as stages
from loadgen_runs import Bench, sleep_until
from loadgen_workloads import Workload, request_summary, scenario, write_scenario

from bench_plugin.analysis.statistics import ratio_spread
from bench_plugin.results.spread import Spread
from bench_plugin.results.store import read_samples


@dataclass(frozen=True)
class Window:
    """One sender's measured window in one round."""

    requests: int
    """Completed, reply read and decoded, within the window."""
    failed: int
    cpu_s: float
    seconds: float
    idle_other_cores: float | None
    """What the other sender, idle meanwhile on the same core, used."""
    other_cpu: float | None
    """Cores' worth of other programs' work meanwhile (Bench.other_work)."""
    steal_cpu: float | None
    """Cores' worth of time the hypervisor took from the benchmark's cores meanwhile."""
    lag_p99_ms: float | None = None
    """The plugin's send lag P99 over its whole stage (bare Locust records no intended times)."""
    bunched: float | None = None
    """The fraction of the window's completions that came within BUNCHED_S of the one before: how much the
    sender's requests bunched (Poisson arrivals at R: 1 - exp(-R * BUNCHED_S), 14% at 150/s)."""
    sent: float | None = None
    """The plugin: the fraction of the stage's arrivals sent within it."""

    @property
    def ms_per_request(self) -> float | None:
        """CPU milliseconds per completed request."""
        return 1000.0 * self.cpu_s / self.requests if self.requests else None

    @property
    def rate(self) -> float:
        """Completed requests per second over the window."""
        return self.requests / self.seconds if self.seconds else 0.0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, with the derived figures."""
        return {**asdict(self), "ms_per_request": self.ms_per_request, "rate": self.rate}


@dataclass(frozen=True)
class CpuRounds:
    """The rounds of one workload, and what the plugin's request was."""

    workload: str
    rate: float
    request: dict[str, Any]
    """What the plugin's (and so bare Locust's) requests were (loadgen_workloads.request_summary)."""
    bare: list[Window]
    plugin: list[Window]
    bare_arrivals: str = "poisson"
    """When bare Locust's users sent (loadgen_bare.py's BARE_ARRIVALS): poisson or paced."""
    variant: str | None = None
    """What the plugin changed in how it sent (loadgen_variants.py), if anything."""

    @staticmethod
    def median(windows: list[Window]) -> float | None:
        """The median CPU ms per request over ``windows`` (those that completed any)."""
        values = [v for v in (w.ms_per_request for w in windows) if v is not None]
        return statistics.median(values) if values else None

    @property
    def ratio(self) -> float | None:
        """Plugin / bare, of the medians."""
        bare, plugin = self.median(self.bare), self.median(self.plugin)
        return plugin / bare if bare and plugin is not None else None

    @property
    def paired(self) -> Spread:
        """Each plugin round over the bare round before it: geometric mean and 95% interval (module docstring)."""
        return ratio_spread([p.ms_per_request / b.ms_per_request if p.ms_per_request and b.ms_per_request else None
                             for b, p in zip(self.bare, self.plugin, strict=False)])

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        paired = self.paired
        return {"workload": self.workload, "rate": self.rate, "request": self.request,
                "bare_arrivals": self.bare_arrivals, "variant": self.variant,
                "bare_ms_per_request": self.median(self.bare), "plugin_ms_per_request": self.median(self.plugin),
                "ratio": self.ratio, "paired_ratio": {"mean": paired.mean, "lo": paired.lo, "hi": paired.hi,
                                                      "values": paired.values},
                "bare": [w.to_dict() for w in self.bare],
                "plugin": [w.to_dict() for w in self.plugin]}


def measure(bench: Bench, w: Workload, rate: float, rounds: int, warm_s: float, window_s: float) -> CpuRounds:
    """The interleaved rounds of ``w`` at ``rate`` (module docstring)."""
    plan: list[tuple[float, float, str | None]] = []
    for k in range(1, rounds + 1):
        plan += [(0.0, warm_s + window_s + 0.5, f"bare-{k}"), (rate, warm_s + window_s, f"plugin-{k}")]
    path = write_scenario(bench.out / f"cpu-{w.name}.yaml", scenario(w, plan))
    request = request_summary(w, path)
    bare, records_dir = bench.bare(f"cpu-{w.name}-bare", w, rate, path)
    run = bench.plugin(f"cpu-{w.name}", path)
    records = []
    try:
        bench.wait_ready(bare, records_dir)
        for k in range(rounds):
            start, _ = bench.wait_stage(run, 2 + 2 * k)  # stages 0 and 1 get the worker going
            sleep_until(start)
            records.append(bench.bare_round(bare, records_dir, k + 1, warm_s + window_s))
        bench.finish(run, sum(seconds for _, seconds, _ in plan) + 90)
    finally:
        bench.procs.stop(bare)
        bench.stop(run)
    worker = run.workers[0].pid
    sides = _Sides(bench, bare.pid, worker)
    bare_windows = [sides.window(bare.pid, r["opened"] + warm_s, r["closed"], r["done"], r["failed"]) for r in records]
    judged = {r.stage: r for r in stages.judge(run.results, w.workload, lambda a, b: bench.sampler.share(worker, a, b),
                                               bench.other_work)}
    plugin_windows = []
    uri = f"file:{run.results / 'results.sqlite'}?mode=ro"
    with closing(sqlite3.connect(uri, uri=True)) as db:
        for k in range(rounds):
            stage = judged[2 * k + 3]
            samples = read_samples(db, "trial=1 AND stage=? AND workload=?", (stage.stage, w.workload))
            found = sides.window(worker, stage.started_s + warm_s, stage.started_s + stage.duration_s,
                                 [s.end_s for s in samples if s.ok], stage.errors)
            plugin_windows.append(replace(found, lag_p99_ms=stage.lag_p99_ms, sent=stage.sent))
    return CpuRounds(w.name, rate, request, bare_windows, plugin_windows, bench.bare_arrivals, bench.variant)


class _Sides:
    """The two senders of the rounds, sharing one core: each one's window, with the other's idle CPU meanwhile."""

    def __init__(self, bench: Bench, bare: int, worker: int) -> None:
        self.bench, self.bare, self.worker = bench, bare, worker

    def window(self, pid: int, start_s: float, end_s: float, done: list[float], failed: int) -> Window:
        """``pid``'s window between ``start_s`` and ``end_s``: its requests are those of ``done`` (when each
        request read and decoded completed) between the window's first and last CPU sample; ``failed``: the
        round's failures."""
        used = self.bench.sampler.used(pid, start_s, end_s)
        if used is None:
            raise RuntimeError(f"process {pid}: its CPU was not sampled between {start_s:.1f} and {end_s:.1f}")
        cpu_s, t0, t1 = used
        idle = self.bench.sampler.share(self.worker if pid == self.bare else self.bare, t0, t1)
        other, stolen = self.bench.other_work(t0, t1)
        requests = sum(1 for t in done if t0 <= t <= t1)
        return Window(requests=requests, failed=failed, cpu_s=cpu_s, seconds=t1 - t0, idle_other_cores=idle,
                      other_cpu=other, steal_cpu=stolen, bunched=bunched(done, t0, t1))


BUNCHED_S = 0.001
"""Completions closer than this are bunched (Window.bunched)."""


def bunched(done: list[float], start_s: float, end_s: float) -> float | None:
    """The fraction of the completions between ``start_s`` and ``end_s`` within BUNCHED_S of the one before."""
    times = sorted(t for t in done if start_s <= t <= end_s)
    if len(times) < 2:
        return None
    return sum(1 for a, b in itertools.pairwise(times) if b - a < BUNCHED_S) / (len(times) - 1)
