"""Queueing: a class's latency split into client, server queue, server compute and the rest, and the growth of
each part under an arm against the control, on requests and server readings whose every number is known."""

from __future__ import annotations

import pytest

from bench_plugin.analysis.queueing import (
    answer_growth,
    by_quantity,
    increase,
    latency_split,
    server_stats,
    tail,
)
from bench_plugin.analysis.significance import ratio_figure
from bench_plugin.analysis.statistics import spread
from bench_plugin.results.samples import Sample
from bench_plugin.results.server_figures import LatencyParts, ServerStats
from bench_plugin.results.server_rows import Quantity as Q
from bench_plugin.results.server_rows import ServerPoint
from bench_plugin.results.summary import ClassComparison, ClassStats, StageComparison

T = 1_800_000_000.0
MS = 1e-3
"""How close a figure from epoch times is to the number it was made of (a double holds them to about 0.2 us)."""


def request(i: int, latency_ms: float, *, late_ms: float = 0.0, queue_ms: float | None = None,
            compute_ms: float | None = None, ok: bool = True) -> Sample:
    """Request ``i``: intended at T + i/10, sent ``late_ms`` later, ended ``latency_ms`` after it was intended."""
    intended = T + i / 10
    return Sample("embedding", 1, 0, 0, i, 0, intended, intended + late_ms / 1000, intended + latency_ms / 1000, ok,
                  server_queue_s=None if queue_ms is None else queue_ms / 1000,
                  server_compute_s=None if compute_ms is None else compute_ms / 1000)


def test_increase_counts_a_fall_as_a_restart_from_zero() -> None:
    assert increase([(0, 10.0), (1, 12.0), (2, 15.0)]) == 5.0
    assert increase([(0, 10.0), (1, 12.0), (2, 3.0), (3, 4.0)]) == 2.0 + 3.0 + 1.0  # restarted between 1 and 2
    assert increase([(0, 10.0)]) is None


def test_the_tail_is_the_requests_ranked_around_the_p95() -> None:
    samples = [request(i, float(i + 1)) for i in range(100)]  # latencies 1..100 ms
    assert [s.latency_ms for s in tail(samples)] == pytest.approx([93, 94, 95, 96, 97, 98], abs=MS)
    assert [s.latency_ms for s in tail(samples[:3])] == pytest.approx([3.0], abs=MS)  # at least the one at the middle


def test_each_replys_own_split_gives_the_mean_and_the_tails_parts_exactly() -> None:
    samples = [request(i, 10.0 + i, late_ms=0.5, queue_ms=i, compute_ms=8.0) for i in range(40)]
    samples.append(request(40, 500.0, ok=False))  # a failure counts in no part
    stats = server_stats(samples, {}, None, None, "reference")
    assert stats is not None and stats.split_from == "replies" and stats.engine == "reference"
    mean = stats.mean
    assert mean is not None and mean.requests == 40
    assert mean.total_ms == pytest.approx(10 + 19.5, abs=MS) and mean.client_ms == pytest.approx(0.5, abs=MS)
    assert mean.queue_ms == pytest.approx(19.5, abs=MS) and mean.compute_ms == pytest.approx(8.0, abs=MS)
    assert mean.other_ms == pytest.approx(10 - 0.5 - 8.0, abs=MS)  # each request's rest is 1.5 ms
    assert stats.p95 is not None and stats.p95.queue_ms == pytest.approx(37.0, abs=MS)  # ranks 36..38 of 0..39
    assert stats.p95.other_ms == pytest.approx(1.5, abs=MS)


