"""What the load of one Locust process is doing: the stage assignment, its loops, and where samples go.

The campaign controller (master or local runner) announces each stage with its shares: which
arrivals of which class this process sends (loadgen/shares.py). Every process that generates load
(the local runner, or each worker) keeps the assignment here and runs one loop per class it holds a
share of, on that class's sender: one instance of the locustfile's user class for the class, made
here, used for its requests and HTTP connection pool and never spawned by Locust (open-loop
arrivals are not users; Locust spreading users over workers must not decide who sends what).
Finished samples and the end of each loop go to a reporter: the master's fleet on a local runner,
the courier that ships them to the master on a worker. From its first stage on, the process's stall
monitor (loadgen/stalls.py) watches its event loop; with each stage's CPU use goes what that saw.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import gevent
from gevent.event import Event
from gevent.pool import Group

from bench_plugin.loadgen import collector
from bench_plugin.loadgen.ledger import StageKey
from bench_plugin.loadgen.runners import Runners
from bench_plugin.loadgen.shares import Share
from bench_plugin.loadgen.stalls import StallMonitor, thread_busy_s
from bench_plugin.results.samples import Sample
from bench_plugin.results.summary import GeneratorStalls
from bench_plugin.scenario.request_sets import RequestSet


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
    """A stage as one process's users see it; identical on every process except its shares."""

    trial: int
    segment: int
    stage: int
    start_s: float
    end_s: float
    seed: int
    classes: dict[str, ClassLoad]
    shares: dict[str, Share] = field(default_factory=dict)
    """Class -> the arrivals this process sends; a class it has no share of is sent elsewhere."""

    @property
    def key(self) -> StageKey:
        """Identifies the stage within a campaign."""
        return (self.trial, self.segment, self.stage)

    @property
    def duration_s(self) -> float:
        """The stage's length, to the microsecond (epoch-second arithmetic leaves float noise below that)."""
        return round(self.end_s - self.start_s, 6)

    def with_shares(self, shares: dict[str, Share]) -> StageAssignment:
        """The same stage with this process's shares."""
        return StageAssignment(self.trial, self.segment, self.stage, self.start_s, self.end_s, self.seed,
                               self.classes, dict(shares))

    def to_message(self) -> dict[str, Any]:
        """The custom-message payload."""
        data = dict(self.__dict__)
        data["classes"] = {name: dict(load.__dict__) for name, load in self.classes.items()}
        data["shares"] = {name: [share.index, share.count] for name, share in self.shares.items()}
        return data

    @classmethod
    def from_message(cls, data: dict[str, Any]) -> StageAssignment:
        """The inverse of to_message."""
        data = dict(data)
        data["classes"] = {name: ClassLoad(**load) for name, load in data["classes"].items()}
        data["shares"] = {name: Share(*pair) for name, pair in data.get("shares", {}).items()}
        return cls(**data)


class Reporter(Protocol):
    """Where a process's results go (the master's fleet, or a worker's courier)."""

    def sample(self, sample: Sample) -> None:
        """One finished request."""

    def finished(self, key: StageKey, workload: str, sent: int, note: str | None) -> None:
        """The loop of ``workload`` in stage ``key`` ended having sent ``sent`` requests."""

    def usage(self, key: StageKey, cpu_s: float, wall_s: float, stalls: GeneratorStalls | None = None) -> None:
        """This process used ``cpu_s`` CPU seconds over the ``wall_s`` seconds it spent sending stage ``key``;
        ``stalls``: what its stall monitor saw meanwhile (StallMonitor.report)."""


class Sender(Protocol):
    """What sends one class's share of a stage (users/base.py's WorkloadUser)."""

    @property
    def workload(self) -> str:
        """The class it drives."""

    def run_share(self, assignment: StageAssignment, share: Share) -> None:
        """Send the share's arrivals at their times; return once the last has left or the stage stopped."""


