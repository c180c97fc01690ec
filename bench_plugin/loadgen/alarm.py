"""Alarm: wakes a greenlet at an exact epoch time, to a fraction of a millisecond, without spinning.

An open-loop request must leave at its intended time: every microsecond it leaves late is counted as
latency the server never caused. gevent's own timers cannot promise that: libev hands the kernel its
poll timeout in whole milliseconds, rounded up, so a timer fires up to a millisecond late (half a
millisecond on average, measured on the project's 2-core machine). The plugin used to close that gap by
yielding in a loop for the last 2 ms before each send, which cost about 1.5 ms of CPU per request and,
at a few hundred requests a second, kept the loop spinning most of the time.

Here every waiting greenlet sits in one heap; a Linux ``timerfd`` (nanosecond resolution, set for an
absolute time on CLOCK_REALTIME, the clock of ``time.time()``) is armed for the earliest entry and
watched by the event loop like a socket. When it fires, the loop wakes within tens of microseconds and
switches to every greenlet whose time has come, in time order, then re-arms for the next. Per wake that
is a read and a ``timerfd_settime`` (through ctypes: Python 3.11 has no ``os.timerfd_*``), about 35 us
of CPU against the 1.5 ms of the spin, with a send lag P50 of 0.07 ms against 0.55 ms for a plain gevent
timer (benchmarks/loadgen_capacity.py measures both in the plugin). Where timerfd is missing (not Linux),
``wait_until`` falls back to a plain gevent timer: late by up to a millisecond, never busy.

One alarm per thread's event loop (``alarm()``); a greenlet killed while it waits leaves the heap lazily.
"""

from __future__ import annotations

import contextlib
import ctypes
import heapq
import itertools
import os
import time
from typing import Any

import gevent
from gevent.hub import Waiter, get_hub

CLOCK_REALTIME = 0
TFD_NONBLOCK = 0o4000
TFD_CLOEXEC = 0o2000000
TFD_TIMER_ABSTIME = 1


PRIORITISED = True
"""The timer's watcher runs first of everything ready in a turn of the event loop (libev's highest priority):
a turn that finds the timer expired and replies waiting to be read wakes the due greenlets before any reader,
instead of in whatever order the poll returned them, each reader running its greenlet until it blocks."""


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [("it_interval", _Timespec), ("it_value", _Timespec)]


def _libc() -> Any:
    """The C library's timerfd calls, or None where there are none."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        create, settime = libc.timerfd_create, libc.timerfd_settime
    except (OSError, AttributeError):
        return None
    create.argtypes, create.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    settime.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.POINTER(_Itimerspec), ctypes.c_void_p]
    settime.restype = ctypes.c_int
    return libc


class Alarm:
    """The timerfd of one event loop and the greenlets waiting on it (see the module)."""

    def __init__(self) -> None:
        libc = _libc()
        fd = libc.timerfd_create(CLOCK_REALTIME, TFD_NONBLOCK | TFD_CLOEXEC) if libc is not None else -1
        if fd < 0:
            raise OSError(ctypes.get_errno() if libc is not None else 0, "timerfd_create is not available")
        self._settime = libc.timerfd_settime
        self.fd = fd
        self._heap: list[tuple[float, int, Waiter[Any]]] = []
        self._order = itertools.count()
        self._armed: float | None = None
        self._spec = _Itimerspec()
        self._spec_ref = ctypes.byref(self._spec)
        loop = get_hub().loop
        self._watcher = loop.io(fd, 1, ref=False,  # readable: the timer expired
                                priority=loop.MAXPRI if PRIORITISED else None)
        self._watcher.start(self._fired)
        self.wakes = 0
        """Times the timer fired (for the cost benchmark)."""

    def wait_until(self, when_s: float) -> None:
        """Return at epoch ``when_s`` (at once if it has passed), letting other greenlets run meanwhile."""
        if when_s <= time.time():
            return
        waiter: Waiter[Any] = Waiter()
        heapq.heappush(self._heap, (when_s, next(self._order), waiter))
        if self._armed is None or when_s < self._armed:
            self._arm(when_s)
        waiter.get()

    def _arm(self, when_s: float) -> None:
        whole = int(when_s)
        self._spec.it_value.tv_sec = whole
        self._spec.it_value.tv_nsec = int((when_s - whole) * 1e9)
        if self._settime(self.fd, TFD_TIMER_ABSTIME, self._spec_ref, None) != 0:
            raise OSError(ctypes.get_errno(), "timerfd_settime failed")
        self._armed = when_s
        self._watcher.ref = True  # a greenlet waits: the loop must run until the timer fires

    def _fired(self) -> None:
        """The loop saw the timer expire: wake every greenlet that is due, oldest time first, then re-arm.

        Setting the timer zeroes its count of expirations, so a re-armed timerfd no longer reads as ready
        (the kernel's timerfd_setup): the count is read off only when nobody waits any more, one system
        call fewer per wake."""
        self.wakes += 1
        self._armed = None
        heap = self._heap
        now = time.time()
        while heap and heap[0][0] <= now:
            _, _, waiter = heapq.heappop(heap)
            if waiter.greenlet is not None:  # None: its greenlet was killed while it waited
                waiter.switch(None)
        if heap:
            if heap[0][0] != self._armed:  # a greenlet it woke may have armed it for the earliest already
                self._arm(heap[0][0])
        else:
            with contextlib.suppress(BlockingIOError):  # re-armed and reset by a greenlet it woke: nothing to read
                os.read(self.fd, 8)
            self._watcher.ref = False  # nobody waits: the timer alone keeps no loop alive

    def close(self) -> None:
        """Stop watching and close the timerfd (greenlets still waiting are not woken)."""
        self._watcher.stop()
        self._watcher.close()
        os.close(self.fd)


_alarms: dict[int, Alarm | None] = {}
"""Event loop (its id) -> its alarm, or None where timerfd is missing. A forked child (Locust's
``--processes``) forgets its parent's and makes its own: the parent's timerfd is shared with it."""
_forgets = [False]
"""Whether the at-fork hook that empties _alarms in a child is registered (at the first alarm made)."""


def alarm() -> Alarm | None:
    """The alarm of the calling thread's event loop (made on first use), or None where timerfd is missing."""
    loop = id(get_hub().loop)
    if loop not in _alarms:
        if not _forgets[0]:
            os.register_at_fork(after_in_child=_alarms.clear)
            _forgets[0] = True
        try:
            _alarms[loop] = Alarm()
        except OSError:
            _alarms[loop] = None
    return _alarms[loop]


def wait_until(when_s: float) -> None:
    """Return at epoch ``when_s``, to a fraction of a millisecond where timerfd exists, letting other
    greenlets run meanwhile."""
    found = alarm()
    if found is not None:
        found.wait_until(when_s)
        return
    remaining = when_s - time.time()
    if remaining > 0:
        gevent.sleep(remaining)
