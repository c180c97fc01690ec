"""Prometheus metrics exported by every reference server on ``GET /metrics``.

Each server owns a private :class:`CollectorRegistry` (never the process-global one)
so several apps can live in one process (tests) without name clashes. Engine threads
update these objects directly: prometheus_client metrics are thread-safe.
"""

from __future__ import annotations

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
            "Time from request arrival to first being scheduled into a batch",
            buckets=_QUEUE_TIME_BUCKETS,
            registry=r,
        )
        self.requests = Counter("bench_server_requests", "HTTP requests answered", ["endpoint", "status"], registry=r)
        self.generated_tokens = Counter("bench_server_generated_tokens", "Tokens generated (llm, asr)", registry=r)
        self.ready = Gauge("bench_server_ready", "1 once the model is loaded and warmed", registry=r)

    def render(self) -> bytes:
        """The registry in Prometheus text exposition format."""
        return generate_latest(self.registry)
