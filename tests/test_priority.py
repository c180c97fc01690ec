"""The suite's own set-up (conftest.py, priority.py): a ``cpu_bound`` test yields the CPU while it runs, only then."""

from __future__ import annotations

import os

import pytest
from priority import LOWEST_PRIORITY, may_raise_priority

BEFORE = os.getpriority(os.PRIO_PROCESS, 0)


@pytest.mark.cpu_bound
def test_a_cpu_bound_test_runs_at_the_lowest_priority() -> None:
    expected = LOWEST_PRIORITY if may_raise_priority(BEFORE) and BEFORE < LOWEST_PRIORITY else BEFORE
    assert os.getpriority(os.PRIO_PROCESS, 0) == expected


def test_the_next_test_runs_at_the_priority_before_it() -> None:
    assert os.getpriority(os.PRIO_PROCESS, 0) == BEFORE