def test_the_servers_totals_over_the_stage_give_the_means_where_replies_said_nothing() -> None:
    samples = [request(i, 50.0) for i in range(20)]  # the stage: T to T+2
    points = [ServerPoint(t, "embedding", q, v) for t, q, v in (
        (T - 0.3, Q.QUEUE_TIME, 1.0), (T - 0.3, Q.QUEUED, 10),  # the base, read just before the stage
        (T + 1.0, Q.QUEUE_TIME, 1.1), (T + 1.0, Q.QUEUED, 15),
        (T + 2.0, Q.QUEUE_TIME, 1.2), (T + 2.0, Q.QUEUED, 30),  # 0.2 s over 20 requests: 10 ms each
        (T - 0.3, Q.COMPUTE_TIME, 5.0), (T - 0.3, Q.COMPUTED, 10),
        (T + 2.0, Q.COMPUTE_TIME, 5.6), (T + 2.0, Q.COMPUTED, 30),  # 30 ms each
        (T - 0.3, Q.QUEUE_DEPTH, 50.0),  # a level read before the stage is not the stage's
        (T + 0.5, Q.QUEUE_DEPTH, 2.0), (T + 1.5, Q.QUEUE_DEPTH, 6.0),
        (T + 0.5, Q.BATCHED, 0.0), (T + 0.5, Q.BATCHES, 0.0), (T + 1.5, Q.BATCHED, 64), (T + 1.5, Q.BATCHES, 8),
        (T + 3.0, Q.QUEUE_DEPTH, 99.0),  # after the stage
    )]
    stats = server_stats(samples, by_quantity(points)["embedding"], T, T + 2.0, "tei")
    assert stats is not None and stats.split_from == "metrics" and stats.p95 is None
    assert stats.mean is not None and stats.mean.queue_ms == pytest.approx(10.0, abs=MS)
    assert stats.mean.compute_ms == pytest.approx(30.0, abs=MS)
    assert stats.mean.other_ms == pytest.approx(10.0, abs=MS)
    assert stats.queue_depth is not None and (stats.queue_depth.mean, stats.queue_depth.peak) == (4.0, 6.0)
    assert stats.batch_size == 8.0 and stats.server_requests == 20


def test_the_totals_are_read_where_the_stages_own_requests_ended_when_they_outlast_it() -> None:
    """An LLM's streams outlast a stage of a few seconds: the server observes each as it ends, so the totals over
    the stage's own window would count the previous stage's last requests and this one's first; read over the
    span in which this stage's requests ended, they are this stage's."""
    earlier = [(T - 2.0 + i * 0.5, 0.1, 1.0) for i in range(10)]  # the stage before: ended T-0.9 .. T+3.6
    mine = [request(i * 5, 3000.0 + 100.0 * (i % 3)) for i in range(10)]  # sent T .. T+4.5, ended T+3 .. T+7.7
    ended = [(s.end_s, 0.5, 2.5 + 0.1 * (i % 3)) for i, s in enumerate(mine)]  # queue 0.5 s, compute the rest
    events = sorted(earlier + ended)  # (when it ended, its queue time, its compute time)
    points = []
    for k in range(-10, 30):  # read every 0.5 s, the totals of what had ended by then
        at = T + k * 0.5
        done = [e for e in events if e[0] <= at]
        points += [ServerPoint(at, "llm", Q.QUEUE_TIME, sum(e[1] for e in done)),
                   ServerPoint(at, "llm", Q.QUEUED, len(done)),
                   ServerPoint(at, "llm", Q.COMPUTE_TIME, sum(e[2] for e in done)),
                   ServerPoint(at, "llm", Q.COMPUTED, len(done))]
    stats = server_stats(mine, by_quantity(points)["llm"], T, T + 5.0, "reference")
    assert stats is not None and stats.split_from == "metrics" and stats.mean is not None
    truth = sum(c for _, _, c in ended) / len(ended)
    assert stats.mean.queue_ms == pytest.approx(500.0, rel=0.1)  # over the stage's own window: 0.26 s
    assert stats.mean.compute_ms == pytest.approx(truth * 1000.0, rel=0.1)  # there: 1.6 s
    assert stats.server_requests is not None and stats.server_requests >= 8


def test_a_server_that_said_nothing_has_no_figures_and_one_without_compute_has_no_rest() -> None:
    assert server_stats([request(i, 5.0) for i in range(5)], {}, T, T + 1, None) is None
    points = [ServerPoint(t, "embedding", q, v) for t, q, v in ((T, Q.QUEUE_TIME, 0.0), (T, Q.QUEUED, 0),
                                                                (T + 1, Q.QUEUE_TIME, 0.1), (T + 1, Q.QUEUED, 5))]
    stats = server_stats([request(i, 50.0) for i in range(5)], by_quantity(points)["embedding"], T, T + 1, "sglang")
    assert stats is not None and stats.mean is not None
    assert stats.mean.queue_ms == pytest.approx(20.0, abs=MS)
    assert stats.mean.compute_ms is None and stats.mean.other_ms is None


