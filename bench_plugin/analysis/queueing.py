"""Queueing: where a class's latency goes, and where the latency a sharing arm adds to it goes.

Per class and stage (``server_stats``): the successful requests' latency split into four parts, each a mean
over the requests (results/server_figures.py says what each part is):

- with each reply's own split (``Sample.server_queue_s`` and ``server_compute_s``, the servers' timing
  headers): per request, other = latency - client - queue - compute, and the means over the requests that
  have both; the same over the requests around the P95 (those ranked between the 92.5th and the 97.5th
  percentile of latency, at least one), so the split of the tail is the tail's own;
- else with the server's metrics (``ServerPoint`` totals): mean queue time = the change of the queue-time
  total over the change of the count it covers (Prometheus' ``increase``: a total that falls, a server
  restarted, counts from zero again), compute time likewise, and other = the mean latency - client - queue -
  compute. The engines observe a request's times as it ends (vLLM, TEI, Triton and the reference servers),
  so the totals are read over the span in which the stage's own requests ended: from the last reading before
  its first reply ended to the first reading at or after its last (``ended_span``). Over the stage's own
  window, a class whose requests outlast the stage (an LLM's seconds-long streams in a stage of a few) would
  count only its first, shortest requests and the previous stage's last; a server finishes requests about in
  the order they came, so the span holds the stage's own, give or take one reading at each edge.

With them, the levels the server read through the stage (queue depth, running requests, KV-cache use: mean
and peak), its mean batch size and its preemptions.

Per arm, class and stage against the control at the same stage (``latency_split``): each part's growth, arm
minus control, per paired repeat, summarised over the pairs like every other figure (a mean with its 95%
interval). The parts' growths add up to the total's, so "compute +31 ms of +38 ms" is a share of the same
growth. A pair counts only where both runs split their latency on the same basis (replies, else metrics).
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Callable, Iterable, Sequence

from bench_plugin.analysis.statistics import DIFFERENCE, VALUE, spread
from bench_plugin.results.samples import Sample
from bench_plugin.results.server_figures import (
    LatencyGrowth,
    LatencyParts,
    LatencySplit,
    PartsGrowth,
    ServerStats,
    SplitFrom,
)
from bench_plugin.results.server_rows import LEVELS, ServerPoint
from bench_plugin.results.server_rows import Quantity as Q
from bench_plugin.results.spread import MeanPeak, Spread
from bench_plugin.results.summary import ClassStats, StageComparison

TAIL = (0.925, 0.975)
"""The ranks (as quantiles of latency) of the requests whose split stands for the P95's."""


def _client_ms(s: Sample) -> float:
    return max(s.queue_ms, 0.0)


def _parts(samples: Sequence[Sample], queue_ms: float | None = None,
           compute_ms: float | None = None) -> LatencyParts:
    """The mean parts of ``samples``; per request where they say their server's split, else the given means."""
    n = len(samples)
    total = sum(s.latency_ms for s in samples) / n
    client = sum(_client_ms(s) for s in samples) / n
    if queue_ms is None and compute_ms is None and all(_said(s) for s in samples):
        queue_ms = sum((s.server_queue_s or 0.0) * 1000.0 for s in samples) / n
        compute_ms = sum((s.server_compute_s or 0.0) * 1000.0 for s in samples) / n
    other = None if queue_ms is None or compute_ms is None else total - client - queue_ms - compute_ms
    return LatencyParts(requests=n, total_ms=total, client_ms=client, queue_ms=queue_ms, compute_ms=compute_ms,
                        other_ms=other)


def _said(s: Sample) -> bool:
    return s.server_queue_s is not None and s.server_compute_s is not None


def tail(samples: Sequence[Sample], ranks: tuple[float, float] = TAIL) -> list[Sample]:
    """The requests ranked between ``ranks`` (quantiles) of latency, at least the one at their middle."""
    ordered = sorted(samples, key=lambda s: s.latency_ms)
    n = len(ordered)
    lo, hi = (min(n - 1, max(0, math.floor(q * (n - 1) + 0.5))) for q in ranks)
    return ordered[lo:hi + 1]


def increase(points: Sequence[tuple[float, float]]) -> float | None:
    """How much a running total grew over time-ordered ``(t, value)`` points, a fall counting as a restart from
    zero (Prometheus' ``increase`` without extrapolation); None with fewer than two points."""
    if len(points) < 2:
        return None
    grown = 0.0
    for (_, before), (_, after) in itertools.pairwise(points):
        grown += after - before if after >= before else after
    return grown


Series = dict[str, list[tuple[float, float]]]
"""One class's server points: quantity -> its (t, value) points in time order."""


def by_quantity(points: Iterable[ServerPoint]) -> dict[str, Series]:
    """Class -> its Series, from stored points in any order."""
    out: dict[str, Series] = {}
    for p in points:
        out.setdefault(p.workload, {}).setdefault(p.quantity, []).append((p.t, p.value))
    for series in out.values():
        for values in series.values():
            values.sort()
    return out


def ended_span(samples: Sequence[Sample]) -> tuple[float, float] | None:
    """When the first and the last of ``samples`` ended; None without any."""
    if not samples:
        return None
    ends = [s.end_s for s in samples]
    return min(ends), max(ends)


