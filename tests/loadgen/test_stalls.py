"""The stall monitor: a loop held by a C call is a block named by the function that made it; an idle loop has none.

Runs in the test process, whose gevent Locust has patched as in a load generator. The blocks are made
with libc's usleep through ctypes: a C sleep that does not yield to gevent, so the loop stops for at
least its length (what an NVML poll did on the loop of a GPU host). What holds on a busy machine is
asserted: a block is at least as long as the C sleep that made it; a loop that only sleeps has no
block longer than the time its thread spent on a CPU or waiting for one (a stretch of the loop is
made of nothing else). Also: Reporter.usage's ``stalls`` reaches the ledger over the real wire
format, and an entry of a worker from before the monitor (three elements) is still read.
"""

from __future__ import annotations

import ctypes
import gc
import sys
import time

import gevent
import pytest
from locust.env import Environment
from locust.rpc.protocol import Message

from bench_plugin.loadgen import protocol
from bench_plugin.loadgen.fleet import Fleet, Member
from bench_plugin.loadgen.ledger import StageLedger
from bench_plugin.loadgen.shares import Share
from bench_plugin.loadgen.stalls import CALM_AFTER_S, GC_CAUSE, HUB, StallMonitor, describe, thread_busy_s
from bench_plugin.results.summary import GeneratorStalls

LIBC = ctypes.CDLL(None)
HOLD_MS = 15


def hold_the_loop(times: int) -> None:
    """A C-level sleep of HOLD_MS on the loop ``times`` times, yielding to gevent in between."""
    for _ in range(times):
        LIBC.usleep(HOLD_MS * 1000)
        gevent.sleep(0.05)


@pytest.mark.serial  # each of 6 blocks must be seen: with two lanes beside it a stretch was once missed
def test_a_c_sleep_on_the_loop_is_a_block_named_by_the_function_that_made_it() -> None:
    monitor = StallMonitor()
    monitor.start()
    try:
        gevent.sleep(0.05)  # a first turn of the loop under the monitor's hooks
        start_s = time.time()
        gevent.spawn(hold_the_loop, 6).join()
        gevent.sleep(0.05)  # the loop polls again: the last block is recorded
        end_s = time.time()
    finally:
        monitor.stop()
    # usleep holds the loop at least its length each time; the block's measured length starts at the loop's last
    # poll seen, which a busy host can put a few ms late, so a block counts from 80% of the hold
    held = [b for b in monitor.blocks if b.ms >= 0.8 * HOLD_MS]
    assert len(held) >= 6, monitor.blocks
    assert all(start_s < b.end_s <= end_s for b in held)  # the first one's stretch began before start_s
    named = [b for b in held if "hold_the_loop" in b.cause]
    # the watcher looks every 10 ms, so it is inside every 15-ms block; one missed look (a busy host) is not a failure
    assert named, [b.cause for b in held]
    assert all(b.cause.startswith(f"{__name__}.hold_the_loop (test_stalls.py:") for b in named), named
    report = monitor.report(start_s, end_s)
    assert report.count == len(monitor.between(start_s, end_s)) >= 6
    assert report.max_ms >= 0.8 * HOLD_MS and report.total_ms >= 6 * 0.8 * HOLD_MS
    assert sum(n for n, _ in report.causes.values()) == report.count
    assert len(report.blocks) == report.count
    assert [start for start, _ in report.blocks] == sorted(start for start, _ in report.blocks)
    assert monitor.report(end_s + 1, end_s + 2).count == 0


@pytest.mark.serial  # the blocks after the first must be seen: see the test above
def test_a_calm_loop_is_looked_at_less_and_a_block_makes_the_watcher_look_often_again() -> None:
    monitor = StallMonitor()
    monitor.start()
    try:
        gevent.sleep(CALM_AFTER_S + 0.3)  # no block since start(): calm from CALM_AFTER_S on
        looks, started = monitor.looks, time.monotonic()
        gevent.sleep(1.0)
        calm_looks, calm_s = monitor.looks - looks, time.monotonic() - started
        # every 40 ms when calm (every 10 ms would be 100 a second); a busy host only makes the looks fewer
        assert calm_looks <= calm_s / monitor.calm_look_s + 3, (calm_looks, calm_s)
        start_s = time.time()
        gevent.spawn(hold_the_loop, 6).join()
        gevent.sleep(0.05)
        end_s = time.time()
    finally:
        monitor.stop()
    held = sorted((b for b in monitor.blocks if b.ms >= 0.8 * HOLD_MS and start_s < b.end_s <= end_s),
                  key=lambda b: b.start_s)
    assert len(held) >= 6, monitor.blocks
    # the first block may go unnamed (a 15-ms block, seen by a look every 40 ms); it makes the watcher look
    # every 10 ms again, which is inside every later one: one missed look (a busy host) is not a failure
    named = [b for b in held[1:] if "hold_the_loop" in b.cause]
    assert len(named) >= len(held[1:]) - 1, [b.cause for b in held]


