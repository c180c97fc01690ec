"""Benchmark: what one wake of a sleeping thread costs in CPU on this host, by the way it sleeps.

    PYTHONPATH=. .venv/bin/python benchmarks/wake_cost.py [--wakes N] [--period-ms P] [--rounds R]

A load generator that sends each request at its own time wakes for it; on a virtual machine a wake after
an idle spell costs far more than the work it does (the idle virtual CPU is halted, and waking it takes
the hypervisor). This measures the CPU (``time.thread_time``: user and system time of the thread) per
wake of one thread that only sleeps and wakes, ``--wakes`` times a round, ``--period-ms`` apart:

- an OS thread: a timed wait on a lock (the stall monitor's watcher), ``time.sleep``, and a read of a
  periodic timerfd;
- the event loop (gevent, as the plugin's senders run it): ``gevent.sleep`` (a libev timer, up to a
  millisecond late) and the plugin's alarm (loadgen/alarm.py: a timerfd armed per wake, to a fraction of
  a millisecond).

Each way runs ``--rounds`` times in turns; the median is printed with the spread. Nothing else should run.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import threading
import time
from collections.abc import Callable

import gevent

from bench_plugin.loadgen.alarm import alarm


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [("it_interval", _Timespec), ("it_value", _Timespec)]


def _periodic_timerfd(period_s: float) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.timerfd_create(1, 0o2000000)  # CLOCK_MONOTONIC, blocking, close-on-exec
    if fd < 0:
        raise OSError(ctypes.get_errno(), "timerfd_create")
    ns = int(period_s * 1e9)
    spec = _Itimerspec(_Timespec(ns // 10**9, ns % 10**9), _Timespec(ns // 10**9, ns % 10**9))
    if libc.timerfd_settime(fd, 0, ctypes.byref(spec), None) != 0:
        raise OSError(ctypes.get_errno(), "timerfd_settime")
    return fd


def _in_thread(sleeper: Callable[[], None], wakes: int) -> float:
    """CPU microseconds per wake of a fresh OS thread calling ``sleeper`` ``wakes`` times."""
    result: list[float] = []

    def run() -> None:
        start = time.thread_time()
        for _ in range(wakes):
            sleeper()
        result.append((time.thread_time() - start) / wakes * 1e6)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    return result[0]


def thread_lock(wakes: int, period_s: float) -> float:
    lock = threading.Lock()
    lock.acquire()
    return _in_thread(lambda: lock.acquire(True, period_s), wakes)


def thread_sleep(wakes: int, period_s: float) -> float:
    return _in_thread(lambda: time.sleep(period_s), wakes)


def thread_timerfd(wakes: int, period_s: float) -> float:
    fd = _periodic_timerfd(period_s)
    try:
        return _in_thread(lambda: os.read(fd, 8), wakes)
    finally:
        os.close(fd)


def loop_gevent_sleep(wakes: int, period_s: float) -> float:
    start = time.thread_time()
    for _ in range(wakes):
        gevent.sleep(period_s)
    return (time.thread_time() - start) / wakes * 1e6


def loop_alarm(wakes: int, period_s: float) -> float:
    found = alarm()
    if found is None:
        raise OSError("timerfd is not available here: the plugin's alarm falls back to gevent's timers")
    start = time.thread_time()
    for _ in range(wakes):
        found.wait_until(time.time() + period_s)
    return (time.thread_time() - start) / wakes * 1e6


WAYS: dict[str, Callable[[int, float], float]] = {
    "OS thread, lock timed wait": thread_lock,
    "OS thread, time.sleep": thread_sleep,
    "OS thread, periodic timerfd read": thread_timerfd,
    "event loop, gevent.sleep": loop_gevent_sleep,
    "event loop, the plugin's alarm": loop_alarm,
}


def main() -> None:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wakes", type=int, default=300, help="wakes a round (default 300)")
    parser.add_argument("--period-ms", type=float, default=10.0, help="time between wakes (default 10 ms)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of each way, in turns (default 3)")
    args = parser.parse_args()
    if args.wakes < 1 or args.rounds < 1 or args.period_ms <= 0:
        parser.error("--wakes and --rounds must be at least 1, --period-ms above 0")
    period_s = args.period_ms / 1000.0
    found: dict[str, list[float]] = {name: [] for name in WAYS}
    for _ in range(args.rounds):
        for name, way in WAYS.items():
            found[name].append(way(args.wakes, period_s))
    print(f"CPU per wake, {args.wakes} wakes {args.period_ms:g} ms apart, {args.rounds} rounds in turns "
          f"({os.cpu_count()} CPUs):")
    for name, values in found.items():
        spread = ", ".join(f"{v:.0f}" for v in values)
        print(f"  {name:34s} {statistics.median(values):6.1f} us (rounds: {spread})")


if __name__ == "__main__":
    main()
