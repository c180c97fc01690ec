"""Server metrics through a REAL Prometheus: each class's engine series over a stage's window, by its pod's labels.

Prometheus (Debian's binary, on loopback) scrapes two stand-in servers every second, each as a Kubernetes
ServiceMonitor would label it (``namespace``, ``pod``): the LLM's page is vLLM's (engine_metrics/vllm.txt), the
embedding's the reference servers' own, whose values change between two phases. What comes back must be
exactly what the pages said, read into the same vocabulary and points a direct read gives, and the analysis must
get the phase's mean queue time from the totals' growth. Waits poll the server, never fixed sleeps.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from prometheus_testlib import PageServer, PrometheusProcess, ScrapeJob

from bench_plugin.analysis.queueing import by_quantity, increase, server_stats
from bench_plugin.results.server_rows import Quantity as Q
from bench_plugin.servers.metrics import ServerMetrics
from bench_plugin.telemetry.prometheus import PrometheusSeries
from bench_plugin.telemetry.promql import name_regex, names_query, server_query
from bench_plugin.telemetry.server_prometheus import every_name, query_stage, target_labels

PAGES = Path(__file__).resolve().parent / "engine_metrics"
LLM = {"namespace": "bench", "pod": "llm-0"}
EMBEDDING = {"namespace": "bench", "pod": "embedding-0"}
JOBS = [ScrapeJob("llm", "/llm", target_labels=LLM), ScrapeJob("embedding", "/embedding", target_labels=EMBEDDING)]


def test_the_queries_select_a_servers_series_by_its_targets_labels() -> None:
    assert target_labels("http://x.bench.svc:8000", "bench/llm-0") == {"namespace": "bench", "pod": "llm-0"}
    assert target_labels("http://10.0.0.7:8000/v1", None) == {"instance": "10.0.0.7:8000"}
    assert name_regex(["a.b", "vllm:x"]) == "a\\.b|vllm:x"
    assert names_query(["te_queue_size"], LLM) == 'count by (__name__) ({__name__=~"te_queue_size",namespace="bench",' \
                                                  'pod="llm-0"})'
    assert server_query(["nv_inference_count", "nv_inference_count_total"], {"instance": "h:1"}, largest=True) == \
        'max({__name__=~"nv_inference_count|nv_inference_count_total",instance="h:1"})'
    names = every_name()  # each counter in both spellings: an exporter may have written it without _total
    assert {"nv_inference_queue_duration_us", "nv_inference_queue_duration_us_total"} <= set(names)
    assert "vllm:request_queue_time_seconds_sum" in names and "bench_server_queue_depth" in names


def test_each_classs_server_series_over_a_stage_window(page_server: PageServer, tmp_path: Path,
                                                        start_prometheus: Callable[[list[ScrapeJob]],
                                                                                   PrometheusProcess]) -> None:
    embedding = ServerMetrics()
    embedding.queue_depth.set(2)
    for seconds in (0.1, 0.3):
        embedding.queue_time.observe(seconds)
    page_server.set("/llm", (PAGES / "vllm.txt").read_text())
    page_server.set("/embedding", embedding.render().decode())
    prometheus = start_prometheus(JOBS)

    def times(value: float) -> list[float]:
        found = prometheus.samples('bench_server_queue_depth{pod="embedding-0"}')
        return sorted(t for _, points in found for t, v in points if v == value)

    prometheus.wait_for("three scrapes of phase 1", lambda: len(times(2)) >= 3)
    embedding.queue_depth.set(5)
    for _ in range(3):
        embedding.queue_time.observe(0.2)
    page_server.set("/embedding", embedding.render().decode())
    prometheus.wait_for("three scrapes of phase 2", lambda: len(times(5)) >= 3)
    start, end = times(2)[0], times(5)[-1]

    with PrometheusSeries(prometheus.url, timeout_s=30) as client:
        got = query_stage(client, {"llm": LLM, "embedding": EMBEDDING, "asr": {"namespace": "bench", "pod": "none"}},
                          start, end, 1.0)
    llm, emb, asr = got["llm"], got["embedding"], got["asr"]
    assert llm.engine == "vllm" and llm.notes == []
    assert llm.names[Q.QUEUE_DEPTH] == "vllm:num_requests_waiting"
    assert llm.names[Q.PREEMPTIONS] == "vllm:num_preemptions_total"
    assert {p.value for p in llm.points if p.quantity == Q.QUEUE_DEPTH} == {12.0}
    kv = [p.value for p in llm.points if p.quantity == Q.KV_CACHE]
    assert kv and kv == pytest.approx([0.8347296494355319] * len(kv))
    assert emb.engine == "reference" and emb.notes == []
    depth = [p.value for p in emb.points if p.quantity == Q.QUEUE_DEPTH]
    assert depth[0] == 2.0 and depth[-1] == 5.0 and set(depth) == {2.0, 5.0}
    series = by_quantity(emb.points)["embedding"]
    assert increase(series[Q.QUEUE_TIME]) == pytest.approx(0.6) and increase(series[Q.QUEUED]) == 3
    assert all(p.workload == "embedding" and start <= p.t <= end for p in emb.points)
    stats = server_stats([], series, start, end, emb.engine)
    assert stats is not None and stats.queue_depth is not None and stats.queue_depth.peak == 5.0
    assert asr.engine is None and asr.points == []
    assert asr.notes == ["asr: no server series of a known engine (reference, vllm, sglang, tei, triton, infinity) at "
                         "namespace=bench,pod=none"]
