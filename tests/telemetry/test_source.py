"""The polling loop both sources share: rate, drain per stage, error accounting, bounded buffer.

The tests run in pytest's process, which tests/conftest.py has monkey-patched with gevent (it imports
Locust), so the loop runs as a greenlet here, as it does inside the campaign. The source below is a
minimal subclass that stamps its poll count: the loop, not the source, is under test.
"""

from __future__ import annotations

import ctypes
import time

import gevent

from bench_plugin.results.telemetry_rows import Availability, TelemetryRow
from bench_plugin.telemetry.nvml import NvmlSampler
from bench_plugin.telemetry.source import PollingSource


class Counter(PollingSource):
    """Two rows per poll; polls listed in ``fail_on`` raise."""

    def __init__(self, interval_s: float, fail_on: frozenset[int] = frozenset(), max_buffered: int = 1000) -> None:
        super().__init__(interval_s, max_buffered=max_buffered, name="counter")
        self.calls = 0
        self.fail_on = fail_on
        self.closed = 0

    def available(self) -> Availability:
        return Availability(True)

    def _open(self) -> Availability:
        return Availability(True)

    def _close(self) -> None:
        self.closed += 1

    def _poll(self) -> list[TelemetryRow]:
        self.calls += 1
        if self.calls in self.fail_on:
            raise OSError("device went away")
        t = time.time()
        return [TelemetryRow(t, "cuda:0", "n", float(self.calls)), TelemetryRow(t, "cuda:1", "n", float(self.calls))]


def _run_for(source: PollingSource, seconds: float) -> float:
    start = time.monotonic()
    assert source.start()
    time.sleep(seconds)
    source.stop()
    return time.monotonic() - start


def test_the_sampler_defaults_to_5_hz() -> None:
    assert NvmlSampler().interval_s == 0.2


def test_polls_at_the_configured_rate_and_drains_per_stage() -> None:
    source = Counter(0.05)
    assert source.start()
    time.sleep(0.5)
    stage_1 = source.drain()
    time.sleep(0.5)
    source.stop()
    elapsed_polls = source.polls
    stage_2 = source.drain()
    values = [row.value for row in stage_1 + stage_2 if row.device == "cuda:0"]
    assert values == [float(i) for i in range(1, elapsed_polls + 1)], "every poll once, in order, none lost"
    assert 10 <= elapsed_polls <= 22, elapsed_polls  # 20 Hz for 1 s; slack for a loaded host, still >= 4 Hz
    assert stage_1 and stage_2 and source.drain() == []
    assert source.closed == 1 and not source.running


def test_a_failing_poll_is_counted_and_the_loop_continues() -> None:
    source = Counter(0.02, fail_on=frozenset({2, 3}))
    _run_for(source, 0.3)
    assert source.problems() == {"OSError: device went away": 2}
    assert source.polls == source.calls - 2 >= 5


def test_a_full_buffer_drops_the_oldest_and_says_how_many() -> None:
    source = Counter(0.01, max_buffered=6)
    for _ in range(5):
        source.poll_once()
    rows = source.drain()
    assert [row.value for row in rows] == [3.0, 3.0, 4.0, 4.0, 5.0, 5.0]
    assert source.dropped == 4


def test_latest_is_the_last_poll_only() -> None:
    source = Counter(0.01, max_buffered=0)
    source.poll_once()
    source.poll_once()
    assert [row.value for row in source.latest()] == [2.0, 2.0]
    assert source.drain() == [], "max_buffered=0 keeps nothing for drain (the exporter's use)"


def test_start_twice_and_stop_twice_are_harmless() -> None:
    source = Counter(0.05)
    assert source.start() and source.start()
    source.stop()
    source.stop()
    assert source.closed == 1


class BlockingInC(Counter):
    """Each poll blocks 15 ms in a C call that releases the GIL (libc usleep, as NVML's ctypes calls do)."""

    def __init__(self, native: bool) -> None:
        super().__init__(0.03)
        self.native_thread = native
        self.blocks: list[tuple[float, float]] = []

    def _poll(self) -> list[TelemetryRow]:
        start = time.perf_counter()
        ctypes.CDLL(None).usleep(15_000)
        self.blocks.append((start, time.perf_counter()))
        return super()._poll()


def _loop_runs_during_blocks(native: bool) -> tuple[int, int]:
    """How many of the source's blocks saw the event loop run a greenlet inside them, of how many."""
    source = BlockingInC(native)
    beats: list[float] = []

    def beat() -> None:
        while True:
            beats.append(time.perf_counter())
            gevent.sleep(0.001)

    ticker = gevent.spawn(beat)
    assert source.start()
    gevent.sleep(0.6)
    source.stop()
    ticker.kill()
    blocks = source.blocks
    inside = sum(1 for start, end in blocks if any(start + 0.001 < t < end - 0.001 for t in beats))
    return inside, len(blocks)


def test_a_native_source_polls_beside_the_event_loop_instead_of_stopping_it() -> None:
    # a greenlet source's block stops the loop (no greenlet can run inside it, by construction); the native
    # one's runs in an OS thread, and the loop keeps going through most of its blocks even on a busy host
    inside, blocks = _loop_runs_during_blocks(native=False)
    assert blocks >= 5 and inside == 0, (inside, blocks)
    inside, blocks = _loop_runs_during_blocks(native=True)
    assert blocks >= 5 and inside >= blocks // 2, (inside, blocks)


def test_a_native_source_stops_promptly_and_closes_once() -> None:
    source = BlockingInC(native=True)
    assert source.start() and source.running
    time.sleep(0.1)
    started = time.monotonic()
    source.stop()
    assert time.monotonic() - started < 1.0 and not source.running and source.closed == 1
    polls = source.polls
    time.sleep(0.1)
    assert source.polls == polls, "no poll after stop()"
    assert source.start() and source.running, "and it starts again"
    source.stop()
    assert source.closed == 2
