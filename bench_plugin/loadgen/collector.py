"""Collector: keep Python's cyclic garbage collector from pausing a load generator at send times.

A full collection walks every tracked object; in a process holding request sets, a results buffer
and Locust's statistics that took tens of milliseconds, during which no request leaves and no reply
is timed (seen at 2,000-4,000 req/s: full collections of 54-100 ms, 7-13 times in 30 s). So once a
process has built what it keeps for the whole run, that is moved out of the collector's sight
(``gc.freeze``), and collections run less often. Reference counting still frees all non-cyclic
garbage at once, which is nearly everything a request leaves behind.
"""

from __future__ import annotations

import gc

THRESHOLDS = (20_000, 20, 20)
"""Allocations before a young collection, and young (middle) collections before an older one.

Python's default (700, 10, 10) collects the youngest generation every 700 net allocations, a few
times per request at these rates."""


def settle() -> None:
    """Collect once, freeze everything that survives, and collect less often from now on."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)
