"""OffLoop: blocking calls run in an OS thread of their own, so the greenlet that makes one lets the event loop turn.

Under Locust the process is monkey-patched by gevent and every greenlet shares one event loop: while
one greenlet is in a call that does not yield to gevent (a disk write and its fsync, reading /proc),
no request is sent and no reply is timed. On an H200 host the results store's inserts at a stage's
end (its samples, the GPU telemetry sampled through it: about a thousand rows) held that loop 10-14
ms, while the next stage's requests were due and the last one's stragglers were being timed
(docs/benchmarks.md, "Send lag on a GPU host"). So where gevent has patched ``threading``,
:meth:`OffLoop.run` hands the call to a gevent thread pool of one OS thread: the calling greenlet waits
for it cooperatively (the loop runs other greenlets meanwhile) and gets its result or its exception
as before, and calls keep the order in which they were asked for (one worker; the pool's queue is
first come, first served). sqlite3 and file reads release the GIL while they work, so the loop's
thread runs beside them. Without gevent's patching (a plain script, the report) a call runs in the
caller, as a plain function call. Importing the module starts nothing; the thread starts at the
first call under gevent.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def _patched() -> bool:
    """Whether gevent has patched ``threading`` in this process (a Locust process); imports nothing."""
    monkey = sys.modules.get("gevent.monkey")  # patching imports it: absent, nothing is patched
    return monkey is not None and bool(monkey.is_module_patched("threading"))


def _outcome(call: Callable[..., Any], args: tuple[Any, ...]) -> tuple[bool, Any]:
    """(True, what ``call(*args)`` returns) or (False, the exception it raised)."""
    try:
        return True, call(*args)
    except Exception as exc:
        return False, exc


class OffLoop:
    """Runs one owner's blocking calls one at a time, off the event loop where there is one (see the module)."""

    def __init__(self) -> None:
        self._pool: Any = None
        """The gevent thread pool of one OS thread, made at the first call under gevent."""

    def run(self, call: Callable[..., T], *args: Any) -> T:
        """``call(*args)`` in the OS thread: what it returns, or what it raises, in the caller."""
        if self._pool is None:
            if not _patched():
                return call(*args)
            from gevent.threadpool import ThreadPool

            self._pool = ThreadPool(1)
        ok, value = self._pool.apply(_outcome, (call, args))
        if not ok:
            raise value  # here, not in the pool, which would print it as an unhandled error first
        result: T = value
        return result

    def close(self) -> None:
        """Stop the OS thread once the calls asked for so far are done."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.join()
            pool.kill()
