"""The load generator's goals (docs/benchmarks.md), judged on one run of benchmarks/loadgen_capacity.py.

Each goal is judged only on what the run measured: a part or workload left out (``--only``, ``--parts``)
leaves its goals out, and a workload whose rounds completed nothing is judged not held. What the goals
in milliseconds mean depends on how fast the machine ran; the report prints the CPU probe above them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from loadgen_cpu import CpuRounds
from loadgen_default import DefaultRun
from loadgen_stages import MAX_LAG_P99_MS

RATIO_MAX = 1.25
"""The plugin's CPU per request over bare Locust's with the same parser, at most (the medians of the rounds)."""
MS_PER_REQUEST_MAX = {"embedding-base64": 0.8, "embedding-float": 1.4}
"""CPU milliseconds per 16 x 1,024 embedding request, at most, by workload."""
TARGET_MIN_CORES = 16
"""The default command's total is judged against --target only on a host of at least this many cores (the GPU
host's goal; the project's 2-core machine has one core for it)."""


@dataclass(frozen=True)
class Goal:
    """One goal, what the run measured for it, and whether it held."""

    goal: str
    measured: str
    held: bool | None
    """None: not judged on this run (it says why in ``measured``)."""


def judge(cpu: list[CpuRounds], default: DefaultRun | None, cores: int, target: float) -> list[Goal]:
    """The goals the run measured, in the order of docs/benchmarks.md."""
    goals: list[Goal] = []
    for c in cpu:
        ratio, paired = c.ratio, c.paired
        interval = f" (paired {paired.mean:.2f}x [{paired.lo:.2f}, {paired.hi:.2f}])" \
            if paired.mean is not None and paired.lo is not None and paired.hi is not None else ""
        goals.append(Goal(f"{c.workload}: plugin / bare <= {RATIO_MAX:g}x",
                          "no round completed a request" if ratio is None else f"{ratio:.2f}x{interval}",
                          ratio is not None and ratio <= RATIO_MAX))
        limit = MS_PER_REQUEST_MAX.get(c.workload)
        plugin, bare = c.median(c.plugin), c.median(c.bare)
        if limit is not None:
            goals.append(Goal(f"{c.workload}: plugin <= {limit:g} ms of CPU per request",
                              "-" if plugin is None else
                              f"{plugin:.3f} ms (bare Locust {'-' if bare is None else f'{bare:.3f}'})",
                              plugin is not None and plugin <= limit))
        lags = [w.lag_p99_ms for w in c.plugin]
        worst = max((lag for lag in lags if lag is not None), default=None)
        goals.append(Goal(f"{c.workload}: plugin send lag P99 < {MAX_LAG_P99_MS:g} ms in every round at "
                          f"{c.rate:g}/s", "-" if worst is None else f"at most {worst:.2f} ms",
                          worst is not None and None not in lags and worst < MAX_LAG_P99_MS))
    if default is not None:
        best = default.best
        total = best.judged.rate if best else None
        measured = "none sustained" if total is None else f"{total:,.0f} req/s"
        goals.append(Goal(f"the default command sustains >= {target:,.0f} embedding req/s (base64)",
                          measured if cores >= TARGET_MIN_CORES else
                          f"{measured}; not judged on {cores} cores (the goal of a {TARGET_MIN_CORES}-core host)",
                          (total is not None and total >= target) if cores >= TARGET_MIN_CORES else None))
    return goals


def to_dicts(goals: list[Goal]) -> list[dict[str, Any]]:
    """JSON-ready."""
    return [asdict(g) for g in goals]


def markdown(goals: list[Goal]) -> list[str]:
    """The goals as a table, each with ``held``, ``not held`` or ``not judged``."""
    said = {True: "held", False: "**not held**", None: "not judged"}
    return ["", "Goals (docs/benchmarks.md):", "", "| goal | measured | |", "|---|---|---|",
            *(f"| {g.goal} | {g.measured} | {said[g.held]} |" for g in goals)]
