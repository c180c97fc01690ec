"""Judging the stages of benchmarks/loadgen_capacity.py's campaigns: did the load generator send the offered load?

A stage of one class at rate r is sustained when, from its results.sqlite,

- at least ``MIN_SENT`` of the stage's offered arrivals (the seeded Poisson sequence the load
  generators were given: the ``expected`` counts of the stage's accounting) were sent before the
  stage's end,
- the send lag (``sent_s - intended_s``) has a P99 under ``MAX_LAG_P99_MS``, and
- no request failed and the stage completed (no rollback, no invalid accounting).

The sustained rate of a sweep is the highest rate that was sustained with every rate below it
sustained too: one lucky stage above a failed one does not count. Each rate is tried twice in a
row (``sustained`` says why).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from contextlib import closing
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from loadgen_procs import CpuSampler

from bench_plugin.results.store import read_samples

MIN_SENT = 0.98
MAX_LAG_P99_MS = 5.0


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

    @property
    def passed(self) -> bool:
        """Whether the load generator kept up with this stage."""
        return (self.status == "completed" and self.errors == 0 and self.sent >= MIN_SENT
                and self.lag_p99_ms is not None and self.lag_p99_ms < MAX_LAG_P99_MS)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, with the verdict."""
        return {**asdict(self), "passed": self.passed}


def judge(results: Path, workload: str, duration_s: float, senders: Sequence[int],
          sampler: CpuSampler) -> list[StageResult]:
    """Every stage of trial 1 in ``results``; ``senders``: the PIDs of the processes that sent."""
    out = []
    uri = f"file:{results / 'results.sqlite'}?mode=ro"
    with closing(sqlite3.connect(uri, uri=True)) as db:
        offered_counts = _offered_counts(db, workload)
        rows = db.execute("SELECT stage, offered, started_s, status FROM stages WHERE trial=1 ORDER BY stage")
        for stage, offered, started_s, status in rows.fetchall():
            rate = float(json.loads(offered)[workload])
            n = offered_counts.get(stage, 0)
            if status == "skipped":
                out.append(StageResult(stage, rate, status, n, 0.0, None, None, None, 0, None))
                continue
            samples = read_samples(db, "trial=1 AND stage=? AND workload=?", (stage, workload))
            end = started_s + duration_s
            sent = sum(1 for s in samples if s.error != "cancelled" and s.sent_s <= end)
            lags = np.array([s.sent_s - s.intended_s for s in samples if s.error != "cancelled"]) * 1000.0
            shares = [sampler.share(pid, started_s, end) for pid in senders]
            cpu = None if any(v is None for v in shares) else sum(v for v in shares if v is not None)
            out.append(StageResult(
                stage=stage, rate=rate, status=status, offered=n, sent=sent / n if n else 0.0,
                lag_p50_ms=_pct(lags, 50), lag_p99_ms=_pct(lags, 99),
                lag_max_ms=float(lags.max()) if lags.size else None,
                errors=sum(1 for s in samples if not s.ok), sender_cpu=cpu, started_s=started_s,
                duration_s=duration_s,
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
    """The highest rate sustained with every lower rate sustained too; None if the lowest was not.

    A rate tried more than once counts as sustained when one of its tries was (the figure is that
    try): a stall of the machine itself fails a stage at any load, and one try in two is far more
    likely to miss it than to fake a load the generator cannot keep up with.
    """
    best = None
    for _, tries in _by_rate(results):
        passed = [r for r in tries if r.passed]
        if not passed:
            break
        best = min(passed, key=lambda r: r.lag_p99_ms or 0.0)
    return best


def first_failure(results: Sequence[StageResult]) -> StageResult | None:
    """The lowest rate none of whose tries was sustained (its try with the lowest send lag P99)."""
    for _, tries in _by_rate(results):
        if not any(r.passed for r in tries):
            return min(tries, key=lambda r: r.lag_p99_ms if r.lag_p99_ms is not None else float("inf"))
    return None


def _by_rate(results: Sequence[StageResult]) -> list[tuple[float, list[StageResult]]]:
    rates: dict[float, list[StageResult]] = {}
    for result in results:
        rates.setdefault(result.rate, []).append(result)
    return sorted(rates.items())
