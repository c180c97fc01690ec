"""Dynamic batcher shared by the embedding and ASR servers.

Handlers submit items from the event loop and await a future. A dedicated worker
thread owns the model: it waits for the first queued item, keeps collecting until the
batch is full or ``max_wait_s`` has passed since that first item *arrived* (so items
that already waited while the worker was busy go at once), runs one batched call, and
resolves every future via ``loop.call_soon_threadsafe``. A batch is full at
``max_batch_size`` items or, when a ``cost`` function is given, at ``max_cost`` (the
embedding server counts tokens: a GPU-sized batch is a number of tokens, not of inputs,
and a fixed input count either starves the GPU on short inputs or overflows on long ones).
Torch-free: the model code is supplied as a ``setup`` callable run on the worker.

A device that runs asynchronously (CUDA) can be kept busy across batches: ``setup`` may return a
:class:`Pipelined` pair instead of one function. The worker then launches a batch of what is
already queued before finishing the one in flight, so the device works through batch N+1 while the
host waits for, copies and hands back batch N, then gathers N+2. Results still go back in batch
order, and a batch never waits for items while another is in flight (what queued meanwhile goes at
once); with nothing queued the batch in flight is finished first, as without pipelining.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from .app import LoopRelay, post_to_loop
from .metrics import RequestTimer, ServerMetrics

T = TypeVar("T")
R = TypeVar("R")
H = TypeVar("H")
BatchFn = Callable[[list[T]], list[R]]
_IDLE_WAIT_S = 0.1  # how often an idle worker re-checks for shutdown


@dataclass(eq=False)
class _Pending(Generic[T, R]):
    item: T
    future: asyncio.Future[R]
    loop: asyncio.AbstractEventLoop
    arrival: float
    timer: RequestTimer | None


@dataclass(frozen=True)
class Pipelined(Generic[T, R, H]):
    """A batch function in two halves: ``launch`` queues a batch's work on the device and returns a
    handle at once; ``finish`` waits for that work and returns one result per item."""

    launch: Callable[[list[T]], H]
    finish: Callable[[H], list[R]]


@dataclass(eq=False)
class _Flight(Generic[T, R]):
    """A launched batch: its live items and the launch's handle, or the error the launch raised."""

    live: list[_Pending[T, R]]
    handle: Any
    error: BaseException | None


def _resolve(future: asyncio.Future[R], result: R | None, error: BaseException | None) -> None:
    if future.done():  # the handler gave up (client disconnected)
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)  # type: ignore[arg-type]


