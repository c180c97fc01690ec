"""Arrival processes: seeded, identical across calls, Poisson in distribution, split exactly over workers."""

from __future__ import annotations

import numpy as np

from bench_plugin.users.arrivals import item_order, poisson_offsets


def test_same_seed_same_sequence_and_different_stage_differs() -> None:
    a = poisson_offsets(5.0, 60.0, seed=1, workload="llm", stage=0)
    assert np.array_equal(a, poisson_offsets(5.0, 60.0, seed=1, workload="llm", stage=0))
    assert not np.array_equal(a, poisson_offsets(5.0, 60.0, seed=1, workload="llm", stage=1))
    assert not np.array_equal(a, poisson_offsets(5.0, 60.0, seed=1, workload="asr", stage=0))


def test_rate_and_exponential_gaps() -> None:
    times = poisson_offsets(50.0, 200.0, seed=3, workload="embedding", stage=2)
    assert times[0] >= 0 and times[-1] < 200.0 and np.all(np.diff(times) > 0)
    assert abs(len(times) / 200.0 - 50.0) < 2.0  # ~10000 arrivals: sd of the rate is 0.5
    gaps = np.diff(times)
    assert abs(gaps.mean() - 0.02) < 0.001
    assert abs(np.std(gaps) / gaps.mean() - 1.0) < 0.05  # exponential: coefficient of variation 1


def test_zero_rate_sends_nothing() -> None:
    assert len(poisson_offsets(0.0, 10.0, seed=0, workload="llm", stage=0)) == 0


def test_item_order_covers_the_set_before_repeating() -> None:
    order = item_order(8, 20, seed=0, workload="llm", stage=0)
    assert len(order) == 20
    assert sorted(order[:8]) == list(range(8)) and sorted(order[8:16]) == list(range(8))


def test_workers_partition_the_same_global_sequence() -> None:
    times = poisson_offsets(10.0, 30.0, seed=9, workload="llm", stage=0)
    parts = [list(range(w, len(times), 3)) for w in range(3)]
    assert sorted(i for part in parts for i in part) == list(range(len(times)))
