"""Arrival processes: when each request of a stage is meant to leave, and which input it carries.

Open-loop arrivals are generated from a seed derived from (scenario seed, class, stage), so every
arm and every repeat replays exactly the same sequence of send times and inputs: arms differ only in
what the scenario says they differ in. With several Locust workers, each sends the arrivals of its
share (loadgen/shares.py), so the union over workers is the same sequence as on one process.

Two open-loop processes (a class's ``arrival``):

- ``poisson`` (the default): a Poisson process conditioned on its count. A stage of rate r and
  duration d sends exactly n = round(r·d) arrivals (halves round up), at n sorted times drawn
  uniformly over the stage: given its count, that is exactly how a Poisson process's times are
  distributed, so the gaps stay exponential-like while the stage's load is the one its label says.
- ``plain-poisson``: exponential gaps at rate r until the stage ends; the count is itself Poisson
  (mean r·d, spread sqrt(r·d)), so a 12-s stage at 3 req/s may send 25 or 47. Reports label it and
  give the realised rate (arrivals / duration) beside the nominal one.
"""

from __future__ import annotations

import zlib

import numpy as np

from bench_plugin.scenario import WORKLOAD_CLASSES


def _rng(seed: int, workload: str, stage: int, purpose: str) -> np.random.Generator:
    tag = zlib.crc32(f"{workload}/{purpose}".encode())
    return np.random.default_rng([seed, WORKLOAD_CLASSES.index(workload), stage, tag])


OPEN_LOOP: tuple[str, ...] = ("poisson", "plain-poisson")
"""The open-loop arrival processes, default first (``closed`` runs request loops instead)."""


def arrival_count(rate: float, duration_s: float) -> int:
    """round(rate * duration), halves up: the arrivals of a conditioned Poisson stage."""
    if rate <= 0 or duration_s <= 0:
        return 0
    return int(np.floor(rate * duration_s + 0.5 + 1e-9))


def arrival_offsets(arrival: str, rate: float, duration_s: float, seed: int, workload: str,
                    stage: int) -> np.ndarray:
    """Send times (seconds from the stage start) of the open-loop process named ``arrival``."""
    if arrival == "poisson":
        return conditioned_poisson_offsets(rate, duration_s, seed, workload, stage)
    if arrival == "plain-poisson":
        return poisson_offsets(rate, duration_s, seed, workload, stage)
    raise ValueError(f"arrival {arrival!r} is not an open-loop process (one of {', '.join(OPEN_LOOP)})")


def conditioned_poisson_offsets(rate: float, duration_s: float, seed: int, workload: str, stage: int) -> np.ndarray:
    """Exactly ``arrival_count(rate, duration_s)`` send times: sorted uniform draws over the stage."""
    n = arrival_count(rate, duration_s)
    if n == 0:
        return np.empty(0)
    rng = _rng(seed, workload, stage, "arrivals")
    return np.sort(rng.uniform(0.0, duration_s, size=n))


def poisson_offsets(rate: float, duration_s: float, seed: int, workload: str, stage: int) -> np.ndarray:
    """Send times (seconds from the stage start) of a plain Poisson process of ``rate`` per second."""
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
