"""pytest plugin for benchmarks/suite_cpu.py: each test's CPU, its own and its reaped processes', as JSON lines.

Loaded with ``-p suite_cpu_plugin`` (benchmarks/ on PYTHONPATH); writes to $SUITE_CPU_OUT. A process is
counted when it is reaped, so a session fixture's servers count at the test whose teardown stops them.
"""

from __future__ import annotations

import json
import os
import resource
import time
from collections.abc import Iterator

import pytest


def _now() -> tuple[float, float, float]:
    own, reaped = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, reaped.ru_utime + reaped.ru_stime, time.monotonic()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    before = _now()
    yield
    after = _now()
    row = {"id": item.nodeid, "self_s": after[0] - before[0], "children_s": after[1] - before[1],
           "wall_s": after[2] - before[2]}
    with open(os.environ["SUITE_CPU_OUT"], "a", encoding="utf-8") as out:
        out.write(json.dumps(row) + "\n")
