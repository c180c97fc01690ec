"""Ledger: a stage's accounting lists every way its load fell short of the stated one, and nothing else."""

from __future__ import annotations

from bench_plugin.loadgen.ledger import StageLedger
from bench_plugin.loadgen.shares import Share
from bench_plugin.results.samples import Sample
from bench_plugin.results.timeline import ShareAccount

KEY = (1, 0, 0)


def sample(worker: str, seq: int, workload: str = "llm") -> Sample:
    return Sample(workload=workload, trial=1, segment=0, stage=0, seq=seq, item=0, intended_s=0.0, sent_s=0.0,
                  end_s=0.1, ok=True, worker=worker)


def two_workers(n: int = 10) -> StageLedger:
    return StageLedger(KEY, {"a": {"llm": Share(0, 2)}, "b": {"llm": Share(1, 2)}}, {"llm": n})


def deliver(ledger: StageLedger, worker: str, seqs: range | list[int]) -> None:
    for k in seqs:
        ledger.take(sample(worker, k))


def test_a_whole_stage_has_no_problems() -> None:
    ledger = two_workers()
    deliver(ledger, "a", range(0, 10, 2))
    deliver(ledger, "b", range(1, 10, 2))
    ledger.finish("a", "llm", 5)
    ledger.finish("b", "llm", 5)
    assert ledger.verify(stopped=False, in_flight={}, lost={}) == []
    assert ledger.describe()["llm"]["a"] == ShareAccount(share=(0, 2), expected=5, sent=5, received=5)


def test_a_lost_worker_with_its_share_incomplete() -> None:
    ledger = two_workers()
    deliver(ledger, "a", range(0, 10, 2))
    ledger.finish("a", "llm", 5)
    deliver(ledger, "b", [1, 3])
    problems = ledger.verify(stopped=False, in_flight={}, lost={"b": "no heartbeat for 3 s"})
    assert problems == [
        "worker b was lost mid-stage (no heartbeat for 3 s): its share of llm (5 arrivals) is incomplete"]


def test_a_lost_worker_is_one_line_for_all_its_shares() -> None:
    """A worker lost with several classes' shares incomplete is said once, naming each share."""
    ledger = StageLedger(KEY, {w: {"llm": Share(i, 2), "asr": Share(i, 2)} for i, w in enumerate("ab")},
                         {"llm": 10, "asr": 6})
    problems = ledger.verify(stopped=False, in_flight={}, lost={"b": "it quit or disconnected"})
    assert problems[0] == ("worker b was lost mid-stage (it quit or disconnected): its shares of asr (3 arrivals), "
                           "llm (5 arrivals) are incomplete")
    assert not any("worker b" in line for line in problems[1:]), problems


def test_a_worker_lost_after_its_share_was_complete_is_no_problem() -> None:
    ledger = two_workers()
    for worker, start in (("a", 0), ("b", 1)):
        deliver(ledger, worker, range(start, 10, 2))
        ledger.finish(worker, "llm", 5)
    assert ledger.verify(stopped=False, in_flight={}, lost={"b": "it quit or disconnected"}) == []


def test_short_sends_missing_samples_repeats_and_strays() -> None:
    ledger = two_workers()
    deliver(ledger, "a", [0, 2, 2, 4, 6])  # 2 twice, 8 never sent
    ledger.finish("a", "llm", 5)
    deliver(ledger, "b", [1, 3, 5, 7, 8])  # 8 is a's
    ledger.finish("b", "llm", 6)
    problems = ledger.verify(stopped=False, in_flight={}, lost={})
    assert "llm: worker a sent 1 arrivals more than once" in problems
    assert "worker b sent 6 of its 5 llm arrivals" in problems
    assert "llm: worker b sent 6 requests but 5 samples arrived" in problems
    assert "llm: worker b sent 1 arrivals outside its share" in problems


def test_a_stopped_stage_may_send_less_but_every_sample_must_arrive() -> None:
    ledger = two_workers()
    deliver(ledger, "a", [0, 2])
    ledger.finish("a", "llm", 3)
    deliver(ledger, "b", [1])
    ledger.finish("b", "llm", 1)
    problems = ledger.verify(stopped=True, in_flight={("a", "llm"): 1}, lost={})
    assert problems == []
    assert ledger.verify(stopped=True, in_flight={}, lost={}) == [
        "llm: worker a sent 3 requests but 2 samples arrived"]


def test_an_unreported_end_and_a_note() -> None:
    ledger = two_workers()
    ledger.finish("a", "llm", 0, "this process's locustfile has no llm user class")
    assert ledger.unfinished() == [("b", "llm")]
    problems = ledger.verify(stopped=False, in_flight={}, lost={})
    assert problems == ["worker a could not send its llm arrivals: this process's locustfile has no llm user class",
                        "worker b never reported the end of its llm arrivals"]


def test_closed_loop_counts_requests_not_arrivals() -> None:
    ledger = StageLedger(KEY, {"a": {"llm": Share(0, 1)}}, {"llm": None})
    deliver(ledger, "a", [0, 1, 2, 2])  # closed-loop seqs are a running count, not checked for repeats
    ledger.finish("a", "llm", 4)
    assert ledger.verify(stopped=False, in_flight={}, lost={}) == []
