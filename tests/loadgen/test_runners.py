"""Runners run each call handed to them, reuse an idle runner before making one, and end on kill.

Runs in pytest's process, which tests/conftest.py has monkey-patched with gevent as in a load generator.
"""

from __future__ import annotations

import gevent
import pytest
from gevent.event import Event

from bench_plugin.loadgen.runners import Runners


def test_calls_one_after_another_reuse_one_runner() -> None:
    runners = Runners()
    done: list[int] = []
    for k in range(5):
        runners.spawn(done.append, k)
        gevent.sleep(0)  # the call runs and its runner waits again
    assert done == [0, 1, 2, 3, 4]
    assert len(runners) == 1 and runners.idle == 1
    runners.kill()


def test_calls_at_once_get_a_runner_each_and_leave_them_idle() -> None:
    runners = Runners()
    gate = Event()
    seen: list[int] = []

    def call(k: int) -> None:
        gate.wait()
        seen.append(k)

    for k in range(4):
        runners.spawn(call, k)
    gevent.sleep(0)
    assert len(runners) == 4 and runners.idle == 0
    assert not runners.join(timeout=0.02)  # all four wait at the gate
    gate.set()
    assert runners.join(timeout=5)
    assert sorted(seen) == [0, 1, 2, 3] and runners.idle == 4
    runners.spawn(call, 4)  # gate open: runs at once, on an idle runner
    gevent.sleep(0)
    assert seen[-1] == 4 and len(runners) == 4
    runners.kill()


def test_a_handed_call_starts_when_a_new_greenlet_would() -> None:
    # gevent starts a new greenlet from the loop's callbacks; a call handed to an idle runner goes the same way,
    # so a call handed after a spawn runs after it, and one handed before runs before it
    runners = Runners()
    runners.spawn(lambda: None)
    gevent.sleep(0)
    order: list[str] = []
    runners.spawn(order.append, "runner")
    gevent.spawn(order.append, "greenlet")
    gevent.sleep(0.01)
    assert order == ["runner", "greenlet"]
    order.clear()
    gevent.spawn(order.append, "greenlet")
    runners.spawn(order.append, "runner")
    gevent.sleep(0.01)
    assert order == ["greenlet", "runner"]
    runners.kill()


def test_kill_cancels_what_runs_and_drops_what_has_not_started() -> None:
    runners = Runners()
    ended: list[str] = []

    def long_call() -> None:
        try:
            gevent.sleep(10)
        except gevent.GreenletExit:
            ended.append("cancelled")
            raise

    runners.spawn(long_call)
    runners.spawn(lambda: None)
    gevent.sleep(0.01)
    assert runners.idle == 1
    runners.spawn(ended.append, "dropped")  # handed to the idle runner, not started yet
    runners.kill()
    gevent.sleep(0.01)
    assert ended == ["cancelled"] and len(runners) == 0 and runners.idle == 0
    runners.spawn(ended.append, "after")  # a new runner once all are gone
    gevent.sleep(0.01)
    assert ended == ["cancelled", "after"]
    runners.kill()


def test_idle_runners_past_the_limit_end() -> None:
    runners = Runners(max_idle=2)
    gate = Event()
    for _ in range(5):
        runners.spawn(gate.wait)
    gevent.sleep(0)
    assert len(runners) == 5
    gate.set()
    gevent.sleep(0.01)
    assert len(runners) == 2 and runners.idle == 2
    runners.kill()


def test_a_call_that_raises_ends_its_runner_only() -> None:
    runners = Runners()

    def bad() -> None:
        raise RuntimeError("boom")

    hub = gevent.get_hub()
    hub.NOT_ERROR = (*hub.NOT_ERROR, RuntimeError)  # keep gevent from printing the expected traceback
    try:
        runners.spawn(bad)
        gevent.sleep(0.01)
        assert len(runners) == 0
        done: list[int] = []
        runners.spawn(done.append, 1)
        gevent.sleep(0.01)
        assert done == [1] and len(runners) == 1
    finally:
        hub.NOT_ERROR = tuple(e for e in hub.NOT_ERROR if e is not RuntimeError)
        runners.kill()


@pytest.mark.parametrize("count", [1, 50])
def test_every_call_runs_once(count: int) -> None:
    runners = Runners()
    done: list[int] = []

    def call(k: int) -> None:
        gevent.sleep(0.001 * (k % 3))
        done.append(k)

    for k in range(count):
        runners.spawn(call, k)
    gevent.sleep(0.05)
    assert sorted(done) == list(range(count))
    runners.kill()
