"""Judging the stages of benchmarks/loadgen_capacity.py's campaigns: did the load generator send the offered load?

A stage of one class at rate r is sustained when, from its results.sqlite,

- at least ``MIN_SENT`` of the stage's offered arrivals (the seeded Poisson sequence the load
  generators were given: the ``expected`` counts of the stage's accounting) were sent before the
  stage's end,
- the send lag (``sent_s - intended_s``) has a P99 under ``MAX_LAG_P99_MS``, and
- no request failed and the stage completed (no rollback, no invalid accounting).

A stage not sustained while other programs (not the benchmark's, anywhere on the host:
loadgen_procs.CpuSampler.other; where two virtual cores share a physical one, work on either slows
the other) took more than ``OTHER_LIMIT_CORES`` is *disturbed*: it is reported, but not taken as
the sender's failure. The hypervisor's steal is reported beside it and excuses nothing: on a
virtual machine it grows with the benchmark's own load, and a load generator there has to live
with it.

A campaign's first two stages, ``settle`` (idle) and ``warm`` (at its lowest rate or the workload's
R, whichever is lower), only get the load generator going and are not judged. The sustained rate of
a sweep is the highest rate that was sustained with no lower rate failed: one lucky stage above a
failed one does not count. Each rate may be tried more than once (``sustained`` says why).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence
from contextlib import closing
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from bench_plugin.results.store import read_samples

MIN_SENT = 0.98
MAX_LAG_P99_MS = 2.0
SETTLE, WARM = "settle", "warm"
"""The names of a campaign's first two stages, which only get the load generator going and are not judged: an
idle one (a worker's first stage starts late: it takes its first assignment to set up, about 0.35 s on the
2-core machine, and its late requests could roll back the stage), then one at the lowest rate or the
workload's R, whichever is lower (the load generator opens its connections)."""
OTHER_LIMIT_CORES = 0.1
"""Other work on the senders' cores above which a stage that was not sustained is not taken as a failure."""
PASS, FAIL, DISTURBED = "pass", "fail", "disturbed"


@dataclass(frozen=True)
class StageResult:
    """One stage as the benchmark judges it."""

    stage: int
    rate: float
    """Offered arrivals per second."""
    status: str
    offered: int
    sent: float
    """Fraction of the offered arrivals sent before the stage's end."""
    lag_p50_ms: float | None
    lag_p99_ms: float | None
    lag_max_ms: float | None
    errors: int
    sender_cpu: float | None
    """Cores the sending processes used over the stage (1.0: one whole core)."""
    started_s: float = 0.0
    duration_s: float = 0.0
    gc_pauses: int | None = None
    """Collections of 1 ms or more in the sending processes during the stage."""
    gc_max_ms: float | None = None
    name: str | None = None
    """The stage's name in the scenario (WARM: not judged)."""
    other_cpu: float | None = None
    """Cores' worth of other programs' work over the stage (not the benchmark's), whose effect a sender's lag
    would wrongly be blamed for."""
    steal_cpu: float | None = None
    """Cores' worth of time the hypervisor took from the benchmark's cores over the stage: reported, not excused
    (on a virtual machine it grows with the benchmark's own load)."""

    @property
    def passed(self) -> bool:
        """Whether the load generator kept up with this stage."""
        return (self.status == "completed" and self.errors == 0 and self.sent >= MIN_SENT
                and self.lag_p99_ms is not None and self.lag_p99_ms < MAX_LAG_P99_MS)

    @property
    def disturbed(self) -> bool:
        """Whether other work (more than OTHER_LIMIT_CORES) ran beside the stage."""
        return self.other_cpu is not None and self.other_cpu > OTHER_LIMIT_CORES

    @property
    def outcome(self) -> str:
        """PASS, FAIL, or DISTURBED: not sustained, but beside other work, so it says nothing of the sender."""
        return PASS if self.passed else DISTURBED if self.disturbed else FAIL

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, with the verdict."""
        return {**asdict(self), "passed": self.passed, "outcome": self.outcome}


def judge(results: Path, workload: str, cpu: Callable[[float, float], float | None],
          other: Callable[[float, float], tuple[float | None, float | None]]) -> list[StageResult]:
    """Every stage of trial 1 in ``results`` but a warm-up; ``cpu(start, end)``: the cores the sending processes
    used then; ``other(start, end)``: other programs' cores and the steal then (Bench.other_work)."""
    out = []
    uri = f"file:{results / 'results.sqlite'}?mode=ro"
    with closing(sqlite3.connect(uri, uri=True)) as db:
        offered_counts = _offered_counts(db, workload)
        rows = db.execute("SELECT stage, name, offered, started_s, planned_s, status FROM stages WHERE trial=1 "
                          "ORDER BY stage")
        for stage, name, offered, started_s, planned_s, status in rows.fetchall():
            if name in (SETTLE, WARM):
                continue
            rate = float(json.loads(offered)[workload])
            n = offered_counts.get(stage, 0)
            if status == "skipped":
                out.append(StageResult(stage, rate, status, n, 0.0, None, None, None, 0, None, name=name))
                continue
            samples = read_samples(db, "trial=1 AND stage=? AND workload=?", (stage, workload))
            end = started_s + planned_s
            sent = sum(1 for s in samples if s.error != "cancelled" and s.sent_s <= end)
            lags = np.array([s.sent_s - s.intended_s for s in samples if s.error != "cancelled"]) * 1000.0
            used, (foreign, stolen) = cpu(started_s, end), other(started_s, end)
            out.append(StageResult(
                stage=stage, rate=rate, status=status, offered=n, sent=sent / n if n else 0.0,
                lag_p50_ms=_pct(lags, 50), lag_p99_ms=_pct(lags, 99),
                lag_max_ms=float(lags.max()) if lags.size else None,
                errors=sum(1 for s in samples if not s.ok), sender_cpu=used, started_s=started_s,
                duration_s=planned_s, name=name,
                other_cpu=foreign, steal_cpu=stolen,
            ))
    return out