class DynamicBatcher(Generic[T, R]):
    """Groups concurrently submitted items into batches for one worker thread."""

    def __init__(
        self,
        name: str,
        setup: Callable[[], BatchFn[T, R] | Pipelined[T, R, Any]],
        max_batch_size: int,
        max_wait_s: float,
        metrics: ServerMetrics,
        cost: Callable[[T], int] | None = None,
        max_cost: int | None = None,
    ) -> None:
        """``setup`` runs on the worker (build + warm the model) and returns the batch function, or a
        :class:`Pipelined` pair to overlap the device's work on one batch with the host's on the next.

        ``cost``/``max_cost``: optional second limit; an item costlier than ``max_cost`` still
        goes, alone.
        """
        self.name = name
        self._setup = setup
        self.max_batch_size = max_batch_size
        self.max_wait_s = max_wait_s
        self._metrics = metrics
        self._cost = cost or (lambda _: 0)
        self.max_cost = max_cost
        self._cond = threading.Condition()
        self._queue: deque[_Pending[T, R]] = deque()
        self._queued_cost = 0
        self._stopped = False
        self._relays: dict[asyncio.AbstractEventLoop, LoopRelay] = {}  # worker thread only
        self._launched = 0  # items in launched, unfinished batches (worker thread only)

    def start(self, on_ready: Callable[[], object], on_error: Callable[[BaseException], object]) -> None:
        """Start the worker: set up the model, report, then serve batches."""
        thread = threading.Thread(target=self._run, args=(on_ready, on_error), name=self.name, daemon=True)
        thread.start()

    def stop(self) -> None:
        """Stop after the current batch; queued items are failed."""
        with self._cond:
            self._stopped = True
            self._cond.notify_all()

    def submit(self, item: T, timer: RequestTimer | None = None) -> asyncio.Future[R]:
        """Queue ``item`` (call on the event loop); the future resolves to its result. ``timer``: the request
        the item belongs to, marked scheduled when the item goes into a batch."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[R] = loop.create_future()
        with self._cond:
            if self._stopped:
                raise RuntimeError("server is shutting down")
            self._queue.append(_Pending(item, future, loop, time.perf_counter(), timer))
            self._queued_cost += self._cost(item)
            self._metrics.queue_depth.set(len(self._queue))
            self._cond.notify()
        return future

    def _run(self, on_ready: Callable[[], object], on_error: Callable[[BaseException], object]) -> None:
        try:
            made = self._setup()
        except Exception as exc:
            on_error(exc)
            return
        on_ready()
        if isinstance(made, Pipelined):
            self._serve_pipelined(made)
        else:
            work: Pipelined[T, R, list[R]] = Pipelined(made, lambda results: results)
            while (batch := self._collect(wait=True)) is not None:
                if (flight := self._launch(work, batch)) is not None:
                    self._finish(work, flight)
        with self._cond:
            leftover = list(self._queue)
            self._queue.clear()
            self._queued_cost = 0
        for p in leftover:
            post_to_loop(p.loop, _resolve, p.future, None, RuntimeError("server is shutting down"))

    def _serve_pipelined(self, work: Pipelined[T, R, Any]) -> None:
        """Launch the next batch (of what is queued) before finishing the one in flight."""
        flight: _Flight[T, R] | None = None
        while (batch := self._collect(wait=flight is None)) is not None:
            launched = self._launch(work, batch) if batch else None
            if flight is not None:
                self._finish(work, flight)
            flight = launched
        if flight is not None:
            self._finish(work, flight)

    def _collect(self, wait: bool) -> list[_Pending[T, R]] | None:
        """Block until a batch is due; None once stopped. Without ``wait``, what is queued now (maybe
        nothing): a batch is in flight, and what queued meanwhile has waited long enough."""
        with self._cond:
            while wait and not self._queue and not self._stopped:
                self._cond.wait(_IDLE_WAIT_S)
            if self._stopped:
                return None
            if not self._queue:
                return []
            deadline = self._queue[0].arrival + self.max_wait_s
            while wait and not self._full() and not self._stopped:
                remaining = deadline - time.perf_counter()
                if remaining <= 0:
                    break
                self._cond.wait(remaining)
            batch: list[_Pending[T, R]] = []
            spent = 0
            while self._queue and len(batch) < self.max_batch_size:
                cost = self._cost(self._queue[0].item)
                if batch and self.max_cost is not None and spent + cost > self.max_cost:
                    break
                batch.append(self._queue.popleft())
                spent += cost
            self._queued_cost -= spent
            self._metrics.queue_depth.set(len(self._queue))
        now = time.perf_counter()
        for p in batch:
            if p.timer is not None:
                p.timer.mark_scheduled(now)
        return batch

    def _full(self) -> bool:
        """Whether the queue already holds a full batch (call with the lock held)."""
        if len(self._queue) >= self.max_batch_size:
            return True
        return self.max_cost is not None and self._queued_cost >= self.max_cost

    def _launch(self, work: Pipelined[T, R, Any], batch: list[_Pending[T, R]]) -> _Flight[T, R] | None:
        """Start one batch (None when every item's client has gone)."""
        live = [p for p in batch if not p.future.cancelled()]
        if not live:
            return None
        self._metrics.batch_size.observe(len(live))
        self._launched += len(live)
        self._metrics.in_flight.set(self._launched)
        try:
            return _Flight(live, work.launch([p.item for p in live]), None)
        except Exception as exc:  # a model fault fails this batch, not the server
            return _Flight(live, None, exc)

    def _finish(self, work: Pipelined[T, R, Any], flight: _Flight[T, R]) -> None:
        """Wait for a launched batch and hand each result (or the shared error) back to its loop."""
        error = flight.error
        outcome: list[tuple[R | None, BaseException | None]] = []
        if error is None:
            try:
                outcome = [(r, None) for r in work.finish(flight.handle)]
            except Exception as exc:
                error = exc
        if error is not None:
            outcome = [(None, error)] * len(flight.live)
        self._launched -= len(flight.live)
        self._metrics.in_flight.set(self._launched)
        # One loop wake-up per batch rather than per item (a batch can hold hundreds of inputs).
        for p, (result, failure) in zip(flight.live, outcome, strict=True):
            relay = self._relays.get(p.loop)
            if relay is None:
                relay = self._relays[p.loop] = LoopRelay(p.loop)
            relay.call(_resolve, p.future, result, failure)
