"""Runners: greenlets kept to run one request after another, instead of a new greenlet for every request.

An open-loop process runs each request in a greenlet of its own, handed over a few milliseconds before
the request is due (users/base.py). Spawning a gevent Greenlet for each goes through gevent's Python
start-up (the Greenlet, its start, the group's bookkeeping and link callbacks), and its first frame
makes CPython 3.11 map a fresh 16 KiB stack chunk for it, unmapped again when it ends: two system calls
per request. A runner ends a call and waits for the next one instead, so its stack stays mapped;
a call handed over is switched to from the event loop's callbacks exactly when a new greenlet would
first run (gevent starts one the same way), so no request starts later than it did.

``kill`` ends every runner, busy or idle: a call under way gets GreenletExit as a killed greenlet would,
and a call handed over that had not started yet is dropped. Import starts nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import gevent
from gevent.hub import Waiter, get_hub
from gevent.pool import Group

MAX_IDLE = 4096
"""Runners kept waiting for work at most (each a few KB); a runner past this ends after its call."""

Call = tuple[Callable[..., None], tuple[Any, ...]]


class Runners:
    """The runners of the calling thread's event loop."""

    def __init__(self, max_idle: int = MAX_IDLE) -> None:
        self.max_idle = max_idle
        self.group = Group()
        """Every runner alive, busy or idle."""
        self._idle: list[Waiter[Call]] = []
        self._epoch = 0
        """Counts kills: a runner made before the last one runs nothing more."""

    def spawn(self, run: Callable[..., None], *args: Any) -> None:
        """Run ``run(*args)`` in a runner: an idle one, or a new one if none is idle."""
        if self._idle:
            get_hub().loop.run_callback(self._idle.pop().switch, (run, args))  # as Greenlet.start does
        else:
            self.group.spawn(self._serve, run, args)

    def _serve(self, run: Callable[..., None], args: tuple[Any, ...]) -> None:
        waiter: Waiter[Call] = Waiter()
        epoch = self._epoch
        while True:
            run(*args)
            run = args = None  # type: ignore[assignment]  # hold nothing of the last call while idle
            if len(self._idle) >= self.max_idle:
                return
            self._idle.append(waiter)
            run, args = waiter.get()
            if epoch != self._epoch:  # handed over before a kill that reached this runner after the call did
                return

    def kill(self, block: bool = True, timeout: float | None = None) -> None:
        """End every runner (see the module): what is under way is cancelled, what has not started is dropped."""
        self._epoch += 1
        self._idle.clear()
        self.group.kill(block=block, timeout=timeout)

    def join(self, timeout: float | None = None) -> bool:
        """Wait until no call runs or waits to start (every runner idle or ended), at most ``timeout`` seconds;
        whether that came (a Group's join, for runners that do not end)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while len(self.group) > len(self._idle):
            if deadline is not None and time.monotonic() >= deadline:
                return False
            gevent.sleep(0.005)
        return True

    def __len__(self) -> int:
        """Runners alive, busy or idle."""
        return len(self.group)

    @property
    def idle(self) -> int:
        """Runners waiting for a call."""
        return len(self._idle)