def with_pauses(result: StageResult, pauses: Sequence[tuple[float, int, float]]) -> StageResult:
    """``result`` with the GC pauses (epoch end time, generation, ms) that fell within its stage."""
    if result.status == "skipped":
        return result
    inside = [ms for t, _, ms in pauses if result.started_s <= t <= result.started_s + result.duration_s]
    return replace(result, gc_pauses=len(inside), gc_max_ms=max(inside, default=0.0))


def _offered_counts(db: sqlite3.Connection, workload: str) -> dict[int, int]:
    """Stage -> its offered arrivals of ``workload``: what the ledger gave all load generators together."""
    out = {}
    for (detail,) in db.execute("SELECT detail FROM events WHERE kind='stage_accounting' AND trial=1"):
        data = json.loads(detail)
        out[int(data["stage"])] = sum(int(s["expected"]) for s in data["shares"].get(workload, {}).values())
    return out


def _pct(values: np.ndarray, q: float) -> float | None:
    return float(np.percentile(values, q)) if values.size else None


def sustained(results: Sequence[StageResult]) -> StageResult | None:
    """The highest rate sustained with no lower rate failed; None if the lowest was not.

    A rate tried more than once counts as sustained when one of its tries was (the figure is that
    try): a stall of the machine itself fails a stage at any load, and one try in two is far more
    likely to miss it than to fake a load the generator cannot keep up with. A rate whose every try
    was disturbed (other work on the host) is undecided: it neither counts nor stops.
    """
    best = None
    for _, tries in _by_rate(results):
        passed = [r for r in tries if r.passed]
        if passed:
            best = min(passed, key=lambda r: r.lag_p99_ms or 0.0)
        elif any(r.outcome == FAIL for r in tries):
            break
    return best


def first_failure(results: Sequence[StageResult]) -> StageResult | None:
    """The lowest rate none of whose tries was sustained and one at least failed undisturbed (its try with the
    lowest send lag P99)."""
    for _, tries in _by_rate(results):
        if not any(r.passed for r in tries) and any(r.outcome == FAIL for r in tries):
            return min(tries, key=lambda r: r.lag_p99_ms if r.lag_p99_ms is not None else float("inf"))
    return None


def _by_rate(results: Sequence[StageResult]) -> list[tuple[float, list[StageResult]]]:
    rates: dict[float, list[StageResult]] = {}
    for result in results:
        rates.setdefault(result.rate, []).append(result)
    return sorted(rates.items())
