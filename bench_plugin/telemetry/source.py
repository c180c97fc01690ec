"""A telemetry source: polls something at a fixed rate in a background thread and buffers rows.

The NVML sampler and the dcgm-exporter scraper share this loop, so the campaign drives either the same
way: ``start()`` at trial start, ``drain()`` at each stage end (the rows since the last drain, committed
with the stage), ``stop()`` at trial end. Neither ever raises into the campaign: ``available()`` says
whether rows can come and why not, and a failing poll is counted in ``problems()`` and logged once per
distinct message, so a run on a CPU host or with a lost GPU still completes and says what it lacked.

Under Locust the process is monkey-patched by gevent, so ``threading.Thread`` is a greenlet: a poll
that calls into C without yielding (NVML's ``nvmlDeviceGetProcessUtilization`` takes 10-20 ms on an
H200 host) would then stop the event loop that sends the requests, and add that much to the latency of
every request in flight (docs/benchmarks.md, "Send lag on a GPU host"). A source whose polls are such
calls sets ``native_thread``: its loop runs in an OS thread taken from before the patching, with OS
locks for what it shares, and C calls that release the GIL (ctypes does) then run beside the sending
loop. A source that polls over the network (dcgm-exporter) keeps the cooperative greenlet. Ticks are
scheduled on a fixed grid (``start + k * interval``); a poll that overruns skips the missed ticks
instead of bursting to catch up, and is counted in ``overruns``.
"""

from __future__ import annotations

import _thread
import logging
import threading
import time
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable
from types import TracebackType

from bench_plugin.results.telemetry_rows import Availability, TelemetryRow

log = logging.getLogger(__name__)

DEFAULT_MAX_BUFFERED = 2_000_000
"""Rows kept between drains (about 100 B each). A campaign drains every stage; this only bounds a
source that nobody drains. Past it the oldest rows go and ``dropped`` counts them."""


def native_thread_api() -> tuple[Callable[..., int], Callable[[], _thread.LockType]]:
    """``start_new_thread`` and ``allocate_lock`` of the OS, even where gevent has patched them."""
    try:
        from gevent import monkey
    except ImportError:  # no gevent: nothing is patched
        return _thread.start_new_thread, _thread.allocate_lock
    return monkey.get_original("_thread", "start_new_thread"), monkey.get_original("_thread", "allocate_lock")


