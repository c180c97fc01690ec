"""OffLoop: under gevent a blocking call runs in an OS thread while the event loop turns, in order.

The tests run in pytest's process, which tests/conftest.py has monkey-patched with gevent (it imports
Locust), as a Locust process is: calls go off the loop there. A call here holds its thread in a C call
that releases the GIL (the OS's own sleep, as gevent found it; SQLite's fsync does the same), and a
greenlet beside it notes each turn of the loop. The results store and the host monitor use it.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time

import gevent
import pytest
from gevent import monkey

from bench_plugin.results.offloop import OffLoop

os_sleep = monkey.get_original("time", "sleep")


def held_call(seconds: float, into: list[tuple[str, float]]) -> str:
    """A call that holds its thread in C for ``seconds``, noting when it began and ended."""
    into.append(("began", time.monotonic()))
    os_sleep(seconds)
    into.append(("ended", time.monotonic()))
    return "done"


def ticker(into: list[tuple[str, float]]) -> None:
    while True:
        gevent.sleep(0.005)
        into.append(("tick", time.monotonic()))


def test_the_loop_turns_while_a_call_holds_the_os_thread() -> None:
    assert monkey.is_module_patched("threading"), "tests/conftest.py patches this process, as Locust does"
    off = OffLoop()
    seen: list[tuple[str, float]] = []
    ticks = gevent.spawn(ticker, seen)
    try:
        gevent.sleep(0)
        assert off.run(held_call, 0.3, seen) == "done"
    finally:
        ticks.kill()
        off.close()
    began = next(t for what, t in seen if what == "began")
    ended = next(t for what, t in seen if what == "ended")
    during = [t for what, t in seen if what == "tick" and began < t < ended]
    # run inline (as the store and the host monitor did before), the loop could not turn at all meanwhile
    assert during, "no turn of the event loop while the call held its thread"


def test_calls_keep_the_order_they_were_asked_in_and_raise_in_their_caller() -> None:
    off = OffLoop()
    done: list[int] = []

    def write(i: int) -> int:
        os_sleep(0.002 * (5 - i))  # the first asked takes longest: an unordered pool would finish it last
        done.append(i)
        return i * i

    def fail() -> None:
        raise sqlite3.OperationalError("database or disk is full")

    try:
        results = [g.get() for g in [gevent.spawn(off.run, write, i) for i in range(5)]]
        with pytest.raises(sqlite3.OperationalError, match="disk is full"):
            off.run(fail)
        assert off.run(write, 5) == 25, "a call that raised leaves the thread working"
    finally:
        off.close()
    assert results == [0, 1, 4, 9, 16]
    assert done == [0, 1, 2, 3, 4, 5]


def test_without_gevents_patching_a_call_runs_in_its_caller() -> None:
    code = ("import threading\n"
            "from bench_plugin.results.offloop import OffLoop\n"
            "w = OffLoop()\n"
            "assert w.run(threading.get_ident) == threading.get_ident()\n"
            "w.close()\n"
            "import sys; sys.exit(0 if 'gevent' not in sys.modules else 3)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
