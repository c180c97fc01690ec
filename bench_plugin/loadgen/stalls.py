"""Stalls: when a load-generating process's event loop stopped turning, for how long, and what held it.

An open-loop generator sends each request from a greenlet that sleeps until the request's intended
time; if some code holds the loop meanwhile (a C call that does not yield to gevent, a long
computation in one greenlet), every request due in that time leaves late, and the lateness is counted
as latency the servers never caused. The send lag shows that it happened; this module shows where.

Two parts watch the loop of the process's main thread:

- the loop marks its own turns: a libev *check* hook (first thing after the loop's poll returns) notes
  when it started running greenlets and callbacks, and a *prepare* hook (last thing before it polls
  again) how long that stretch lasted. No timer fires when the loop is held, and a stretch is how late
  any timer due in it fires: one longer than ``threshold_ms`` (5 ms) is a **block**, recorded by the
  prepare hook: its start (epoch seconds), its length (ms) and its cause. This is what a heartbeat
  greenlet sleeping 2 ms would measure as its own lateness, to within its period, without waking the
  process 500 times a second: on the project's 2-core machine such a heartbeat cost about 4% of a core,
  the hooks under 1% (docs/benchmarks.md, "The stall monitor's own cost").
- a watcher in a real OS thread (``_thread`` as gevent found it: a thread gevent cannot block) looks
  every ``look_s`` (10 ms); finding the loop in a stretch, it waits until that stretch is ``threshold_ms``
  old, and if it still runs, reads the main thread's stack (``sys._current_frames``) once and names the
  cause: the innermost frame as ``module.function (file:line)``, and the first bench_plugin frame on
  the way out where that differs (``... via bench_plugin.x.f (file:line)``). A block longer than
  ``look_s`` is always named; a shorter one with a chance of its length over ``look_s``. A C call that
  releases the GIL (ctypes, most I/O) lets the watcher look at once; pure Python holding the loop lets
  it look at the next GIL switch (5 ms). Each look costs the process 40-80 us of CPU on a virtual
  machine (a timed wait's wake), whatever it finds, so once the loop has gone ``CALM_AFTER_S`` without
  a block (and at least that long since ``start()``) the watcher looks every ``calm_look_s`` (40 ms)
  instead, until the next block: a first block after a calm spell is named where it outlasts
  ``calm_look_s`` (else with a chance of its length over that), and the blocks that follow it as
  above. Every block is counted and measured either way (the hooks do that, not the watcher).

A block whose stack the watcher did not read is recorded as UNSEEN; one read while the main thread
was in the hub itself, between greenlets (a stretch of many short callbacks rather than one long one),
as HUB. Python's cyclic garbage collector holds the GIL, and so every thread, for as long as it walks
the objects: the watcher cannot look then, and when it can, the stack it reads is whatever ran next.
So the monitor also notes each collection (``gc.callbacks``, in whichever thread it ran), and a block
that collections filled for at least half its length is recorded as GC_CAUSE (with the oldest
generation collected), whatever the watcher read; every collection is also kept with its length, so a stage
reports how many ran while it was sent and the longest (loadgen/collector.py holds them off then). Blocks
are kept in a bounded deque; :meth:`StallMonitor.report` gives those of one stage's sending window in the form
Reporter.usage ships (``stalls``), and :func:`thread_busy_s` how long the calling thread was on a CPU or
waiting for one (the kernel's schedstat), which tells a loop short of CPU from a loop blocked while its
CPU was idle (analysis/selfcheck.py). Importing the module starts nothing; a monitor runs from
``start()`` to ``stop()``, on gevent's default libev loop (another loop without check/prepare
priorities would blur the stretches). docs/analysis.md ("The instrument checks itself") says how the
self-check uses it.
"""

from __future__ import annotations

import _thread
import gc
import os
import sys
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType
from typing import Any

import gevent
from gevent import monkey

from bench_plugin.results.summary import GeneratorStalls

THRESHOLD_MS = 5.0
"""A stretch of the loop longer than this (ms) without polling is a block."""
LOOK_S = 0.010
"""How often the watcher looks at the loop (s): blocks longer than this are always named."""
CALM_LOOK_S = 0.040
"""How often it looks once the loop has been calm (no block) for CALM_AFTER_S."""
CALM_AFTER_S = 1.0
"""How long without a block (and since start()) before the watcher looks every CALM_LOOK_S."""
MAX_BLOCKS = 10_000
"""Blocks kept (the oldest go first); a stage reports its own from these."""
MAX_LISTED = 200
"""Blocks listed one by one in a stage's report (the longest; the counts and sums cover them all)."""

