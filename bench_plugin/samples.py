"""Sample: one request's outcome, the unit every figure in a report is computed from.

Times are epoch seconds (``time.time()``), so samples taken on different Locust workers line up on
one timeline. Latency is measured from the INTENDED send time of an open-loop arrival, so a client
that falls behind shows up as latency and queueing, never as a quietly lower rate.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
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
        """Time per output token after the first (LLM only): (end - first) / (tokens - 1)."""
        if self.first_token_s is None or not self.output_tokens or self.output_tokens < 2:
            return None
        return (self.end_s - self.first_token_s) * 1000.0 / (self.output_tokens - 1)

    @property
    def queue_ms(self) -> float:
        """Client-side queueing: how late the request actually left."""
        return (self.sent_s - self.intended_s) * 1000.0

    @property
    def send_lag_ms(self) -> float:
        """How late the load generator itself sent it: queueing less the wait for a free slot."""
        return (self.sent_s - self.intended_s - (self.slot_wait_s or 0.0)) * 1000.0

    def to_row(self) -> list[Any]:
        """The field values in SAMPLE_FIELDS order: the compact form workers ship samples in."""
        return [getattr(self, name) for name in SAMPLE_FIELDS]

    @classmethod
    def from_row(cls, row: list[Any]) -> Sample:
        """The inverse of to_row."""
        return cls(*row)


SAMPLE_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(Sample))
"""Field names in declaration order: the column order of the results store."""
