"""Server rows: what an inference server said about itself on its metrics endpoint, in one vocabulary.

Every engine names the same facts differently (vLLM's ``vllm:num_requests_waiting``, TEI's ``te_queue_size``,
Triton's ``nv_inference_pending_request_count`` are all a queue depth; telemetry/engines.py maps each). What
is stored is one ``ServerPoint(t, workload, quantity, value)`` per quantity and scrape, in the vocabulary of
``Quantity``: levels as read (queue depth, running requests, KV-cache use) and cumulative totals as the
server counts them (time spent queued and computing with the number of requests it covers, batched items
with the number of batches, preemptions), so any window's means come from two readings (analysis/queueing.py)
whatever the server's own histogram buckets were.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

SERVER_FIELDS = ("t", "workload", "quantity", "value")
"""Column order of a point, for the recorder's INSERT."""


class Quantity(StrEnum):
    """One fact about a server, whichever engine exports it; the stored ``quantity`` column."""

    QUEUE_DEPTH = "queue_depth"
    """Requests waiting to be scheduled (a level)."""
    RUNNING = "running"
    """Requests being processed: scheduled into the running batch, not yet finished (a level)."""
    KV_CACHE = "kv_cache_use"
    """The share of the KV cache in use, 0 to 1 (a level; LLM engines only)."""
    PREEMPTIONS = "preemptions"
    """Requests preempted so far (a total)."""
    QUEUE_TIME = "queue_time_s"
    """Seconds requests spent waiting before their first scheduling, summed over requests (a total)."""
    QUEUED = "queue_time_count"
    """Requests QUEUE_TIME covers (a total)."""
    COMPUTE_TIME = "compute_time_s"
    """Seconds requests spent being processed after their first scheduling, summed (a total)."""
    COMPUTED = "compute_time_count"
    """Requests COMPUTE_TIME covers (a total)."""
    BATCHED = "batched_items"
    """Items (sequences, inputs, clips) put into batches, summed over batches (a total)."""
    BATCHES = "batches"
    """Batches (model steps) run (a total)."""


LEVELS: frozenset[Quantity] = frozenset({Quantity.QUEUE_DEPTH, Quantity.RUNNING, Quantity.KV_CACHE})
"""Quantities read as levels; every other one is a running total, compared between two readings."""

TIMED: tuple[tuple[Quantity, Quantity], ...] = ((Quantity.QUEUE_TIME, Quantity.QUEUED),
                                                 (Quantity.COMPUTE_TIME, Quantity.COMPUTED),
                                                 (Quantity.BATCHED, Quantity.BATCHES))
"""(total, count) pairs whose ratio over a window is a mean: queue time, compute time, batch size."""


@dataclass(frozen=True, slots=True)
class ServerPoint:
    """One quantity of one class's server at one scrape."""

    t: float
    """Epoch seconds (``time.time()``) when the scrape returned; the same clock as samples."""
    workload: str
    quantity: str
    """A ``Quantity`` value (kept as text: a store may hold quantities a later version added)."""
    value: float

    def as_tuple(self) -> tuple[float, str, str, float]:
        """The point in SERVER_FIELDS order."""
        return (self.t, self.workload, self.quantity, self.value)


class ServerSource(BaseModel):
    """Where one class's server metrics came from during a segment, and what could not be had."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    workload: str
    url: str
    """The metrics endpoint read."""
    engine: str | None
    """The engine recognised from what the endpoint exports (``reference``, ``vllm``, ``sglang``, ``tei``,
    ``triton``, ``infinity``), or None where none was."""
    names: dict[str, str] = Field(default_factory=dict)
    """Quantity -> the engine's own series it was read from (several joined with ``+``)."""
    scrapes: int = 0
    """Scrapes that returned a page."""
    problems: dict[str, int] = Field(default_factory=dict)
    """Each distinct failure (unreachable, unreadable, unrecognised) with how many scrapes it hit."""
