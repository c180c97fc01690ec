"""Arrival processes: seeded, identical across calls, Poisson in distribution, split exactly over workers."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from bench_plugin.loadgen.arrivals import (
    arrival_count,
    arrival_offsets,
    conditioned_poisson_offsets,
    item_order,
    poisson_offsets,
)


@pytest.mark.parametrize(("rate", "duration", "count"), [
    (3.0, 12.0, 36), (0.5, 3.0, 2), (2.5, 1.0, 3), (1.0, 0.4, 0), (0.1, 5.0, 1), (7.0, 0.5, 4), (0.0, 9.0, 0),
])
def test_a_stage_sends_round_rate_times_duration_halves_up(rate: float, duration: float, count: int) -> None:
    assert arrival_count(rate, duration) == count
    times = arrival_offsets("poisson", rate, duration, seed=4, workload="llm", stage=1)
    assert len(times) == count
    assert np.all(np.diff(times) >= 0) and (count == 0 or (times[0] >= 0 and times[-1] < duration))


def test_the_count_survives_epoch_arithmetic() -> None:
    start = 1_764_590_000.123
    duration = round((start + 12.5) - start, 6)  # what a StageAssignment gives back
    assert arrival_count(2.0, duration) == 25


def test_conditioned_times_are_uniform_and_seeded() -> None:
    times = conditioned_poisson_offsets(40.0, 100.0, seed=2, workload="asr", stage=3)
    assert np.array_equal(times, arrival_offsets("poisson", 40.0, 100.0, seed=2, workload="asr", stage=3))
    assert not np.array_equal(times, conditioned_poisson_offsets(40.0, 100.0, seed=2, workload="asr", stage=4))
    assert stats.kstest(times / 100.0, "uniform").pvalue > 0.01
    gaps = np.diff(times)  # given the count, gaps are nearly exponential: coefficient of variation ~1
    assert abs(np.std(gaps) / gaps.mean() - 1.0) < 0.05


def test_plain_poisson_stays_available_and_other_names_are_refused() -> None:
    assert np.array_equal(arrival_offsets("plain-poisson", 5.0, 60.0, seed=1, workload="llm", stage=0),
                          poisson_offsets(5.0, 60.0, seed=1, workload="llm", stage=0))
    with pytest.raises(ValueError, match="not an open-loop process"):
        arrival_offsets("closed", 5.0, 60.0, seed=1, workload="llm", stage=0)


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