class PollingSource(ABC):
    """Base of the telemetry sources: the polling thread, the row buffer and the error accounting."""

    native_thread = False
    """Poll in an OS thread even under gevent (for polls that block in C); see the module's docstring."""

    def __init__(self, interval_s: float, *, max_buffered: int = DEFAULT_MAX_BUFFERED, name: str) -> None:
        if interval_s <= 0:
            raise ValueError(f"interval_s must be positive, not {interval_s}")
        self.interval_s = interval_s
        """Seconds between polls."""
        self.polls = 0
        """Polls completed since construction."""
        self.overruns = 0
        """Ticks skipped because a poll took longer than the interval."""
        self.dropped = 0
        """Rows lost because the buffer was full (nobody drained)."""
        self._name = name
        start_thread, allocate_lock = native_thread_api()
        self._start_thread = start_thread
        self._allocate_lock = allocate_lock
        self._lock = allocate_lock()  # taken by the poll thread and the campaign's: an OS lock either way
        self._buffer: deque[TelemetryRow] = deque(maxlen=max_buffered if max_buffered > 0 else 0)
        self._latest: list[TelemetryRow] = []
        self._problems: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._native_stop: _thread.LockType | None = None
        """Held while a native loop runs; stop() releases it, which also wakes the loop's wait."""
        self._native_done: _thread.LockType | None = None
        """Held by a native loop until it has returned."""

    # -- what a subclass provides ------------------------------------------------------------------

    @abstractmethod
    def available(self) -> Availability:
        """Whether this source can produce rows on this host; never raises."""

    @abstractmethod
    def _open(self) -> Availability:
        """Prepare to poll (initialise libraries, resolve devices); never raises."""

    @abstractmethod
    def _poll(self) -> list[TelemetryRow]:
        """One poll's rows; may raise, and the loop records the error."""

    @abstractmethod
    def _close(self) -> None:
        """Release what _open took (called once, after the last poll)."""

    # -- the public API ----------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        """True between a successful start() and stop()."""
        return self._thread is not None or self._native_stop is not None

    def start(self) -> Availability:
        """Start polling in the background. Returns why not (and polls nothing) where unavailable."""
        if self.running:
            return Availability(True)
        availability = self._open()
        if not availability:
            log.warning("%s: no telemetry from this source: %s", self._name, availability.reason)
            return availability
        if self.native_thread:
            stop, done = self._allocate_lock(), self._allocate_lock()
            stop.acquire()
            done.acquire()
            self._native_stop, self._native_done = stop, done
            self._start_thread(self._run_native, (stop, done))
            return availability
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name=f"telemetry-{self._name}", daemon=True)
        self._thread.start()
        return availability

    def stop(self) -> None:
        """Stop polling and release the source; rows polled so far stay until drained."""
        if self._native_stop is not None:
            self._stop_native()
            return
        thread, self._thread = self._thread, None
        if thread is None:
            return
        self._stop.set()
        thread.join(timeout=self.interval_s + 10.0)
        if thread.is_alive():
            self._note("poll thread did not stop within the timeout")
        self._close()

    def _stop_native(self) -> None:
        stop, done = self._native_stop, self._native_done
        self._native_stop = self._native_done = None
        assert stop is not None and done is not None
        stop.release()
        deadline = time.monotonic() + self.interval_s + 10.0
        # waited for in short sleeps (cooperative under gevent), never by blocking the caller's loop on a lock
        while not done.acquire(False):
            if time.monotonic() > deadline:
                self._note("poll thread did not stop within the timeout")
                return  # _close() stays with the thread, which still polls: it closes nothing under it
            time.sleep(0.005)
        self._close()

    def poll_once(self) -> list[TelemetryRow]:
        """Poll now, in the caller's thread: buffer the rows and return them (empty if the poll failed,
        which ``problems()`` then counts)."""
        try:
            rows = self._poll()
        except Exception as exc:  # a lost GPU or a dead endpoint must not end the campaign: count it, say it once
            self._note(f"{type(exc).__name__}: {exc}")
            return []
        with self._lock:
            if self._buffer.maxlen:
                overflow = len(self._buffer) + len(rows) - self._buffer.maxlen
                if overflow > 0:  # the deque drops the oldest by itself; count them so the loss is visible
                    self.dropped += overflow
                self._buffer.extend(rows)
            self._latest = rows
            self.polls += 1
        return rows

    def drain(self) -> list[TelemetryRow]:
        """The rows polled since the last drain, oldest first; the buffer is emptied."""
        with self._lock:
            rows = list(self._buffer)
            self._buffer.clear()
        return rows

    def latest(self) -> list[TelemetryRow]:
        """The rows of the most recent successful poll (what an exporter serves)."""
        with self._lock:
            return list(self._latest)

    def problems(self) -> dict[str, int]:
        """Each distinct failure seen while polling, with how many times it happened."""
        with self._lock:
            return dict(self._problems)

    def __enter__(self) -> PollingSource:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # -- internals ---------------------------------------------------------------------------------

    def _note(self, message: str) -> None:
        with self._lock:
            count = self._problems.get(message, 0) + 1
            self._problems[message] = count
        if count == 1:
            log.warning("%s: %s", self._name, message)

    def _next_wait(self, next_tick: float) -> tuple[float, float]:
        """After a poll: the next tick on the grid (skipping missed ones) and the seconds until it."""
        next_tick += self.interval_s
        now = time.monotonic()
        if now > next_tick:
            missed = int((now - next_tick) / self.interval_s) + 1
            self.overruns += missed
            next_tick += missed * self.interval_s
        return next_tick, next_tick - now

    def _run(self) -> None:
        next_tick = time.monotonic()
        while not self._stop.is_set():
            self.poll_once()
            next_tick, wait_s = self._next_wait(next_tick)
            self._stop.wait(wait_s)

    def _run_native(self, stop: _thread.LockType, done: _thread.LockType) -> None:
        try:
            next_tick = time.monotonic()
            while True:
                self.poll_once()
                next_tick, wait_s = self._next_wait(next_tick)
                if stop.acquire(True, max(wait_s, 0.0)):  # released by stop(): an OS wait, not the hub's
                    return
        finally:
            done.release()