def test_a_loop_that_only_sleeps_has_no_block() -> None:
    monitor = StallMonitor()
    busy_before = thread_busy_s()
    monitor.start()
    try:
        for _ in range(20):
            gevent.sleep(0.01)
    finally:
        monitor.stop()
    busy_after = thread_busy_s()
    assert monitor.turns >= 19  # a turn per sleep; the one start() ran in began before the hooks were in
    assert busy_before is not None and busy_after is not None
    # nothing of this loop sleeps inside a stretch: a stretch lasts what its thread spent on a CPU or waiting for
    # one, so on a quiet host there is no block at all, and on a busy one none longer than that time (plus a
    # tick: the kernel adds a running thread's time at its ticks, 10 ms apart at the slowest)
    busy_ms = (busy_after - busy_before) * 1000
    assert all(b.ms <= busy_ms + 10 for b in monitor.blocks), (busy_ms, monitor.blocks)


def test_the_monitor_starts_nothing_until_started_and_stops_cleanly() -> None:
    monitor = StallMonitor()
    assert not monitor.running
    gevent.sleep(0.02)
    assert monitor.turns == 0 and not monitor.blocks
    monitor.start()
    monitor.start()  # idempotent
    assert monitor.running
    gevent.sleep(0.02)
    monitor.stop()
    turns = monitor.turns
    gevent.sleep(0.02)
    assert not monitor.running and monitor.turns == turns


def collect_on_the_loop(objects: int) -> None:
    """A full garbage collection on the loop over ``objects`` container objects built for it."""
    heap = [[i] for i in range(objects)]  # lists are tracked: the collector walks each one
    gevent.sleep(0.01)  # the loop polls: the collection below is a stretch of its own
    gc.collect()
    del heap


def test_a_block_that_the_garbage_collector_filled_is_named_by_it_and_its_generation() -> None:
    assert GC_CAUSE.format(generation=2) == "Python's cyclic garbage collector (generation 2)"
    monitor = StallMonitor()
    monitor.start()
    try:
        gevent.sleep(0.02)
        gevent.spawn(collect_on_the_loop, 1_000_000).join()  # about 20-60 ms: well past the 5-ms threshold
        gevent.sleep(0.02)
    finally:
        monitor.stop()
    assert monitor._collection not in gc.callbacks, "stop() leaves no callback behind"
    collected = [b for b in monitor.blocks if b.cause == GC_CAUSE.format(generation=2)]
    # the watcher cannot read the stack while the collector holds the GIL: before, such a block read as UNSEEN
    assert collected, monitor.blocks


def test_a_cause_names_the_innermost_frame_and_the_first_bench_plugin_frame_outwards() -> None:
    outer: dict[str, object] = {"__name__": "bench_plugin.example"}
    exec("def call(f):\n    return f()\n", outer)
    frame = outer["call"](lambda: sys._getframe())  # type: ignore[operator]
    cause = describe(frame)
    assert cause.startswith(f"{__name__}.test_a_cause_names_the_innermost_frame_and_the_first_bench_plugin_frame_"
                            "outwards.<locals>.<lambda> (test_stalls.py:")
    assert cause.endswith(" via bench_plugin.example.call (<string>:2)")
    assert describe(None) == HUB
    own = sys._getframe()
    assert describe(own) == f"{__name__}.{own.f_code.co_qualname} (test_stalls.py:{own.f_lineno})"


def test_the_busy_time_counts_a_spinning_thread_and_not_a_sleeping_one() -> None:
    before = thread_busy_s()
    assert before is not None
    t = time.monotonic()
    while time.monotonic() - t < 0.1:
        pass
    spun = thread_busy_s()
    LIBC.usleep(100_000)
    slept = thread_busy_s()
    assert spun is not None and slept is not None
    # the kernel adds a running thread's time at its ticks (10 ms apart at the slowest): each figure is that late
    assert spun - before >= 0.1 - 0.02  # runnable all along: on a CPU or waiting for one
    assert slept - spun < 0.1 / 2  # asleep in C: neither


def fleet_with_worker() -> tuple[Fleet, StageLedger]:
    fleet = Fleet(Environment(), request_sets={}, scenario_sha256="x", take=lambda _: None,
                  note=lambda *_, **__: None)
    fleet.members["w1"] = Member("w1", state="accepted", classes={"llm"})
    ledger = fleet.ledgers[(1, 0, 0)] = StageLedger((1, 0, 0), {"w1": {"llm": Share(0, 1)}}, {"llm": 3})
    return fleet, ledger


def report(usage: list[list[object]]) -> Message:
    data = {"samples": [], "in_flight": [], "finished": [], "usage": usage}
    return Message.unserialize(Message(protocol.REPORT, data, "w1").serialize())  # the real wire format


def test_a_workers_stalls_travel_with_its_usage_and_an_old_workers_entry_still_reads() -> None:
    stalls = {"threshold_ms": 5.0, "count": 2, "total_ms": 31.0, "max_ms": 16.0,
              "causes": {"m.f (m.py:3)": [2, 31.0]}, "blocks": [[100.0, 15.0], [101.0, 16.0]], "busy_s": 0.2,
              "collections": 1, "collection_max_ms": 0.4}
    fleet, ledger = fleet_with_worker()
    fleet._on_report(report([[[1, 0, 0], 0.5, 10.0, stalls]]))
    assert ledger.usage == {"w1": (0.5, 10.0)}
    assert ledger.stalls == {"w1": GeneratorStalls.model_validate(stalls)}
    assert ledger.stalls["w1"].model_dump(mode="json") == stalls  # as it was sent
    fleet, ledger = fleet_with_worker()
    fleet._on_report(report([[[1, 0, 0], 0.5, 10.0]]))  # a worker from before the stall monitor
    assert ledger.usage == {"w1": (0.5, 10.0)} and ledger.stalls == {}
