"""The default command's total on this host (benchmarks/loadgen_capacity.py): no --processes, embeddings.

    locust --headless -f locustfiles/mixed.py --scenario S --host URL --arm null-server   (+ --results-dir, --no-report)

as a user runs it, pinned to every core but the null server's, the embedding-base64 workload alone at
rising rates. Without --processes the plugin decides how many load-generating processes to run (from the
scenario's highest planned load and the cores it may use); the benchmark counts them two ways, the load
generators the campaign's summary.json lists per stage and the processes of the command's tree it saw
sending, and samples their CPU together. A stage is sustained as loadgen_stages.py says (>= 98% sent,
send lag P99 < 2 ms, no failure) AND the campaign did not flag it generator-limited
(summary.json ``trials[].stages[].generator_limited``); each rate is tried twice (once with --quick) and
holds when one try does; the figure is the highest rate held with no lower one failed (a stage beside
other work on the host is disturbed: reported, not judged).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import loadgen_stages as stages
from loadgen_runs import Bench, cpu_list
from loadgen_stages import DISTURBED, FAIL, PASS, StageResult
from loadgen_workloads import Workload, scenario, write_scenario


@dataclass(frozen=True)
class DefaultStage:
    """One stage of the default command: the benchmark's judgement and the campaign's own."""

    judged: StageResult
    generator_limited: str | None
    """The campaign's reason (summary.json), or None."""
    generators: dict[str, float]
    """Load generator (as summary.json names it) -> the cores it used while sending, as the campaign measured."""
    processes_seen: int
    """Processes of the command's tree that this benchmark sampled over the stage."""

    @property
    def passed(self) -> bool:
        """Sustained by both the benchmark's rule and the campaign's self-check."""
        return self.judged.passed and self.generator_limited is None

    @property
    def outcome(self) -> str:
        """loadgen_stages' PASS, FAIL or DISTURBED, with the campaign's self-check."""
        return PASS if self.passed else DISTURBED if self.judged.disturbed else FAIL

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {**asdict(self), "judged": self.judged.to_dict(), "passed": self.passed, "outcome": self.outcome}


@dataclass(frozen=True)
class DefaultRun:
    """The default command's sweep."""

    cores: str
    """The cores the command was pinned to."""
    stages: list[DefaultStage]
    seconds: float
    exit_status: int

    @property
    def best(self) -> DefaultStage | None:
        """The highest rate sustained with no lower rate failed (as loadgen_stages.sustained: a rate holds when one
        of its tries does; one whose tries were all disturbed neither holds nor stops); its best try."""
        rates: dict[float, list[DefaultStage]] = {}
        for stage in self.stages:
            rates.setdefault(stage.judged.rate, []).append(stage)
        best = None
        for _, tries in sorted(rates.items()):
            passed = [t for t in tries if t.passed]
            if passed:
                best = min(passed, key=lambda t: t.judged.lag_p99_ms or 0.0)
            elif any(t.outcome == FAIL for t in tries):
                break
        return best

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        best = self.best
        return {"cores": self.cores, "seconds": round(self.seconds, 1), "exit_status": self.exit_status,
                "sustained": best.to_dict() if best else None, "stages": [s.to_dict() for s in self.stages]}


def rates(one_process: float, cores: int, growth: float, target: float | None) -> list[float]:
    """The sweep: from half what one process sustains, by ``growth``, to the first rate at or past 1.6 x that
    times ``cores`` (past what the cores should hold, so that the sweep ends in a failure), with ``target``
    (where it is inside) in the place of the rate nearest it."""
    top = 1.6 * one_process * cores
    out, rate = [round(0.5 * one_process)], 0.5 * one_process
    while rate < top:
        rate *= growth
        out.append(round(rate))
    if target and out and target <= top:
        nearest = min(out, key=lambda r: abs(r - target))
        out = sorted([r for r in out if r != nearest] + [round(target)])
    return out


def run(bench: Bench, w: Workload, offered: Sequence[float], stage_s: float, tries: int) -> DefaultRun:
    """The default command at ``offered`` rates, ``tries`` stages each."""
    plan = [(rate, stage_s, None) for rate in offered for _ in range(tries)]
    path = write_scenario(bench.out / "default.yaml", scenario(w, plan))
    started = time.time()
    proc, results = bench.default("default", path)
    code = bench.procs.wait(proc, len(plan) * (stage_s + 3) + 90)
    if code != 0 or not (results / "summary.json").exists():
        raise RuntimeError(f"the default command exited {code}: {bench.procs.last_line(proc)}")
    summary = json.loads((results / "summary.json").read_text())
    checked = {s["index"]: s for s in summary["trials"][0]["stages"]}
    judged = stages.judge(results, w.workload, lambda a, b: bench.sampler.tree_share(proc.pid, a, b)[0],
                          bench.other_work)
    out = []
    for result in judged:
        own = checked.get(result.stage, {})
        seen = bench.sampler.tree_share(proc.pid, result.started_s, result.started_s + result.duration_s)[1]
        out.append(DefaultStage(result, own.get("generator_limited"),
                                {name: float(use.get("cores") or 0.0) for name, use in
                                 (own.get("generators") or {}).items()}, seen))
    return DefaultRun(cpu_list(bench.layout.rest), out, time.time() - started, code)
