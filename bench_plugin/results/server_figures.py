"""Server figures: summary.json's models of what each class's server said during a stage, and of where the
latency a sharing arm adds goes (analysis/queueing.py computes them; docs/analysis.md defines them).

A request's latency, from its intended send time to its last byte, is split into four parts:

- ``client``: the load generator's own wait before sending (a free ``max_in_flight`` slot, send lag);
- ``queue``: the server's queue, from the request's arrival to its first scheduling into a batch;
- ``compute``: the server's work on it, from then to its end (prefill and decode, a batch's forward pass);
- ``other``: the rest (the network, reading the reply, the server's own parsing and tokenisation).

The server's two come from each reply's own headers where the server sends them (``x-queue-time`` and
``x-inference-time``: TEI and the reference servers, for replies that are not streamed), else from its
metrics over the stage's window (the change of its queue-time and compute-time totals over the change of
the requests they count); ``other`` is what is left. These models are written only where set, so summaries
written before them read, and write, as they were.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import SerializationInfo, SerializerFunctionWrapHandler, model_serializer

from bench_plugin.results.spread import MeanPeak, Model, Spread

SplitFrom = Literal["replies", "metrics"]
"""Where the server's part of the latencies came from: each reply's headers, or the stage's metrics."""


class Sparse(Model):
    """A model whose ``SPARSE`` fields are written only where set (not None): a document written before they
    existed reads, and writes, byte for byte as it was."""

    SPARSE: ClassVar[frozenset[str]] = frozenset()

    @model_serializer(mode="wrap")
    def _sparse(self, handler: SerializerFunctionWrapHandler, info: SerializationInfo) -> Any:
        data = handler(self)
        if isinstance(data, dict):
            for key in self.SPARSE:
                if data.get(key) is None:
                    data.pop(key, None)
        return data


class LatencyParts(Model):
    """Mean milliseconds of each part of a set of requests' latency (see the module docstring)."""

    requests: int
    """How many successful requests the means are over."""
    total_ms: float
    client_ms: float
    queue_ms: float | None
    """None where the server says nothing of its queue."""
    compute_ms: float | None
    """None where the server says nothing of its compute."""
    other_ms: float | None
    """total - client - queue - compute; None where either server part is missing."""


class ServerStats(Model):
    """What one class's server said during one stage."""

    engine: str | None
    """The engine recognised from its metrics (telemetry/engines.py); None where none were read."""
    split_from: SplitFrom | None
    """Where the server's parts of ``mean`` and ``p95`` came from; None where the server said neither."""
    mean: LatencyParts | None = None
    """The successful requests' mean latency, split."""
    p95: LatencyParts | None = None
    """The requests around the P95 (those ranked between the 92.5th and the 97.5th percentile of latency),
    split: where the tail's time goes. Only from replies (a server's metrics cannot say which request was slow)."""
    queue_depth: MeanPeak | None = None
    """Requests waiting in the server's queue over the stage's reads (``points``: how many)."""
    running: MeanPeak | None = None
    kv_cache_use: MeanPeak | None = None
    batch_size: float | None = None
    """Items per batch over the stage (the change of the batched items over the change of the batches)."""
    preemptions: float | None = None
    """Requests the server preempted during the stage."""
    server_requests: float | None = None
    """Requests the server counted in its compute (else queue) time during the stage."""


class PartsGrowth(Model):
    """How much each part of a class's latency grew under an arm against the control at the same stage: arm
    minus control, per paired repeat, in ms (mean and 95% interval over the pairs)."""

    control_total_ms: Spread
    """The control's own total, the base the growth is read against."""
    total_ms: Spread
    client_ms: Spread
    queue_ms: Spread | None
    compute_ms: Spread | None
    other_ms: Spread | None


class LatencySplit(Model):
    """Where the latency an arm adds to one class at one stage goes (analysis/queueing.py)."""

    split_from: SplitFrom
    """The basis of every pair (the arm's and the control's both): ``replies`` only where both had them."""
    mean: PartsGrowth
    p95: PartsGrowth | None = None
    """The same for the requests around the P95 (replies only)."""


class LatencyGrowth(Model):
    """Where the latency an arm adds goes, in its answer: the class it slows the most at the stage its answer
    rests on (else the highest stage split), with that class's split (analysis/queueing.answer_growth)."""

    stage: int
    workload: str
    slowdown_p95: float | None
    """The class's P95 there over the control's (the geometric mean over paired repeats)."""
    split: LatencySplit
