"""The collector is held while a process sends a stage, released once its last request has ended, and guarded.

Runs in pytest's process (gevent-patched, as a load generator is). Every test leaves the collector enabled.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator

import gevent
import pytest
from gevent.event import Event

from bench_plugin.loadgen import collector
from bench_plugin.loadgen.ledger import StageKey
from bench_plugin.loadgen.shares import Share
from bench_plugin.loadgen.stalls import StallMonitor
from bench_plugin.loadgen.state import ClassLoad, LoadState, StageAssignment
from bench_plugin.results.samples import Sample
from bench_plugin.results.summary import GeneratorStalls


@pytest.fixture(autouse=True)
def collector_left_enabled() -> Iterator[None]:
    yield
    collector.release()
    assert gc.isenabled()


class Reporter:
    def __init__(self) -> None:
        self.usage_seen: list[GeneratorStalls | None] = []

    def sample(self, sample: Sample) -> None:
        pass

    def finished(self, key: StageKey, workload: str, sent: int, note: str | None) -> None:
        pass

    def usage(self, key: StageKey, cpu_s: float, wall_s: float, stalls: GeneratorStalls | None = None) -> None:
        self.usage_seen.append(stalls)


class TwoRequests:
    """Hands over two requests that end when told to, recording whether the collector was on meanwhile."""

    workload = "llm"

    def __init__(self, state: LoadState) -> None:
        self.state = state
        self.go = Event()
        self.enabled_while_in_flight: list[bool] = []

    def run_share(self, assignment: StageAssignment, share: Share) -> None:
        for _ in range(2):
            token = self.state.begin(self.workload, assignment.key, 0.0)
            self.state.spawn(self._request, token)

    def _request(self, token: int) -> None:
        self.go.wait()
        self.enabled_while_in_flight.append(gc.isenabled())
        self.state.end(token)


def test_held_from_the_stage_to_its_last_request_then_released() -> None:
    state = LoadState({}, {})
    state.reporter = Reporter()
    sender = TwoRequests(state)
    state.makers["llm"] = lambda: sender
    load = ClassLoad(url="http://127.0.0.1:9", model="m", arrival="poisson", load=1.0, timeout_s=1.0,
                     max_in_flight=2)
    assert gc.isenabled()
    state.assign(StageAssignment(1, 0, 0, 0.0, 1.0, 0, {"llm": load}, {"llm": Share(0, 1)}))
    state.loops.join(timeout=5)
    assert not gc.isenabled() and collector.held()  # the loop ended; two requests still in flight
    sender.go.set()
    state.requests.join(timeout=5)
    assert sender.enabled_while_in_flight == [False, False]
    assert gc.isenabled() and not collector.held()
    state.stop_all()


def test_the_guard_collects_a_held_stage_that_leaves_cycles() -> None:
    collector.hold()
    gc.collect()  # the count starts from nothing
    monitor = StallMonitor()
    monitor.start()
    try:
        cycles = []
        for _ in range(collector.GUARD_OBJECTS // 2 + 1000):  # two tracked objects each
            a: list[object] = []
            a.append(a)
            cycles.append(a)
            cycles.append({})
        before = gc.get_count()[0]
        collector.check()
        after = gc.get_count()[0]
    finally:
        monitor.stop()
    assert before > collector.GUARD_OBJECTS and after < before
    assert len(monitor.collections) == 1  # the guard's, seen by the stall monitor with its length
    assert collector.held()


def test_a_stage_reports_the_collections_that_ran_while_it_was_sent() -> None:
    monitor = StallMonitor()
    monitor.start()
    try:
        start = time.time()
        gc.collect()
        gc.collect(0)
        end = time.time()
        gevent.sleep(0.01)
        report = monitor.report(start, end)
        later = monitor.report(end + 0.001, time.time())
    finally:
        monitor.stop()
    assert report.collections == 2 and report.collection_max_ms is not None and report.collection_max_ms > 0
    assert later.collections == 0 and later.collection_max_ms == 0.0
