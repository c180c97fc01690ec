"""Collector: keep Python's cyclic garbage collector from pausing a load generator while it sends a stage.

A collection holds the GIL, and so the event loop, for as long as it walks the objects it examines: a
full one took tens of milliseconds in a process holding request sets, a results buffer and Locust's
statistics (seen at 2,000-4,000 req/s: 54-100 ms, 7-13 times in 30 s), and even a young one walks up to
its threshold's worth of objects, 1-3 ms at 20,000. Any request due meanwhile leaves late by that much.

So, as AIPerf's and MLCommons' load generators do:

- once a process has built what it keeps for the whole run, that is collected once and moved out of the
  collector's sight (``settle``: ``gc.freeze``), and collections run less often;
- while a stage is being sent (from its assignment to the end of the last request in flight), automatic
  collection is off (``hold``); reference counting still frees at once everything a request leaves behind
  that is not a cycle, which is nearly all of it. Between stages it is on again, after one young
  collection of what the stage left (``release``).
- A guard keeps a stage that leaves cycles behind from growing without bound: when the objects allocated
  since the last collection pass ``GUARD_OBJECTS`` (``check``, called from the sending loops), one
  collection of the young generations runs then, and the stall monitor shows it like any other
  (loadgen/stalls.py records every collection with its length).
"""

from __future__ import annotations

import gc

THRESHOLDS = (20_000, 20, 20)
"""Allocations before a young collection, and young (middle) collections before an older one, while
collection is automatic (between stages). Python's default (700, 10, 10) collects the youngest generation
every 700 net allocations, a few times per request at these rates."""
GUARD_OBJECTS = 500_000
"""Tracked objects allocated (and still alive) since the last collection past which a held collector runs a
young collection anyway: some 50-100 MB, and about what a few seconds of cycles at thousands of requests a
second would leave, far more than a stage that leaves none ever reaches."""

_held = [False]


def settle() -> None:
    """Collect once, freeze everything that survives, and collect less often from now on."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)


def hold() -> None:
    """A stage is being sent: no automatic collection until ``release``."""
    if not _held[0]:
        _held[0] = True
        gc.disable()


def release() -> None:
    """No stage is being sent: collect what the last one left (the young generations), and collect as usual."""
    if _held[0]:
        _held[0] = False
        gc.collect(1)
        gc.enable()


def check() -> None:
    """While held: collect the young generations once the objects allocated since the last pass GUARD_OBJECTS."""
    if _held[0] and gc.get_count()[0] > GUARD_OBJECTS:
        gc.collect(1)


def held() -> bool:
    """Whether automatic collection is held (a stage is being sent)."""
    return _held[0]