HUB = "gevent's hub, between greenlets (no single one held the loop when seen)"
"""The cause of a block the watcher saw while the main thread was in the hub's own loop."""
UNSEEN = "unseen: the block ended, or kept the GIL, before the watcher looked"
"""The cause of a block whose stack the watcher never read."""
GC_CAUSE = "Python's cyclic garbage collector (generation {generation})"
"""The cause of a block that garbage collections filled for at least half its length."""
MAX_COLLECTIONS = 256
"""Recent garbage collections kept to be matched with the blocks they fall in."""

_HERE = __name__


def _native() -> tuple[Callable[..., int], Callable[[], _thread.LockType], Callable[[], int]]:
    """``start_new_thread``, ``allocate_lock`` and ``get_ident`` of the OS, even where gevent patched them."""
    return (monkey.get_original("_thread", "start_new_thread"), monkey.get_original("_thread", "allocate_lock"),
            monkey.get_original("_thread", "get_ident"))


@dataclass(frozen=True)
class Block:
    """One stretch of time in which the loop ran nothing else."""

    start_s: float
    """When the loop's stretch began (epoch seconds), after its last poll."""
    ms: float
    """How long the stretch ran without polling: the lateness of any timer due in it."""
    cause: str
    """What held the loop (``module.function (file:line)``), or HUB, or UNSEEN."""

    @property
    def end_s(self) -> float:
        """When the loop turned again (epoch seconds)."""
        return self.start_s + self.ms / 1000.0


def _where(frame: FrameType) -> str:
    code = frame.f_code
    module = frame.f_globals.get("__name__", "?")
    return f"{module}.{code.co_qualname} ({os.path.basename(code.co_filename)}:{frame.f_lineno})"


def describe(frame: FrameType | None) -> str:
    """The cause a stack names: its innermost frame, and the first bench_plugin frame outwards if another."""
    if frame is None:
        return HUB
    module = frame.f_globals.get("__name__", "")
    if (module == "gevent.hub" and frame.f_code.co_name == "run") or module == _HERE:
        return HUB
    cause = _where(frame)
    outer: FrameType | None = frame
    while outer is not None:
        if str(outer.f_globals.get("__name__", "")).startswith("bench_plugin"):
            return cause if outer is frame else f"{cause} via {_where(outer)}"
        outer = outer.f_back
    return cause


def thread_busy_s() -> float | None:
    """Seconds the calling OS thread has spent on a CPU or runnable waiting for one (Linux schedstat).

    Time on a CPU alone (``time.thread_time``) cannot tell a loop short of CPU on a busy host from one
    that sleeps: both get little. The kernel also counts the time a thread was ready to run but waited
    for a CPU; the sum is the CPU the thread wanted. None where the kernel does not say.
    """
    try:
        with open("/proc/thread-self/schedstat", encoding="ascii") as fh:
            on_cpu, waiting = fh.read().split()[:2]
        return (int(on_cpu) + int(waiting)) / 1e9
    except (OSError, ValueError):
        return None


