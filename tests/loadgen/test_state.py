"""A process's LoadState: a request is in flight from the moment its loop hands it over, not when it runs."""

from __future__ import annotations

import gevent

from bench_plugin.loadgen.ledger import StageKey
from bench_plugin.loadgen.shares import Share
from bench_plugin.loadgen.state import ClassLoad, LoadState, StageAssignment
from bench_plugin.results.samples import Sample


class Seen:
    """A reporter that notes, when each loop ends, how many requests were then in flight."""

    def __init__(self, state: LoadState) -> None:
        self.state = state
        self.at_finish: list[tuple[int, int]] = []
        self.samples: list[Sample] = []

    def sample(self, sample: Sample) -> None:
        self.samples.append(sample)

    def finished(self, key: StageKey, workload: str, sent: int, note: str | None) -> None:
        self.at_finish.append((sent, self.state.total_in_flight()))


class LastMomentSender:
    """Hands its one request over and returns at once, as an open loop does after its last arrival."""

    workload = "llm"

    def __init__(self, state: LoadState) -> None:
        self.state = state

    def run_share(self, assignment: StageAssignment, share: Share) -> None:
        token = self.state.begin(self.workload, assignment.key, 0.0)
        self.state.spawn(self.state.end, token)


def test_the_last_request_is_in_flight_when_its_loop_reports_the_end() -> None:
    state = LoadState({}, {})
    seen = Seen(state)
    state.reporter = seen
    state.makers["llm"] = lambda: LastMomentSender(state)
    load = ClassLoad(url="http://127.0.0.1:9", model="m", arrival="poisson", load=1.0, timeout_s=1.0,
                     max_in_flight=1)
    state.assign(StageAssignment(1, 0, 0, 0.0, 1.0, 0, {"llm": load}, {"llm": Share(0, 1)}))
    state.loops.join(timeout=5)
    assert seen.at_finish == [(1, 1)], "the stage looked drained with a request not yet begun"
    gevent.sleep(0)
    state.requests.join(timeout=5)
    assert state.total_in_flight() == 0


def test_a_class_without_a_user_class_is_reported_not_sent() -> None:
    state = LoadState({}, {})
    notes: list[str | None] = []
    state.reporter = type("R", (), {"sample": lambda self, s: None,
                                    "finished": lambda self, k, w, n, note: notes.append(note)})()
    load = ClassLoad(url="u", model="m", arrival="poisson", load=1.0, timeout_s=1.0, max_in_flight=1)
    state.assign(StageAssignment(1, 0, 0, 0.0, 1.0, 0, {"asr": load}, {"asr": Share(0, 1)}))
    assert notes == ["this process's locustfile has no asr user class"]
