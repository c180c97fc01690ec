"""Arrival processes: when each request of a stage is meant to leave, and which input it carries.

Open-loop Poisson arrivals are generated from a seed derived from (scenario seed, class, stage), so
every arm and every repeat replays exactly the same sequence of send times and inputs: arms differ
only in what the scenario says they differ in. With several Locust workers, each sends the arrivals
of its share (loadgen/shares.py), so the union over workers is the same sequence as on one process.
"""

from __future__ import annotations

import zlib

import numpy as np

from bench_plugin.scenario import WORKLOAD_CLASSES


def _rng(seed: int, workload: str, stage: int, purpose: str) -> np.random.Generator:
    tag = zlib.crc32(f"{workload}/{purpose}".encode())
    return np.random.default_rng([seed, WORKLOAD_CLASSES.index(workload), stage, tag])


def poisson_offsets(rate: float, duration_s: float, seed: int, workload: str, stage: int) -> np.ndarray:
    """Send times (seconds from the stage start) of a Poisson process of ``rate`` per second."""
    if rate <= 0 or duration_s <= 0:
        return np.empty(0)
    rng = _rng(seed, workload, stage, "arrivals")
    expected = rate * duration_s
    n = int(expected + 10 * np.sqrt(expected) + 20)
    times = np.cumsum(rng.exponential(1.0 / rate, size=n))
    while times[-1] < duration_s:  # astronomically rare: extend rather than truncate the process
        more = times[-1] + np.cumsum(rng.exponential(1.0 / rate, size=n))
        times = np.concatenate([times, more])
    return times[times < duration_s]


def item_order(n_items: int, count: int, seed: int, workload: str, stage: int) -> np.ndarray:
    """Request-set indices for ``count`` arrivals: seeded shuffles of the set, one after another."""
    rng = _rng(seed, workload, stage, "items")
    rounds = -(-count // n_items) if count else 0
    if rounds == 0:
        return np.empty(0, dtype=np.int64)
    return np.concatenate([rng.permutation(n_items) for _ in range(rounds)])[:count]