def parts(total: float, queue: float | None, compute: float | None, client: float = 0.0) -> LatencyParts:
    other = None if queue is None or compute is None else total - client - queue - compute
    return LatencyParts(requests=10, total_ms=total, client_ms=client, queue_ms=queue, compute_ms=compute,
                        other_ms=other)


def stats(split_from: str, mean: LatencyParts, p95: LatencyParts | None = None) -> ClassStats:
    return ClassStats(requests=10, errors=0, errors_by_kind={}, duration_s=1.0, throughput_rps=10.0, latency_ms={},
                      queue_ms={}, server=ServerStats(engine="reference", split_from=split_from,  # type: ignore[arg-type]
                                                      mean=mean, p95=p95))


def test_the_growth_of_each_part_is_paired_by_repeat_and_adds_up_to_the_total() -> None:
    pairs = [(stats("replies", parts(60, 30, 20, 1), parts(90, 50, 30, 1)), stats("replies", parts(40, 15, 15, 1),
                                                                                      parts(60, 30, 20, 1))),
             (stats("replies", parts(70, 35, 25, 1), parts(100, 60, 30, 1)), stats("replies", parts(44, 16, 18, 1),
                                                                                       parts(62, 30, 22, 1)))]
    split = latency_split(pairs)
    assert split is not None and split.split_from == "replies"
    mean = split.mean
    assert mean.total_ms.values == [20.0, 26.0] and mean.queue_ms is not None and mean.queue_ms.values == [15.0, 19.0]
    assert mean.compute_ms is not None and mean.compute_ms.values == [5.0, 7.0]
    assert mean.other_ms is not None and mean.other_ms.values == [0.0, 0.0]
    assert mean.control_total_ms.values == [40.0, 44.0] and mean.total_ms.kind == "difference"
    assert split.p95 is not None and split.p95.queue_ms is not None and split.p95.queue_ms.values == [20.0, 30.0]


def test_a_pair_counts_only_on_one_basis_and_without_any_there_is_no_split() -> None:
    mixed = [(stats("replies", parts(60, 30, 20)), stats("metrics", parts(40, 10, 20))),
             (stats("metrics", parts(70, 40, 20)), stats("metrics", parts(45, 15, 20)))]
    split = latency_split(mixed)
    assert split is not None and split.split_from == "metrics" and split.mean.total_ms.values == [25.0]
    assert split.mean.queue_ms is not None and split.mean.queue_ms.values == [25.0] and split.p95 is None
    no_compute = latency_split([(stats("metrics", parts(60, 30, None)), stats("metrics", parts(40, 10, None)))])
    assert no_compute is not None and no_compute.mean.compute_ms is None and no_compute.mean.other_ms is None
    assert latency_split([(None, stats("metrics", parts(40, 10, 20)))]) is None
    assert latency_split([]) is None


def test_the_answer_names_the_class_slowed_most_where_the_answer_rests() -> None:
    def comparison(slowdown: float, split: bool) -> ClassComparison:
        c = ClassComparison(slo_attainment=spread([1.0]), goodput_rps=spread([1.0]), meets_slo=True,
                            within_error_budget=True, slowdown_p95=ratio_figure([slowdown]))
        if split:
            arm, control = stats("replies", parts(60, 30, 20)), stats("replies", parts(40, 10, 20))
            c.latency_split = latency_split([(arm, control)])
        return c

    def stage(index: int, classes: dict[str, ClassComparison]) -> StageComparison:
        return StageComparison(index=index, offered={}, repeats=1, classes=classes, goodput_per_device=spread([1.0]))

    stages = [stage(0, {"llm": comparison(1.2, True), "embedding": comparison(1.5, True)}),
              stage(1, {"llm": comparison(3.0, True), "embedding": comparison(2.0, False)})]
    decided = answer_growth(stages, stages[0])
    assert decided is not None and (decided.stage, decided.workload) == (0, "embedding")
    assert decided.slowdown_p95 == pytest.approx(1.5, abs=MS)
    highest = answer_growth(stages, None)
    assert highest is not None and (highest.stage, highest.workload) == (1, "llm")
    assert answer_growth([stage(0, {"llm": comparison(2.0, False)})], None) is None
