"""Engines: each engine's /metrics page is recognised and read into the one vocabulary.

The pages in engine_metrics/ are each engine's own series as its source defines and its exporter writes them
(the first lines of each file say which release, which files, and that the page was composed from them;
engine_metrics/SOURCES.md lists every series). What a page says is known, so every quantity is checked
against the figure the page holds, summed over its label sets as the reader must.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench_plugin.results.server_rows import Quantity as Q
from bench_plugin.telemetry import engines

PAGES = Path(__file__).resolve().parent / "engine_metrics"


def page(name: str) -> engines.Page:
    return engines.parse_page((PAGES / f"{name}.txt").read_text(encoding="utf-8"))


def reading(name: str) -> engines.Reading:
    found = engines.read(page(name))
    assert found.engine == name
    return found


def test_vllm_its_queue_running_batch_kv_cache_preemptions_and_its_two_histograms() -> None:
    r = reading("vllm")
    assert r.values[Q.QUEUE_DEPTH] == 12 and r.values[Q.RUNNING] == 48
    assert r.values[Q.KV_CACHE] == pytest.approx(0.8347296494355319)
    assert r.names[Q.KV_CACHE] == "vllm:kv_cache_usage_perc"
    assert r.values[Q.PREEMPTIONS] == 9
    # the histograms' _sum and _count as the page writes them: 1200 finished requests
    assert r.values[Q.QUEUED] == r.values[Q.COMPUTED] == 1200
    text = (PAGES / "vllm.txt").read_text()
    assert "vllm:request_queue_time_seconds_sum{engine=\"0\",model_name=" in text
    assert r.names[Q.QUEUE_TIME] == "vllm:request_queue_time_seconds_sum"
    assert r.names[Q.COMPUTE_TIME] == "vllm:request_inference_time_seconds_sum"
    assert 0 < r.values[Q.QUEUE_TIME] < r.values[Q.COMPUTE_TIME]


def test_vllm_before_0_10_names_its_kv_cache_otherwise() -> None:
    text = (PAGES / "vllm.txt").read_text()
    older = "\n".join(line for line in text.splitlines() if "kv_cache_usage_perc" not in line) + "\n"
    r = engines.read(engines.parse_page(older))
    assert r.names[Q.KV_CACHE] == "vllm:gpu_cache_usage_perc"
    assert r.values[Q.KV_CACHE] == pytest.approx(0.8347296494355319)


def test_sglang_has_a_queue_time_and_no_compute_time() -> None:
    r = reading("sglang")
    assert r.values[Q.QUEUE_DEPTH] == 9 and r.values[Q.RUNNING] == 52
    assert r.values[Q.KV_CACHE] == pytest.approx(0.70)
    assert r.values[Q.PREEMPTIONS] == 6 and r.names[Q.PREEMPTIONS] == "sglang:num_retracted_requests_total"
    assert r.values[Q.QUEUED] == 1200
    assert Q.COMPUTE_TIME not in r.values and Q.COMPUTED not in r.values


def test_tei_queue_and_inference_durations_and_no_batch_size() -> None:
    r = reading("tei")
    assert r.values[Q.QUEUE_DEPTH] == 37  # te_queue_size: inputs waiting
    assert r.values[Q.QUEUED] == r.values[Q.COMPUTED] == 3000
    assert r.names[Q.COMPUTE_TIME] == "te_request_inference_duration_sum"
    assert Q.BATCHED not in r.values  # te_batch_next_size counts an idle queue's empty polls as batches


def test_triton_sums_its_model_and_instance_series_and_scales_microseconds() -> None:
    p = page("triton")
    r = reading("triton")
    assert r.values[Q.QUEUE_DEPTH] == p.totals["nv_inference_pending_request_count"]
    assert r.values[Q.QUEUE_TIME] == pytest.approx(p.totals["nv_inference_queue_duration_us_total"] * 1e-6)
    compute_us = sum(p.totals[f"nv_inference_compute_{part}_duration_us_total"]
                     for part in ("input", "infer", "output"))
    assert r.values[Q.COMPUTE_TIME] == pytest.approx(compute_us * 1e-6)
    assert r.names[Q.COMPUTE_TIME].count("+") == 2
    assert r.values[Q.QUEUED] == p.totals["nv_inference_request_success_total"]
    assert r.values[Q.BATCHES] == p.totals["nv_inference_exec_count_total"]


def test_the_reference_servers_page() -> None:
    from bench_plugin.servers.metrics import ServerMetrics

    metrics = ServerMetrics()
    metrics.queue_depth.set(3)
    metrics.in_flight.set(5)
    for seconds in (0.01, 0.03):
        metrics.queue_time.observe(seconds)
        metrics.compute_time.observe(seconds * 10)
    metrics.batch_size.observe(4)
    metrics.batch_size.observe(2)
    r = engines.read(engines.parse_page(metrics.render().decode()))
    assert r.engine == "reference"
    assert r.values[Q.QUEUE_DEPTH] == 3 and r.values[Q.RUNNING] == 5
    assert r.values[Q.QUEUE_TIME] == pytest.approx(0.04) and r.values[Q.QUEUED] == 2
    assert r.values[Q.COMPUTE_TIME] == pytest.approx(0.4) and r.values[Q.COMPUTED] == 2
    assert r.values[Q.BATCHED] == 6 and r.values[Q.BATCHES] == 2


def test_label_sets_are_summed_and_a_share_takes_the_largest() -> None:
    text = """\
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0"} 3
vllm:num_requests_waiting{engine="1"} 4
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0"} 0.25
vllm:kv_cache_usage_perc{engine="1"} 0.75
"""
    r = engines.read(engines.parse_page(text))
    assert r.values[Q.QUEUE_DEPTH] == 7 and r.values[Q.KV_CACHE] == 0.75


def test_an_untyped_page_keeps_a_counters_suffix() -> None:
    r = engines.read(engines.parse_page("nv_inference_pending_request_count 2\nnv_inference_exec_count 5\n"
                                        "nv_inference_count 20\n"))
    assert r.engine == "triton" and r.values[Q.BATCHED] == 20 and r.values[Q.BATCHES] == 5


def test_a_page_of_no_known_engine_reads_nothing_and_a_bad_page_is_an_error() -> None:
    r = engines.read(engines.parse_page("# TYPE up gauge\nup 1\n"))
    assert r.engine is None and not r.values
    with pytest.raises(ValueError):
        engines.parse_page("this is { not a metrics page\n")


def test_infinity_is_recognised_by_its_http_series_and_reads_its_queue_from_models() -> None:
    text = ('# TYPE http_request_duration_highr_seconds histogram\n'
            'http_request_duration_highr_seconds_bucket{le="+Inf"} 3\n'
            'http_request_duration_highr_seconds_count 3\nhttp_request_duration_highr_seconds_sum 0.5\n')
    assert engines.recognise(engines.parse_page(text)) is engines.INFINITY
    assert engines.recognise(page("vllm")) is engines.VLLM  # vLLM mounts the same instrumentator: vLLM first
    values, names = engines.read_models({"data": [{"id": "a", "stats": {"queue_absolute": 30, "results_pending": 0}},
                                                   {"id": "b", "stats": {"queue_absolute": 2}}]})
    assert values == {Q.QUEUE_DEPTH: 32.0} and names == {Q.QUEUE_DEPTH: "/models stats.queue_absolute"}
    assert engines.read_models({"object": "list"}) == ({}, {})
