"""The highest rate one plugin process sustains (benchmarks/loadgen_capacity.py), per workload.

The plugin's users in one Locust worker on the sender core (its master on the server cores keeps the
results, as in a distributed campaign) through the manual backend, open-loop Poisson stages at rising
rates: a coarse sweep from a fraction of the process's CPU-bound rate (one core / its CPU per request,
from the rounds of loadgen_cpu.py), each rate once, which finds the bracket, then a finer one between
its last sustained and its first failed rate, with that failed rate again (one marginal try must not end
the search), each rate twice, which decides within it. A stage is
sustained when >= 98% of its offered arrivals left within it, send lag P99 < 2 ms and nothing failed
(loadgen_stages.py); a rate counts when one of its tries is sustained and no lower rate failed.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import loadgen_stages as stages
from loadgen_runs import Bench
from loadgen_stages import StageResult
from loadgen_workloads import Workload, scenario, write_scenario


@dataclass(frozen=True)
class Campaign:
    """One plugin campaign of a search (a sweep of stages)."""

    name: str
    stages: list[StageResult]
    gc: list[dict[str, Any]]
    """The GC log of each process (loadgen_locustfile.py)."""
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {"name": self.name, "seconds": round(self.seconds, 1), "gc": self.gc,
                "stages": [s.to_dict() for s in self.stages]}


@dataclass(frozen=True)
class Search:
    """The sustained rate of one workload from one process, and the sweeps that found it."""

    workload: str
    estimate: float
    """The CPU-bound rate the sweep started from (req/s: one core / CPU per request)."""
    runs: list[Campaign]
    best: StageResult | None
    """The highest sustained stage (None: not even the lowest rate)."""
    failed: StageResult | None
    """The lowest stage that was not sustained (None: every rate tried was)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {"workload": self.workload, "estimate": self.estimate,
                "sustained": self.best.to_dict() if self.best else None,
                "first_failed": self.failed.to_dict() if self.failed else None,
                "runs": [run.to_dict() for run in self.runs]}


def sweep(bench: Bench, name: str, w: Workload, rates: Sequence[float], tries: int, stage_s: float) -> Campaign:
    """The plugin's campaign of ``tries`` stages per rate, on one worker; every stage judged."""
    plan = [(rate, stage_s, None) for rate in rates for _ in range(tries)]
    path = write_scenario(bench.out / f"{name}.yaml", scenario(w, plan))
    started = time.time()
    run = bench.plugin(name, path)
    gc = bench.finish(run, len(plan) * (stage_s + 3) + 90)
    worker = run.workers[0].pid
    pauses = [(float(t), int(gen), float(ms)) for g in gc if g["role"] != "master" for t, gen, ms in g["long_pauses"]]
    judged = stages.judge(run.results, w.workload, lambda a, b: bench.sampler.share(worker, a, b), bench.other_work)
    return Campaign(name, [stages.with_pauses(r, pauses) for r in judged], gc, time.time() - started)


def search(bench: Bench, w: Workload, estimate: float, coarse_from: float, growth: float, coarse_steps: int,
           fine_steps: int, tries: tuple[int, int], stage_s: float) -> Search:
    """The highest sustained rate of ``w``: a coarse sweep from ``coarse_from`` x ``estimate``, then a finer one;
    ``tries``: stages per rate in each."""
    coarse = [max(1.0, round(estimate * coarse_from * growth**i)) for i in range(coarse_steps)]
    runs = [sweep(bench, f"search-{w.name}-coarse", w, coarse, tries[0], stage_s)]
    best, fail = stages.sustained(runs[0].stages), stages.first_failure(runs[0].stages)
    fine: list[float] = []
    if best is not None and fail is not None:  # between them, and the failed rate again: it may have been a stall
        step = (fail.rate - best.rate) / (fine_steps + 1)
        fine = [*(round(best.rate + step * k) for k in range(1, fine_steps + 1)), fail.rate]
    elif best is not None:  # every coarse rate held: look above the last
        fine = [round(best.rate * growth**k) for k in range(1, max(2, fine_steps) + 1)]
    else:  # not even the first: below it, and it again
        fine = [*(max(1.0, round(coarse[0] / growth**k)) for k in range(max(2, fine_steps), 0, -1)), coarse[0]]
    if fine:
        runs.append(sweep(bench, f"search-{w.name}-fine", w, fine, tries[1], stage_s))
    every = [r for c in runs for r in c.stages]
    return Search(w.name, estimate, runs, stages.sustained(every), stages.first_failure(every))
