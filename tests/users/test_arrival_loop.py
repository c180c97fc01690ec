"""The open loop's wakes: each arrival taken PREPARE_AHEAD_S ahead, chains of close arrivals on one wake.

A fake clock stands in for time (the loop's own logic, not its timing, is under test): the state's
sleep_until moves the clock to the wake and records it, spawn records what was taken when.
"""

from __future__ import annotations

import itertools
from types import SimpleNamespace
from typing import Any

import pytest

from bench_plugin.loadgen.arrivals import arrival_offsets
from bench_plugin.loadgen.shares import Share
from bench_plugin.loadgen.state import ClassLoad, StageAssignment
from bench_plugin.users import base
from bench_plugin.users.base import PREPARE_AHEAD_S, TAKE_AHEAD_MAX_S, WorkloadUser

START_S = 1_000.0


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def time(self) -> float:
        return self.now


class State:
    """What _open_loop asks of a LoadState, on the fake clock."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.wakes: list[float] = []
        self.taken: list[tuple[float, float]] = []  # (clock when taken, intended send time)

    def sleep_until(self, when_s: float, key: Any) -> bool:
        self.clock.now = max(self.clock.now, when_s)
        self.wakes.append(self.clock.now)
        return True

    def is_active(self, key: Any) -> bool:
        return True

    def begin(self, workload: str, key: Any, intended_s: float) -> int:
        return len(self.taken)

    def spawn(self, run: Any, *args: Any) -> None:
        self.taken.append((self.clock.now, args[6]))  # _one(a, load, slots, built, seq, item, intended, token)


@pytest.mark.parametrize("rate", [20.0, 150.0, 600.0, 3000.0])
def test_every_arrival_is_taken_ahead_and_close_arrivals_share_a_wake(
        monkeypatch: pytest.MonkeyPatch, rate: float) -> None:
    clock = Clock()
    monkeypatch.setattr(base, "time", clock)
    state = State(clock)
    load = ClassLoad(url="http://127.0.0.1:9", model="m", arrival="poisson", load=rate, timeout_s=1.0,
                     max_in_flight=10)
    a = StageAssignment(1, 0, 0, START_S, START_S + 4.0, 7, {"asr": load}, {"asr": Share(0, 1)})
    user = SimpleNamespace(state=state, workload="asr", _requests=lambda: [object()] * 4, _one=None)
    WorkloadUser._open_loop(user, a, load, Share(0, 1), None)  # type: ignore[arg-type]

    intended = [START_S + float(t) for t in arrival_offsets("poisson", rate, 4.0, 7, "asr", 0)]
    assert [t for _, t in state.taken] == intended, "every arrival is taken once, in order"
    # each is taken at least PREPARE_AHEAD_S before its time (the first of a wake exactly that)
    assert all(t - at >= PREPARE_AHEAD_S - 1e-9 for at, t in state.taken)
    # within one wake, each follows the one before by at most PREPARE_AHEAD_S, and none lies past the horizon:
    # the process is never idle longer than PREPARE_AHEAD_S before a send
    wakes = 0
    for i, (at, t) in enumerate(state.taken):
        if i == 0 or at != state.taken[i - 1][0]:
            wakes += 1
            continue
        assert t - state.taken[i - 1][1] <= PREPARE_AHEAD_S + 1e-9
        assert t <= at + TAKE_AHEAD_MAX_S + 1e-9
    assert wakes == len(state.wakes)
    # a new wake only where the chain broke: the gap was longer, or the horizon was reached
    expected = 1
    first = intended[0] - PREPARE_AHEAD_S
    for before, t in itertools.pairwise(intended):
        if t - before > PREPARE_AHEAD_S or t > first + TAKE_AHEAD_MAX_S:
            expected += 1
            first = t - PREPARE_AHEAD_S
    assert wakes == expected
    if rate >= 150:
        assert wakes < 0.8 * len(intended), "close arrivals should share the loop's wakes"
