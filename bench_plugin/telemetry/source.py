"""A telemetry source: polls something at a fixed rate in a background thread and buffers rows.

The NVML sampler and the dcgm-exporter scraper share this loop, so the campaign drives either the same
way: ``start()`` at trial start, ``drain()`` at each stage end (the rows since the last drain, committed
with the stage), ``stop()`` at trial end. Neither ever raises into the campaign: ``available()`` says
whether rows can come and why not, and a failing poll is counted in ``problems()`` and logged once per
distinct message, so a run on a CPU host or with a lost GPU still completes and says what it lacked.

Under Locust the process is monkey-patched by gevent, so ``threading.Thread`` is a greenlet and
``Event.wait`` yields to the hub; the loop is written to be correct both ways: each poll is a few
short calls, and the wait between polls is a plain (patched) event wait. Ticks are scheduled on a
fixed grid (``start + k * interval``); a poll that overruns skips the missed ticks instead of bursting
to catch up, and is counted in ``overruns``.
"""

from __future__ import annotations

import logging
import threading
import time
from abc import ABC, abstractmethod
from collections import deque
from types import TracebackType

from bench_plugin.telemetry.rows import Availability, TelemetryRow

log = logging.getLogger(__name__)

DEFAULT_MAX_BUFFERED = 2_000_000
"""Rows kept between drains (about 100 B each). A campaign drains every stage; this only bounds a
source that nobody drains. Past it the oldest rows go and ``dropped`` counts them."""


class PollingSource(ABC):
    """Base of the telemetry sources: the polling thread, the row buffer and the error accounting."""

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
        self._lock = threading.Lock()
        self._buffer: deque[TelemetryRow] = deque(maxlen=max_buffered if max_buffered > 0 else 0)
        self._latest: list[TelemetryRow] = []
        self._problems: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

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
        return self._thread is not None

    def start(self) -> Availability:
        """Start polling in the background. Returns why not (and polls nothing) where unavailable."""
        if self._thread is not None:
            return Availability(True)
        availability = self._open()
        if not availability:
            log.warning("%s: no telemetry from this source: %s", self._name, availability.reason)
            return availability
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name=f"telemetry-{self._name}", daemon=True)
        self._thread.start()
        return availability

    def stop(self) -> None:
        """Stop polling and release the source; rows polled so far stay until drained."""
        thread, self._thread = self._thread, None
        if thread is None:
            return
        self._stop.set()
        thread.join(timeout=self.interval_s + 10.0)
        if thread.is_alive():
            self._note("poll thread did not stop within the timeout")
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

    def _run(self) -> None:
        next_tick = time.monotonic()
        while not self._stop.is_set():
            self.poll_once()
            next_tick += self.interval_s
            now = time.monotonic()
            if now > next_tick:
                missed = int((now - next_tick) / self.interval_s) + 1
                self.overruns += missed
                next_tick += missed * self.interval_s
            self._stop.wait(next_tick - now)