class StallMonitor:
    """Finds the blocks of this process's event loop (the main thread's), each with its cause."""

    def __init__(self, *, threshold_ms: float = THRESHOLD_MS, look_s: float = LOOK_S,
                 calm_look_s: float = CALM_LOOK_S, max_blocks: int = MAX_BLOCKS) -> None:
        self.threshold_ms = threshold_ms
        self.look_s = look_s
        self.calm_look_s = max(calm_look_s, look_s)
        self.looks = 0
        """Times the watcher looked since it was last started (for the cost benchmark and the tests)."""
        self.block_count = 0
        """Blocks recorded so far, those dropped from ``blocks`` (the oldest) included."""
        self.blocks: deque[Block] = deque(maxlen=max_blocks)
        """Every block seen since start(), oldest first (at most ``max_blocks``)."""
        self.turns = 0
        """Stretches the loop ran since start() (for the cost benchmark)."""
        self._since: float | None = None
        """Monotonic start of the loop's current stretch; None while it polls. Written by the loop only."""
        self._seen: tuple[float, str] | None = None
        """(the stretch the watcher found overdue, the cause it read then): written by the watcher only."""
        self._hooks: list[Any] = []
        self._collections: deque[tuple[float, float, int]] = deque(maxlen=MAX_COLLECTIONS)
        """Recent garbage collections: (monotonic start, end, generation); appended in any thread."""
        self.collections: deque[tuple[float, float]] = deque(maxlen=MAX_BLOCKS)
        """Every garbage collection since start(), oldest first: (epoch start, ms); a stage reports its own."""
        self._collecting: float | None = None
        """Monotonic start of the collection under way (the collector runs one at a time: it holds the GIL)."""
        self._stop: _thread.LockType | None = None
        """Held while the watcher runs; stop() releases it, which also ends the watcher's wait."""

    @property
    def running(self) -> bool:
        """True between start() and stop()."""
        return bool(self._hooks)

    def start(self) -> None:
        """Hook this thread's loop and start the watcher in an OS thread (again after stop())."""
        if self.running:
            return
        start_thread, allocate_lock, get_ident = _native()
        loop = gevent.get_hub().loop
        check = loop.check(ref=False, priority=loop.MAXPRI)  # the first callback after the poll
        prepare = loop.prepare(ref=False, priority=loop.MINPRI)  # the last before the next, after gevent's own
        check.start(self._turned)
        prepare.start(self._polling)
        self._hooks = [check, prepare]
        gc.callbacks.append(self._collection)
        self._since = time.monotonic()  # called from code on the loop: this stretch is running now
        stop = self._stop = allocate_lock()
        stop.acquire()
        start_thread(self._watch, (stop, get_ident()))

    def stop(self) -> None:
        """Unhook the loop and end the watcher; the blocks seen so far stay."""
        hooks, stop = self._hooks, self._stop
        self._hooks, self._stop, self._since = [], None, None
        if self._collection in gc.callbacks:
            gc.callbacks.remove(self._collection)
        for hook in hooks:
            hook.stop()
            hook.close()
        if stop is not None:
            stop.release()

    def _turned(self) -> None:
        self._since = time.monotonic()

    def _polling(self) -> None:
        since, self._since = self._since, None
        if since is None:
            return
        self.turns += 1
        now = time.monotonic()
        ms = (now - since) * 1000.0
        if ms > self.threshold_ms:
            seen = self._seen
            cause = seen[1] if seen is not None and seen[0] == since else UNSEEN
            collected_ms, generation = self._collected(since, now)
            if collected_ms >= ms / 2:
                cause = GC_CAUSE.format(generation=generation)
            self.blocks.append(Block(time.time() - (now - since), ms, cause))
            self.block_count += 1

    def _collection(self, phase: str, info: dict[str, int]) -> None:
        """gc.callbacks: note each collection's start and end (it runs in the thread that allocated)."""
        if phase == "start":
            self._collecting = time.monotonic()
        elif self._collecting is not None:
            end = time.monotonic()
            self._collections.append((self._collecting, end, info["generation"]))
            self.collections.append((time.time() - (end - self._collecting), (end - self._collecting) * 1000.0))
            self._collecting = None

    def _collected(self, since: float, until: float) -> tuple[float, int]:
        """How long collections ran between monotonic ``since`` and ``until`` (ms), and the oldest generation."""
        ms, generation = 0.0, 0
        for start, end, gen in list(self._collections):
            overlap = min(end, until) - max(start, since)
            if overlap > 0:
                ms += overlap * 1000.0
                generation = max(generation, gen)
        return ms, generation

    def _watch(self, stop: _thread.LockType, main: int) -> None:
        """The OS thread: look every ``look_s`` (``calm_look_s`` once calm); a stretch found running is looked
        at again once it is ``threshold_ms`` old, and if it still runs, its stack is read (once per block)."""
        limit_s = self.threshold_ms / 1000.0
        self.looks = 0
        blocks, alert_until = self.block_count, time.monotonic() + CALM_AFTER_S
        while True:
            self.looks += 1
            now = time.monotonic()
            if self.block_count != blocks:
                blocks, alert_until = self.block_count, now + CALM_AFTER_S
            wait = self.look_s if now < alert_until else self.calm_look_s
            since = self._since
            if since is not None:
                age = now - since
                if age < limit_s:
                    wait = limit_s - age + 0.0002
                elif self._seen is None or self._seen[0] != since:
                    self._seen = (since, describe(sys._current_frames().get(main)))
            if stop.acquire(True, wait):  # released by stop(): an OS wait, not the hub's
                return

    def between(self, start_s: float, end_s: float) -> list[Block]:
        """The blocks that overlap epoch ``start_s`` .. ``end_s``, oldest first."""
        return [b for b in list(self.blocks) if b.start_s < end_s and b.end_s > start_s]

    def report(self, start_s: float, end_s: float, busy_s: float | None = None) -> GeneratorStalls:
        """The blocks of one sending window as Reporter.usage ships them; ``busy_s``: the seconds the loop's
        thread was on a CPU or waiting for one meanwhile (None: unknown)."""
        blocks = self.between(start_s, end_s)
        causes: dict[str, list[float]] = {}
        for b in blocks:
            entry = causes.setdefault(b.cause, [0, 0.0])
            entry[0] += 1
            entry[1] += b.ms
        listed = sorted(sorted(blocks, key=lambda b: -b.ms)[:MAX_LISTED], key=lambda b: b.start_s)
        collected = [ms for at, ms in list(self.collections) if start_s <= at < end_s]
        return GeneratorStalls(
            threshold_ms=self.threshold_ms, count=len(blocks), total_ms=sum(b.ms for b in blocks),
            max_ms=max((b.ms for b in blocks), default=0.0),
            causes={cause: (int(n), ms) for cause, (n, ms) in causes.items()},
            blocks=[(b.start_s, b.ms) for b in listed], busy_s=busy_s,
            collections=len(collected), collection_max_ms=max(collected, default=0.0))
