"""Sample: one request's outcome, the unit every figure in a report is computed from.

Times are epoch seconds (``time.time()``), so samples taken on different Locust workers line up on
one timeline. Latency is measured from the INTENDED send time of an open-loop arrival, so a client
that falls behind shows up as latency and queueing, never as a quietly lower rate.
"""

from __future__ import annotations

import sys
from array import array
from dataclasses import dataclass, fields
from operator import attrgetter
from typing import Any


@dataclass(slots=True)
class Sample:
    """One request: which class and stage it belonged to, when it was meant to go, what came back."""

    workload: str
    trial: int
    segment: int
    stage: int
    seq: int
    """Arrival index within the stage (open-loop) or a running count (closed-loop)."""
    item: int
    """Index into the class's request set."""
    intended_s: float
    sent_s: float
    end_s: float
    ok: bool
    first_token_s: float | None = None
    error: str | None = None
    """Error kind: http_<status>, timeout, connection, protocol, cancelled."""
    detail: str | None = None
    status: int | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    inputs: int | None = None
    """Embedding inputs in the request (batch size)."""
    audio_s: float | None = None
    worker: str = "local"
    slot_wait_s: float | None = None
    """Seconds it waited for one of the class's ``max_in_flight`` slots before it could be sent (None: not
    recorded, stores written before it was)."""
    last_token_s: float | None = None
    """When the last chunk carrying output arrived (LLM only; None in stores before version 5)."""
    chunk_gaps: bytes | None = None
    """The gaps between consecutive output-carrying chunks after the first, in seconds, as little-endian
    float32 (LLM only): ``chunks - 1`` values, each one inter-token latency as vLLM's benchmark counts it."""
    chunks: int | None = None
    """Chunks that carried output text (LLM only)."""
    tokens_from: str | None = None
    """Where ``output_tokens`` came from: ``usage`` (the server's count) or ``chunks`` (one token per
    output-carrying chunk, for a server that sends no usage; LLM only)."""
    stream_end: str | None = None
    """How the stream ended: ``done`` (``data: [DONE]``) or ``finish`` (the connection closed after a
    chunk with a ``finish_reason``, as ``transformers serve`` ends its streams; LLM only)."""
    reply_format: str | None = None
    """How the reply's vectors came back (embedding only): ``base64`` or ``float`` (``mixed`` for a reply that
    held both), whatever the request asked for: a server may answer floats to a base64 request (None in
    stores before version 6)."""
    server_queue_s: float | None = None
    """Seconds the server says the request waited in its queue before its first scheduling (TEI's and the
    reference servers' ``x-queue-time`` reply header); None where the server did not say (a streamed reply,
    an engine without the header, stores before version 7)."""
    server_compute_s: float | None = None
    """Seconds the server says it spent on the request from its first scheduling to its end (``x-inference-time``)."""

    @property
    def latency_ms(self) -> float:
        """End-to-end latency from the intended send time."""
        return (self.end_s - self.intended_s) * 1000.0

    @property
    def ttft_ms(self) -> float | None:
        """Time to first token from the intended send time (LLM only)."""
        return None if self.first_token_s is None else (self.first_token_s - self.intended_s) * 1000.0

    @property
    def tpot_ms(self) -> float | None:
        """Time per output token after the first (LLM only): (last token - first) / (tokens - 1), as vLLM's
        and guidellm's benchmarks define it (the stream's end stands in for the last token in older stores)."""
        if self.first_token_s is None or not self.output_tokens or self.output_tokens < 2:
            return None
        last = self.last_token_s if self.last_token_s is not None else self.end_s
        return (last - self.first_token_s) * 1000.0 / (self.output_tokens - 1)

    def itl_ms(self) -> list[float]:
        """The inter-token latencies of the request (ms): one per gap between output-carrying chunks."""
        if not self.chunk_gaps:
            return []
        gaps = array("f", self.chunk_gaps)
        if sys.byteorder != "little":
            gaps.byteswap()
        return [gap * 1000.0 for gap in gaps]

    @property
    def queue_ms(self) -> float:
        """Client-side queueing: how late the request actually left."""
        return (self.sent_s - self.intended_s) * 1000.0

    @property
    def send_lag_ms(self) -> float:
        """How late the load generator itself sent it: queueing less the wait for a free slot."""
        return (self.sent_s - self.intended_s - (self.slot_wait_s or 0.0)) * 1000.0

    def to_row(self) -> list[Any]:
        """The field values in SAMPLE_FIELDS order: the compact form workers ship samples in (one C call per
        sample, not one per field: a worker makes thousands a second)."""
        return list(_ROW(self))

    @classmethod
    def from_row(cls, row: list[Any]) -> Sample:
        """The inverse of to_row."""
        return cls(*row)


SAMPLE_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(Sample))
"""Field names in declaration order: the column order of the results store."""
_ROW = attrgetter(*SAMPLE_FIELDS)


def pack_gaps(gaps: list[float]) -> bytes | None:
    """``Sample.chunk_gaps`` from gaps in seconds (None when there are none)."""
    if not gaps:
        return None
    packed = array("f", gaps)
    if sys.byteorder != "little":
        packed.byteswap()
    return packed.tobytes()


RETRYABLE_STATUSES = frozenset({404, 408, 409, 425, 429})
"""Client-error statuses a server also gives while it is busy or still loading (404: a model not yet
registered; 408, 409, 425, 429: try again later), so they say nothing certain about the request itself."""


def protocol_signature(sample: Sample) -> str | None:
    """The sample's error kind where the request itself is what failed, whatever the load: a reply the
    class cannot read (``protocol``), a length the server did not honour (``output_length``), a client
    error the server gives to this request every time (``http_4xx`` but RETRYABLE_STATUSES). None for a
    success and for what load causes (timeouts, 5xx, refused connections, errors in the stream)."""
    if sample.ok or sample.error is None:
        return None
    if sample.error in ("protocol", "output_length"):
        return sample.error
    if sample.error.startswith("http_4") and sample.status not in RETRYABLE_STATUSES:
        return sample.error
    return None