class LoadState:
    """The current assignment, the loops sending it, and in-flight bookkeeping of one process's users."""

    def __init__(self, request_sets: dict[str, RequestSet], senders: Mapping[str, Callable[[], Sender]],
                 reporter: Reporter | None = None, worker_id: str = "local") -> None:
        self.request_sets = request_sets
        """Class -> its request set; on a worker, filled in when the master's setup arrives."""
        self.makers = dict(senders)
        """Class -> how to make its sender (the classes this process can send)."""
        self.reporter = reporter
        self.worker_id = worker_id
        self._stopped: set[StageKey] = set()
        self._changed = Event()
        self._senders: dict[str, Sender] = {}
        self._sent: dict[tuple[StageKey, str], int] = {}
        self.loops = Group()
        """One greenlet per (stage, class) share being sent."""
        self.requests = Runners()
        """The greenlets that run the requests in flight (and closed-loop request loops), one at a time each."""
        self.pending: dict[int, tuple[str, StageKey, float]] = {}
        """Requests sent and not yet ended: token -> (class, stage key, intended send time)."""
        self._tokens = itertools.count()
        self._sending: dict[StageKey, tuple[int, float, float, float | None]] = {}
        """Stage key -> (its loops still running, and when it was assigned: epoch, process CPU seconds,
        the loop thread's busy seconds)."""
        self.stalls = StallMonitor()
        """The event loop's stall monitor: started by the first stage assigned, stopped by stop_all."""

    @property
    def classes(self) -> list[str]:
        """The classes this process can send (those its locustfile has a user class of)."""
        return sorted(self.makers)

    def assign(self, assignment: StageAssignment) -> None:
        """Start a stage: one loop per class this process holds a share of (called by the message handler).

        From now until its last loop ends, the process's CPU time is the stage's (Reporter.usage).
        """
        loops = []
        for name, share in assignment.shares.items():
            if name not in self.makers:
                self.finish(assignment.key, name, f"this process's locustfile has no {name} user class")
                continue
            sender = self._senders.get(name)
            if sender is None:
                sender = self._senders[name] = self.makers[name]()
            loops.append((sender, share))
        if loops:
            self.stalls.start()
            collector.hold()  # no collection pauses a send until the stage's last request has ended
            self._sending[assignment.key] = (len(loops), time.time(), time.process_time(), thread_busy_s())
        for sender, share in loops:
            self.loops.spawn(self._loop, sender, assignment, share)

    def _loop(self, sender: Sender, assignment: StageAssignment, share: Share) -> None:
        try:
            sender.run_share(assignment, share)
        finally:
            self.finish(assignment.key, sender.workload)
            self._loop_ended(assignment.key)

    def _loop_ended(self, key: StageKey) -> None:
        """One loop of stage ``key`` ended; after the last, report the process's CPU use while sending it."""
        left, began_s, began_cpu_s, began_busy_s = self._sending.pop(key, (0, 0.0, 0.0, None))
        if left > 1:
            self._sending[key] = (left - 1, began_s, began_cpu_s, began_busy_s)
        elif left == 1 and self.reporter is not None:
            now_s, busy_s = time.time(), thread_busy_s()
            stalls = self.stalls.report(
                began_s, now_s, busy_s - began_busy_s if busy_s is not None and began_busy_s is not None else None)
            self.reporter.usage(key, time.process_time() - began_cpu_s, now_s - began_s, stalls)
        self._maybe_idle()

    def _maybe_idle(self) -> None:
        """Nothing is being sent any more: the collector may run again (loadgen/collector.py)."""
        if not self._sending and not self.pending:
            collector.release()

    def finish(self, key: StageKey, workload: str, note: str | None = None) -> None:
        """Report that the loop of ``workload`` in stage ``key`` has ended."""
        if self.reporter is not None:
            self.reporter.finished(key, workload, self._sent.pop((key, workload), 0), note)

    def spawn(self, run: Callable[..., None], *args: Any) -> None:
        """Run one request (or closed-loop request loop) in a greenlet of this process."""
        self.requests.spawn(run, *args)

    def begin(self, workload: str, key: StageKey, intended_s: float) -> int:
        """Count one more request of ``workload`` in stage ``key`` as sent and in flight; its token.

        Called when the request is handed to its greenlet, not when that greenlet first runs: a
        loop that has just spawned its last request reports its end at once, and the request must
        already be counted in flight then, or the stage would look drained while it is not.
        """
        self._sent[(key, workload)] = self._sent.get((key, workload), 0) + 1
        collector.check()
        token = next(self._tokens)
        self.pending[token] = (workload, key, intended_s)
        return token

    def end(self, token: int) -> None:
        """The request is no longer in flight."""
        self.pending.pop(token, None)
        if not self.pending:
            self._maybe_idle()

    def record(self, sample: Sample) -> None:
        """Hand a finished request's sample on."""
        if self.reporter is not None:
            self.reporter.sample(sample)

    def sending(self) -> bool:
        """Whether a stage's loop still runs or a request is in flight."""
        return bool(self._sending or self.pending)

    def stop_stage(self, key: StageKey) -> None:
        """End a stage's arrivals early (rollback, interruption): no new request of it is sent."""
        self._stopped.add(key)
        self._notify()

    def stop_all(self) -> None:
        """End every loop and cancel every request in flight (the run is stopping)."""
        self.loops.kill(block=True, timeout=5)
        self.requests.kill(block=True, timeout=5)
        self.pending.clear()  # requests whose greenlet was killed before it ever ran
        self.stalls.stop()
        collector.release()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = Event()

    def is_active(self, key: StageKey) -> bool:
        """Whether arrivals of stage ``key`` may still be sent (a stage ends by its own times, or a stop)."""
        return key not in self._stopped

    def wait_stop(self, key: StageKey, until_s: float) -> None:
        """Sleep until epoch ``until_s`` or until stage ``key`` stops, whichever is first."""
        while self.is_active(key):
            remaining = until_s - time.time()
            if remaining <= 0:
                return
            self._changed.wait(min(remaining, 1.0))

    def total_in_flight(self) -> int:
        """Requests sent and not yet ended, over all classes."""
        return len(self.pending)

    def in_flight(self) -> list[tuple[str, StageKey, float]]:
        """(class, stage key, intended send time) of every request in flight."""
        return list(self.pending.values())

    def sleep_until(self, when_s: float, key: StageKey) -> bool:
        """Sleep to epoch ``when_s``; False if the stage stopped meanwhile."""
        remaining = when_s - time.time()
        if remaining > 0:
            gevent.sleep(remaining)
        return self.is_active(key)
