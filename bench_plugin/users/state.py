"""What the users of one Locust process should be doing now: the stage assignment, and where samples go.

The campaign controller (master or local runner) announces each stage with a ``bench_plugin_stage``
custom message; every process that runs users (the local runner, or each worker) keeps the latest
assignment here. Drivers block on it, send their class's arrivals, and hand each finished sample to
the sink: the recorder on a local runner, a buffer shipped with ``report_to_master`` on a worker.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gevent
from gevent.event import Event

from bench_plugin.inputs import RequestSet
from bench_plugin.samples import Sample


@dataclass(frozen=True)
class ClassLoad:
    """One class's load in a stage: where to send, which model, which arrival process, how much."""

    url: str
    model: str
    arrival: str
    load: float
    """Poisson: requests per second (all workers together). Closed: concurrent request loops."""
    timeout_s: float
    max_in_flight: int
    options: dict[str, Any] = field(default_factory=dict)
    """Class-specific request options (e.g. the LLM api and fixed_output)."""


@dataclass(frozen=True)
class StageAssignment:
    """A stage as the users see it; identical on every worker except worker_index."""

    trial: int
    segment: int
    stage: int
    start_s: float
    end_s: float
    seed: int
    classes: dict[str, ClassLoad]
    worker_index: int = 0
    worker_count: int = 1

    @property
    def key(self) -> tuple[int, int, int]:
        """Identifies the stage within a campaign."""
        return (self.trial, self.segment, self.stage)

    def to_message(self) -> dict[str, Any]:
        """The custom-message payload."""
        data = dict(self.__dict__)
        data["classes"] = {name: dict(load.__dict__) for name, load in self.classes.items()}
        return data

    @classmethod
    def from_message(cls, data: dict[str, Any]) -> StageAssignment:
        """The inverse of to_message."""
        data = dict(data)
        data["classes"] = {name: ClassLoad(**load) for name, load in data["classes"].items()}
        return cls(**data)


class LoadState:
    """The current assignment and in-flight bookkeeping of one process's users."""

    def __init__(self, request_sets: dict[str, RequestSet], sink: Callable[[Sample], None]) -> None:
        self.request_sets = request_sets
        self.sink = sink
        self.worker_id = "local"
        self._assignment: StageAssignment | None = None
        self._stopped: set[tuple[int, int, int]] = set()
        self._changed = Event()
        self.pending: dict[int, tuple[str, tuple[int, int, int], float]] = {}
        """Requests sent and not yet ended: token -> (class, stage key, intended send time)."""

    def assign(self, assignment: StageAssignment) -> None:
        """Start a stage (called by the message handler)."""
        self._assignment = assignment
        self._changed.set()
        self._changed = Event()

    def stop_stage(self, key: tuple[int, int, int]) -> None:
        """End a stage's arrivals early (rollback, interruption): no new request of it is sent."""
        self._stopped.add(key)
        self._changed.set()
        self._changed = Event()

    def is_active(self, key: tuple[int, int, int]) -> bool:
        """Whether arrivals of stage ``key`` may still be sent."""
        return key not in self._stopped and self._assignment is not None and self._assignment.key == key

    def wait_for_new(self, last_key: tuple[int, int, int] | None, timeout: float) -> StageAssignment | None:
        """The current assignment if it is newer than ``last_key``; else wait up to ``timeout`` for one."""
        current = self._assignment
        if current is not None and current.key != last_key and self.is_active(current.key):
            return current
        self._changed.wait(timeout)
        current = self._assignment
        if current is not None and current.key != last_key and self.is_active(current.key):
            return current
        return None

    def wait_stop(self, key: tuple[int, int, int], until_s: float) -> None:
        """Sleep until epoch ``until_s`` or until stage ``key`` stops, whichever is first."""
        while self.is_active(key):
            remaining = until_s - time.time()
            if remaining <= 0:
                return
            self._changed.wait(min(remaining, 1.0))

    def total_in_flight(self) -> int:
        """Requests sent and not yet ended, over all classes."""
        return len(self.pending)

    def in_flight_of(self, key: tuple[int, int, int]) -> list[tuple[str, float]]:
        """(class, intended send time) of every request of stage ``key`` still in flight."""
        return [(workload, intended) for workload, k, intended in self.pending.values() if k == key]

    def sleep_until(self, when_s: float, key: tuple[int, int, int]) -> bool:
        """Sleep to epoch ``when_s``; False if the stage stopped meanwhile."""
        remaining = when_s - time.time()
        if remaining > 0:
            gevent.sleep(remaining)
        return self.is_active(key)
