"""summary.json's figures of one class in one stage (ClassStats) and the percentile interval they use."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from bench_plugin.results.server_figures import ServerStats, Sparse
from bench_plugin.results.spread import Model

PerClass = dict[str, float]


class Interval(Model):
    """A percentile of n samples with its distribution-free order-statistic interval (analysis/intervals.py)."""

    q: float
    n: int
    estimate: float | None
    lo: float | None
    hi: float | None
    bounded: bool
    confidence: float


Percentiles = dict[str, float | None]
"""p50/p90/p95/p99 and mean (all None without samples)."""


class ClassStats(Sparse):
    """One class in one stage of one trial."""

    SPARSE: ClassVar[frozenset[str]] = frozenset({"server"})

    requests: int
    errors: int
    errors_by_kind: dict[str, int]
    duration_s: float
    throughput_rps: float
    latency_ms: Percentiles
    queue_ms: Percentiles
    ttft_ms: Percentiles | None = None
    tpot_ms: Percentiles | None = None
    output_tokens_per_s: float | None = None
    inputs_per_s: float | None = None
    audio_s_per_s: float | None = None
    slo_met: int | None = None
    """Requests that succeeded within every SLO of the class (None: the store names no SLO)."""
    slo_attainment: float | None = None
    """slo_met / requests (None without requests or without an SLO)."""
    goodput_rps: float | None = None
    """slo_met per second of stage time."""
    send_lag_ms: Percentiles = Field(default_factory=dict)
    """How late the load generator sent the requests (Sample.send_lag_ms)."""
    slot_waits: int = 0
    """Requests that waited for a free ``max_in_flight`` slot before they could be sent."""
    latency_ci_ms: dict[str, Interval] = Field(default_factory=dict)
    """p50/p95/p99 -> the order-statistic 95% interval of the latency percentile."""
    ttft_ci_ms: dict[str, Interval] | None = None
    tpot_ci_ms: dict[str, Interval] | None = None
    p95_note: str | None = None
    """Set when the P95 rests on too few samples to be bounded: how many it had and needs, how long would do."""
    itl_ms: Percentiles | None = None
    """LLM: inter-token latency, every gap between two output-carrying chunks of the successful requests
    pooled (vLLM's ITL: a chunk of several tokens is one gap; see tokens_per_chunk). None: not recorded."""
    itl_ci_ms: dict[str, Interval] | None = None
    tokens_per_chunk: float | None = None
    """LLM: output tokens per output-carrying chunk over the successful requests (1.0: ITL is per token)."""
    tokens_from: dict[str, int] | None = None
    """LLM: where the output token counts came from, ``usage`` (the server's) or ``chunks``, with how many requests."""
    output_lengths: str | None = None
    """LLM: ``exact`` (the server honoured the fixed output lengths) or ``model`` (output lengths set by the
    model: the server rejects or ignores ignore_eos/min_tokens, or the scenario asks for none)."""
    reply_formats: dict[str, int] | None = None
    """Embedding: how the successful replies' vectors came back (``base64``, ``float``), with how many requests;
    None where the samples do not say (stores before version 6)."""
    sole_error: str | None = None
    """Set when every request of the class failed with one and the same error that load does not cause (a
    protocol error, a 4xx): its kind and the first message. Such a stage measured the protocol, not capacity."""
    server: ServerStats | None = None
    """What the class's server said of the stage, and the requests' latency split with it (analysis/queueing.py);
    absent where its server said nothing (no metrics, no timing headers) and in files written before it."""

    @property
    def error_rate(self) -> float | None:
        """Failed requests / requests (None without requests)."""
        return self.errors / self.requests if self.requests else None