def _window(series: Series, start_s: float, end_s: float, ended: tuple[float, float] | None = None) -> Series:
    """Each quantity's points over the stage: a level's in ``[start_s, end_s]``; a total's from the last reading
    before the stage's first request ended (its base) to the first at or after its last ended (``ended``), else
    from the last before ``start_s`` to the last in ``[start_s, end_s]``."""
    out: Series = {}
    for quantity, values in series.items():
        if quantity in LEVELS:
            lo = bisect.bisect_left(values, (start_s, -math.inf))
            hi = bisect.bisect_right(values, (end_s, math.inf))
        elif ended is None:
            lo = max(0, bisect.bisect_left(values, (start_s, -math.inf)) - 1)
            hi = bisect.bisect_right(values, (end_s, math.inf))
        else:
            lo = max(0, bisect.bisect_left(values, (ended[0], -math.inf)) - 1)
            hi = min(len(values), bisect.bisect_left(values, (ended[1], -math.inf)) + 1)
        if hi > lo:
            out[quantity] = values[lo:hi]
    return out


def _ratio(window: Series, total: Q, count: Q) -> tuple[float | None, float | None]:
    """The mean over a window of a (total, count) pair, and the count's growth; None where either is unknown."""
    grown, counted = increase(window.get(total, [])), increase(window.get(count, []))
    if grown is None or counted is None or counted <= 0:
        return None, counted
    return grown / counted, counted


def _level(window: Series, quantity: Q) -> MeanPeak | None:
    values = [v for _, v in window.get(quantity, [])]
    return MeanPeak(mean=sum(values) / len(values), peak=max(values), points=len(values)) if values else None


def server_stats(samples: Sequence[Sample], series: Series, start_s: float | None, end_s: float | None,
                 engine: str | None) -> ServerStats | None:
    """What one class's server said of one stage (``series``: the class's, by_quantity) and its requests' latency
    split with it; None where it said nothing at all."""
    ok = [s for s in samples if s.ok]
    window = _window(series, start_s, end_s, ended_span(ok)) if start_s is not None and end_s is not None else {}
    said = [s for s in ok if _said(s)]
    split_from: SplitFrom | None = None
    mean = p95 = None
    queue_s, _ = _ratio(window, Q.QUEUE_TIME, Q.QUEUED)
    compute_s, computed = _ratio(window, Q.COMPUTE_TIME, Q.COMPUTED)
    if said and len(said) * 2 >= len(ok):  # most replies said it: the split is theirs
        split_from, mean, p95 = "replies", _parts(said), _parts(tail(said))
    elif ok and (queue_s is not None or compute_s is not None):
        split_from = "metrics"
        mean = _parts(ok, None if queue_s is None else queue_s * 1000.0,
                      None if compute_s is None else compute_s * 1000.0)
    batch, _ = _ratio(window, Q.BATCHED, Q.BATCHES)
    served = computed if computed is not None else _ratio(window, Q.QUEUE_TIME, Q.QUEUED)[1]
    stats = ServerStats(engine=engine, split_from=split_from, mean=mean, p95=p95,
                        queue_depth=_level(window, Q.QUEUE_DEPTH), running=_level(window, Q.RUNNING),
                        kv_cache_use=_level(window, Q.KV_CACHE), batch_size=batch,
                        preemptions=increase(window.get(Q.PREEMPTIONS, [])), server_requests=served)
    if split_from is None and not window:
        return None
    return stats


PartGetter = Callable[[LatencyParts], float | None]
BASES: tuple[SplitFrom, ...] = ("replies", "metrics")
"""The bases of a split, the one preferred first."""


def _growth(pairs: Sequence[tuple[LatencyParts, LatencyParts]]) -> PartsGrowth:
    """Each part's growth over the (arm, control) pairs."""

    def part(get: PartGetter) -> Spread:
        return spread([None if (a := get(mine)) is None or (b := get(ref)) is None else a - b
                       for mine, ref in pairs], DIFFERENCE)

    def known(figure: Spread) -> Spread | None:
        return figure if figure.mean is not None else None

    return PartsGrowth(control_total_ms=spread([ref.total_ms for _, ref in pairs], VALUE),
                       total_ms=part(lambda p: p.total_ms), client_ms=part(lambda p: p.client_ms),
                       queue_ms=known(part(lambda p: p.queue_ms)), compute_ms=known(part(lambda p: p.compute_ms)),
                       other_ms=known(part(lambda p: p.other_ms)))


def latency_split(pairs: Sequence[tuple[ClassStats | None, ClassStats | None]]) -> LatencySplit | None:
    """Where the latency an arm adds to a class goes, over its repeats paired with the control's (arm, control);
    None where no pair split its latency on one basis."""
    split = [(mine.server, ref.server) for mine, ref in pairs
             if mine is not None and ref is not None and mine.server is not None and ref.server is not None]
    for basis in BASES:
        same = [(a, b) for a, b in split if a.split_from == basis and b.split_from == basis]
        means = [(a.mean, b.mean) for a, b in same if a.mean is not None and b.mean is not None]
        if not means:
            continue
        tails = [(a.p95, b.p95) for a, b in same if a.p95 is not None and b.p95 is not None]
        return LatencySplit(split_from=basis, mean=_growth(means), p95=_growth(tails) if tails else None)
    return None


def answer_growth(stages: Sequence[StageComparison], decisive: StageComparison | None) -> LatencyGrowth | None:
    """The class an arm slows the most (its P95 against the control's) at the ``decisive`` stage where that has a
    split, else at the highest stage with one; None where no stage has one."""
    order = ([decisive] if decisive is not None else []) + sorted(stages, key=lambda s: -s.index)
    for stage in order:
        split = {name: c for name, c in stage.classes.items() if c.latency_split is not None}
        if not split:
            continue
        name, c = max(split.items(), key=lambda item: (item[1].slowdown_p95.mean or 0.0)
                      if item[1].slowdown_p95 is not None else 0.0)
        assert c.latency_split is not None
        return LatencyGrowth(stage=stage.index, workload=name,
                             slowdown_p95=c.slowdown_p95.mean if c.slowdown_p95 is not None else None,
                             split=c.latency_split)
    return None
