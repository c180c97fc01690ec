"""The alarm wakes each waiting greenlet at its time, in time order, to a fraction of a millisecond, idle meanwhile.

Runs in pytest's process, which tests/conftest.py has monkey-patched with gevent as in a load generator.
"""

from __future__ import annotations

import os
import random
import select
import socket
import time

import gevent
import pytest

from bench_plugin.loadgen.alarm import alarm, wait_until


def test_greenlets_wake_in_the_order_of_their_times_whatever_order_they_wait_in() -> None:
    start = time.time() + 0.02
    times = [start + 0.001 * k for k in range(20)]
    random.Random(3).shuffle(times)
    woke: list[tuple[float, float]] = []

    def waiter(when: float) -> None:
        wait_until(when)
        woke.append((when, time.time()))

    gevent.joinall([gevent.spawn(waiter, when) for when in times])
    assert [when for when, _ in woke] == sorted(times)
    assert all(at >= when for when, at in woke)  # never early


def test_a_fired_timer_does_not_fire_again_once_re_armed_or_idle() -> None:
    # the expirations are read off only when nobody waits: a re-armed timerfd must not read as ready, or the
    # loop would call the alarm back without pause until the next time came
    found = alarm()
    if found is None:
        pytest.skip("no timerfd here")
    start = time.time() + 0.02
    times = [start + 0.004 * k for k in range(10)]  # 4 ms apart: each its own wake
    before = found.wakes
    gevent.joinall([gevent.spawn(wait_until, when) for when in times])
    assert found.wakes - before <= len(times), found.wakes - before
    idle = found.wakes
    gevent.sleep(0.05)
    assert found.wakes == idle  # nobody waits: no more wakes
    assert not select.select([found.fd], [], [], 0)[0]  # and nothing left to read


def test_a_time_in_the_past_returns_at_once() -> None:
    before = time.time()
    wait_until(before - 1.0)
    assert time.time() - before < 0.01


def test_a_greenlet_killed_while_it_waits_is_left_out() -> None:
    found = alarm()
    if found is None:
        pytest.skip("no timerfd here")
    woke: list[str] = []

    def waiter(name: str, when: float) -> None:
        wait_until(when)
        woke.append(name)

    at = time.time() + 0.02
    doomed = gevent.spawn(waiter, "doomed", at)
    kept = gevent.spawn(waiter, "kept", at + 0.001)
    gevent.sleep(0.005)
    doomed.kill()
    kept.join(timeout=1)
    assert woke == ["kept"]


def test_a_turn_that_finds_the_time_passed_and_replies_ready_wakes_the_send_before_the_readers() -> None:
    """The loop was held past a send's time (a long decode), and replies arrived meanwhile: the send goes first.
    With alarm.PRIORITISED off this fails, the send going last after every reader: libev runs the watchers of
    one priority ready in a turn latest first (ev_invoke_pending), and the timer was ready before the sockets."""
    if alarm() is None:
        pytest.skip("no timerfd here")
    order: list[str] = []
    pairs = [socket.socketpair() for _ in range(8)]

    def reader(sock: socket.socket) -> None:
        sock.recv(1)
        order.append("reply")

    def sender(when: float) -> None:
        wait_until(when)
        order.append("send")

    try:
        readers = [gevent.spawn(reader, theirs) for _, theirs in pairs]
        when = time.time() + 0.005
        sending = gevent.spawn(sender, when)
        gevent.sleep(0)  # the readers wait on their sockets, the sender on the alarm
        while time.time() < when + 0.002:  # the loop held past the send's time, not yielding
            pass
        for mine, _ in pairs:  # then the replies come
            mine.send(b"x")
        gevent.joinall([*readers, sending], timeout=5)
    finally:
        for mine, theirs in pairs:
            mine.close()
            theirs.close()
    assert order == ["send"] + ["reply"] * 8


@pytest.mark.serial  # a timing: two lanes beside it could pre-empt the process for milliseconds
def test_it_is_precise_where_a_gevent_timer_is_a_millisecond_coarse() -> None:
    if alarm() is None:
        pytest.skip("no timerfd here: the plain gevent timer is the fallback")
    lateness: dict[str, list[float]] = {"alarm": [], "timer": []}

    def one(kind: str, when: float) -> None:
        if kind == "alarm":
            wait_until(when)
        else:
            gevent.sleep(when - time.time())
        lateness[kind].append(time.time() - when)

    for k in range(40):  # turns, one at a time: each waits alone, as a send does between arrivals
        for kind in ("alarm", "timer"):
            gevent.spawn(one, kind, time.time() + 0.003 + 0.0001 * (k % 7)).join()
    alarm_p50 = sorted(lateness["alarm"])[20]
    timer_p50 = sorted(lateness["timer"])[20]
    assert alarm_p50 < 0.0003, lateness["alarm"]
    assert alarm_p50 < timer_p50, (alarm_p50, timer_p50)


def test_a_forked_child_makes_its_own_alarm() -> None:
    """Locust's --processes forks its workers: a child must not wait on its parent's timerfd."""
    mine = alarm()
    if mine is None:
        pytest.skip("no timerfd here")
    pid = gevent.fork()
    if pid == 0:  # the child: its own alarm, and it wakes
        code = 1
        try:
            child = alarm()
            when = time.time() + 0.005
            wait_until(when)
            code = 0 if child is not None and child is not mine and child.fd != mine.fd and time.time() >= when else 3
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
