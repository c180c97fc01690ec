"""Prometheus metrics exported by every reference server on ``GET /metrics``.

Each server owns a private :class:`CollectorRegistry` (never the process-global one)
so several apps can live in one process (tests) without name clashes. Engine threads
update these objects directly: prometheus_client metrics are thread-safe.

Every request's time in the server is split in two, as the engines' own metrics split it (vLLM's
``request_queue_time`` and ``request_inference_time``, TEI's queue and inference durations): queued, from
arrival to its first scheduling into a batch, and computing, from then to its end. Both are histograms here,
and a reply that is not streamed says its own two in TEI's reply headers (``x-queue-time``,
``x-inference-time``, milliseconds), which the load generator records on the request's sample.
"""

from __future__ import annotations

import time

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

_BATCH_BUCKETS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 512)
_QUEUE_TIME_BUCKETS = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
)


class ServerMetrics:
    """The server-side metrics a benchmark correlates with client-side latencies."""

    content_type = CONTENT_TYPE_LATEST

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.queue_depth = Gauge(
            "bench_server_queue_depth", "Requests waiting to be scheduled into a batch", registry=r
        )
        self.in_flight = Gauge("bench_server_in_flight", "Requests being processed", registry=r)
        self.batch_size = Histogram(
            "bench_server_batch_size", "Sequences per model step", buckets=_BATCH_BUCKETS, registry=r
        )
        self.queue_time = Histogram(
            "bench_server_queue_time_seconds",
            "Time from request arrival to first being scheduled into a batch, observed as the request ends",
            buckets=_QUEUE_TIME_BUCKETS,
            registry=r,
        )
        self.compute_time = Histogram(
            "bench_server_compute_time_seconds",
            "Time from a request's first scheduling into a batch to its end, observed as the request ends",
            buckets=_QUEUE_TIME_BUCKETS,
            registry=r,
        )
        self.requests = Counter("bench_server_requests", "HTTP requests answered", ["endpoint", "status"], registry=r)
        self.generated_tokens = Counter("bench_server_generated_tokens", "Tokens generated (llm, asr)", registry=r)
        self.ready = Gauge("bench_server_ready", "1 once the model is loaded and warmed", registry=r)

    def render(self) -> bytes:
        """The registry in Prometheus text exposition format."""
        return generate_latest(self.registry)


QUEUE_TIME_HEADER = "x-queue-time"
"""Milliseconds the request waited before its first scheduling (TEI's header name and unit)."""
INFERENCE_TIME_HEADER = "x-inference-time"
"""Milliseconds from its first scheduling to its end (TEI's header name and unit)."""


class RequestTimer:
    """One request's time in the server: made at arrival; the engine marks its first scheduling (from any
    thread); ``done`` observes both parts and gives them as reply headers."""

    __slots__ = ("arrival", "scheduled")

    def __init__(self) -> None:
        self.arrival = time.perf_counter()
        self.scheduled: float | None = None

    def mark_scheduled(self, now: float) -> None:
        """The request (or the first of its inputs) went into a batch at ``now`` (perf_counter)."""
        if self.scheduled is None or now < self.scheduled:
            self.scheduled = now

    def done(self, metrics: ServerMetrics) -> dict[str, str]:
        """Observe the request's queue and compute time; the headers that say them (ms)."""
        now = time.perf_counter()
        scheduled = self.scheduled if self.scheduled is not None else now
        queued, computing = max(scheduled - self.arrival, 0.0), max(now - scheduled, 0.0)
        metrics.queue_time.observe(queued)
        metrics.compute_time.observe(computing)
        return {QUEUE_TIME_HEADER: f"{queued * 1000.0:.3f}", INFERENCE_TIME_HEADER: f"{computing * 1000.0:.3f}"}
