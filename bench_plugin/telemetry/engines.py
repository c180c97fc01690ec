"""Engines: which inference server a metrics page comes from, and its series in the one vocabulary.

A page in Prometheus' text format is read into totals per series name (label sets summed: a server's
figure is the sum over its models, engines and endpoints), the engine is recognised by a series only it
exports, and each ``Quantity`` (results/server_rows.py) is read from that engine's own series: a gauge as it
is, a counter's total, or a histogram's (or summary's) ``_sum`` and ``_count``, scaled to seconds. The
names, types and units are each engine's own, read in its source (docs/telemetry.md lists them with the
files; tests/telemetry/engine_metrics holds a page of each):

- reference (this package's servers, servers/metrics.py): ``bench_server_*``.
- vLLM (v1 engine, vllm/v1/metrics/loggers.py, 0.11): ``vllm:num_requests_waiting`` / ``_running``,
  ``vllm:kv_cache_usage_perc`` (a fraction; ``vllm:gpu_cache_usage_perc`` up to 0.10), ``vllm:num_preemptions``,
  histograms ``vllm:request_queue_time_seconds`` and ``vllm:request_inference_time_seconds`` (prefill plus
  decode: the RUNNING phase), observed when a request finishes.
- SGLang (srt/observability/metrics_collector.py, srt/metrics/collector.py before 0.5.10; ``--enable-metrics``):
  ``sglang:num_queue_reqs``, ``sglang:num_running_reqs``, ``sglang:token_usage`` (gauges refreshed every 40
  decode steps), histogram ``sglang:queue_time_seconds``, counter ``sglang:num_retracted_requests`` (0.5.10 on).
  It has no per-request compute time.
- TEI (router/src/lib.rs and prometheus.rs, 1.9; ``/metrics`` on the main port of the HTTP build): ``te_queue_size``
  (inputs, not requests), histograms ``te_request_queue_duration`` and ``te_request_inference_duration``
  (seconds, per request: means over its inputs). Its ``te_batch_next_size`` counts the empty polls of an idle
  queue as batches, so it is not read as a batch size.
- Triton (``:8002/metrics``): ``nv_inference_pending_request_count``, cumulative microsecond counters
  ``nv_inference_queue_duration_us`` and ``nv_inference_compute_{input,infer,output}_duration_us`` per
  ``nv_inference_request_success``, batched ``nv_inference_count`` per ``nv_inference_exec_count``.
- infinity (infinity_emb 0.0.78, prometheus-fastapi-instrumentator): only HTTP durations on ``/metrics``; its
  queue (inputs) is in ``/models`` (``stats.queue_absolute``), which ``read_models`` reads.

prometheus_client's parser names a counter's sample ``<name>_total`` even where the page wrote it without the
suffix (TEI's and Triton's exporters do), so the reads below name counters with it.

Pure: no I/O, so each mapping is tested on recorded pages (telemetry/server_scrape.py does the reading).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from prometheus_client.parser import text_string_to_metric_families

from bench_plugin.results.server_rows import Quantity as Q

Part = Literal["value", "sum", "count"]
"""Which figure of a series: a gauge's or counter's value, a histogram's or summary's ``_sum`` or ``_count``."""


@dataclass(frozen=True)
class Read:
    """One series feeding a quantity: ``part`` of series ``name``, times ``scale``; its label sets summed (a
    server's requests over its models and engines), or for a share (KV-cache use) their largest: the fullest
    cache is the one that binds, and a sum of shares is none."""

    name: str
    part: Part = "value"
    scale: float = 1.0
    largest: bool = False

    def label(self) -> str:
        return self.name if self.part == "value" else f"{self.name}_{self.part}"


@dataclass(frozen=True)
class Engine:
    """An engine's metrics: the series that recognises it and where each quantity is read from."""

    name: str
    marker: tuple[str, ...]
    """Series names (as written on the page) of which any one says the page is this engine's."""
    reads: Mapping[Q, tuple[tuple[Read, ...], ...]]
    """Quantity -> alternatives, first found wins; an alternative is summed over its reads (all present)."""
    models_json: bool = False
    """Its queue is in ``/models`` (infinity), not on the metrics page."""


def _one(*reads: Read) -> tuple[tuple[Read, ...], ...]:
    return (reads,)


def _histogram(total: Q, count: Q, name: str) -> dict[Q, tuple[tuple[Read, ...], ...]]:
    return {total: _one(Read(name, "sum")), count: _one(Read(name, "count"))}


REFERENCE = Engine("reference", ("bench_server_queue_depth",), {
    Q.QUEUE_DEPTH: _one(Read("bench_server_queue_depth")),
    Q.RUNNING: _one(Read("bench_server_in_flight")),
    **_histogram(Q.QUEUE_TIME, Q.QUEUED, "bench_server_queue_time_seconds"),
    **_histogram(Q.COMPUTE_TIME, Q.COMPUTED, "bench_server_compute_time_seconds"),
    **_histogram(Q.BATCHED, Q.BATCHES, "bench_server_batch_size"),
})

VLLM = Engine("vllm", ("vllm:num_requests_waiting",), {
    Q.QUEUE_DEPTH: _one(Read("vllm:num_requests_waiting")),
    Q.RUNNING: _one(Read("vllm:num_requests_running")),
    Q.KV_CACHE: ((Read("vllm:kv_cache_usage_perc", largest=True),), (Read("vllm:gpu_cache_usage_perc", largest=True),)),
    Q.PREEMPTIONS: _one(Read("vllm:num_preemptions_total")),
    **_histogram(Q.QUEUE_TIME, Q.QUEUED, "vllm:request_queue_time_seconds"),
    **_histogram(Q.COMPUTE_TIME, Q.COMPUTED, "vllm:request_inference_time_seconds"),
})

SGLANG = Engine("sglang", ("sglang:num_queue_reqs",), {
    Q.QUEUE_DEPTH: _one(Read("sglang:num_queue_reqs")),
    Q.RUNNING: _one(Read("sglang:num_running_reqs")),
    Q.KV_CACHE: _one(Read("sglang:token_usage", largest=True)),
    Q.PREEMPTIONS: _one(Read("sglang:num_retracted_requests_total")),
    **_histogram(Q.QUEUE_TIME, Q.QUEUED, "sglang:queue_time_seconds"),
})

TEI = Engine("tei", ("te_queue_size",), {
    Q.QUEUE_DEPTH: _one(Read("te_queue_size")),
    **_histogram(Q.QUEUE_TIME, Q.QUEUED, "te_request_queue_duration"),
    **_histogram(Q.COMPUTE_TIME, Q.COMPUTED, "te_request_inference_duration"),
})

_US = 1e-6
TRITON = Engine("triton", ("nv_inference_pending_request_count", "nv_inference_request_success_total"), {
    Q.QUEUE_DEPTH: _one(Read("nv_inference_pending_request_count")),
    Q.QUEUE_TIME: _one(Read("nv_inference_queue_duration_us_total", scale=_US)),
    Q.QUEUED: _one(Read("nv_inference_request_success_total")),
    Q.COMPUTE_TIME: _one(Read("nv_inference_compute_input_duration_us_total", scale=_US),
                         Read("nv_inference_compute_infer_duration_us_total", scale=_US),
                         Read("nv_inference_compute_output_duration_us_total", scale=_US)),
    Q.COMPUTED: _one(Read("nv_inference_request_success_total")),
    Q.BATCHED: _one(Read("nv_inference_count_total")),
    Q.BATCHES: _one(Read("nv_inference_exec_count_total")),
})

INFINITY = Engine("infinity", ("http_request_duration_highr_seconds_count",), {}, models_json=True)

ENGINES: tuple[Engine, ...] = (REFERENCE, VLLM, SGLANG, TEI, TRITON, INFINITY)
"""Recognised in this order (the generic HTTP series of infinity last)."""


@dataclass
class Page:
    """A metrics page read into totals: series name as written (``x``, ``x_total``, ``x_sum``, ``x_count``) ->
    its value summed over label sets, and the largest of them. Histogram buckets are left out."""

    totals: dict[str, float] = field(default_factory=dict)
    largest: dict[str, float] = field(default_factory=dict)

    def get(self, read: Read) -> float | None:
        found = self.largest if read.largest else self.totals
        key = read.name if read.part == "value" else f"{read.name}_{read.part}"
        value = found.get(key)
        if value is None and read.part == "value" and not key.endswith("_total"):
            value = found.get(f"{key}_total")  # an untyped page keeps a counter's suffix
        if value is None and read.part == "value" and key.endswith("_total"):
            value = found.get(key[: -len("_total")])  # an old client writes a counter without it
        return None if value is None else value * read.scale


def parse_page(text: str) -> Page:
    """Totals per series of a page in Prometheus' text format; ValueError when it is not one."""
    page = Page()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            name = sample.name
            if name.endswith(("_bucket", "_created")) or math.isnan(sample.value):
                continue
            value = float(sample.value)
            page.totals[name] = page.totals.get(name, 0.0) + value
            page.largest[name] = max(page.largest.get(name, value), value)
    return page


def recognise(page: Page) -> Engine | None:
    """The engine whose marker series the page holds (None: none of ENGINES)."""
    for engine in ENGINES:
        if any(name in page.totals for name in engine.marker):
            return engine
    return None


@dataclass(frozen=True)
class Reading:
    """One scrape of one server: its engine, the quantities read, and the series each came from."""

    engine: str | None
    values: dict[Q, float]
    names: dict[Q, str]


def read(page: Page, engine: Engine | None = None) -> Reading:
    """The quantities ``engine`` (recognised from the page when not given) exports on ``page``."""
    engine = engine or recognise(page)
    if engine is None:
        return Reading(None, {}, {})
    values: dict[Q, float] = {}
    names: dict[Q, str] = {}
    for quantity, alternatives in engine.reads.items():
        for reads in alternatives:
            found = [page.get(r) for r in reads]
            if all(v is not None for v in found):
                values[quantity] = sum(v for v in found if v is not None)
                names[quantity] = "+".join(r.label() for r in reads)
                break
    return Reading(engine.name, values, names)


def read_models(data: Any) -> tuple[dict[Q, float], dict[Q, str]]:
    """infinity's ``GET /models`` JSON: its queue depth (``stats.queue_absolute``: inputs in its queue, summed over
    models; its ``results_pending`` is always 0 in 0.0.78, so it is not read). Empty for any other shape."""
    models = data.get("data") if isinstance(data, dict) else None
    if not isinstance(models, list):
        return {}, {}
    stats: list[dict[str, Any]] = [m["stats"] for m in models
                                   if isinstance(m, dict) and isinstance(m.get("stats"), dict)]
    values: dict[Q, float] = {}
    names: dict[Q, str] = {}
    for quantity, key in ((Q.QUEUE_DEPTH, "queue_absolute"),):
        numbers = [s[key] for s in stats if isinstance(s.get(key), (int, float)) and not isinstance(s.get(key), bool)]
        if numbers:
            values[quantity] = float(sum(numbers))
            names[quantity] = f"/models stats.{key}"
    return values, names


def known_names(engines: Iterable[Engine] = ENGINES) -> str:
    """The engines recognised, for a note on a page that is none of them."""
    return ", ".join(e.name for e in engines)
