"""Probe decisions: pass, fail or undecided by confidence bounds on the fraction of requests beyond each limit."""

from __future__ import annotations

import pytest
from analysis_builders import objectives

from bench_plugin.analysis.probe import (
    batch_bounds,
    decide,
    extension_futile,
    failed_stage,
    judge_lag,
    limited_why,
    limiting_check,
    set_aside,
    taken_as_passed,
    wilson_bounds,
)
from bench_plugin.results.samples import Sample
from bench_plugin.results.words import ProbeOutcome


def sample(i: int, latency_ms: float, *, workload: str = "embedding", ok: bool = True,
           ttft_ms: float | None = None) -> Sample:
    """Request ``i`` meant to go at i/10 s, taking ``latency_ms`` end to end."""
    start = i / 10
    return Sample(workload=workload, trial=1, segment=0, stage=0, seq=i, item=0, intended_s=start, sent_s=start,
                  end_s=start + latency_ms / 1000, ok=ok, error=None if ok else "timeout",
                  first_token_s=None if ttft_ms is None else start + ttft_ms / 1000, output_tokens=1)


def test_wilson_bounds_match_their_closed_form() -> None:
    # none beyond of 100 at 95% one-sided: the upper bound is z^2 / (n + z^2), z = 1.6449
    lower, upper = wilson_bounds(0, 100, 0.95)
    assert lower == 0.0 and upper == pytest.approx(1.6449**2 / (100 + 1.6449**2), rel=1e-4)
    lower, upper = wilson_bounds(50, 100, 0.95)
    assert (lower + upper) / 2 == pytest.approx(0.5) and upper - 0.5 == pytest.approx(0.08115, abs=1e-4)
    assert wilson_bounds(0, 0, 0.95) == (0.0, 1.0)


def test_a_probe_well_within_its_slo_passes_and_one_well_beyond_fails() -> None:
    within = [sample(i, 50.0) for i in range(200)]
    decision = decide(within, objectives(p95=100.0, names=("embedding",)), 0.95, [0])
    assert decision.outcome == ProbeOutcome.PASS and decision.point and decision.stages == [0]
    beyond = [sample(i, 150.0 if i % 3 == 0 else 50.0) for i in range(200)]
    decision = decide(beyond, objectives(p95=100.0, names=("embedding",)), 0.95, [0, 1])
    assert decision.outcome == ProbeOutcome.FAIL and not decision.point and not taken_as_passed(decision)
    worst = limiting_check(decision)
    assert worst is not None and (worst.workload, worst.criterion, worst.exceeded, worst.n) == ("embedding", "p95",
                                                                                                  67, 200)


def test_too_few_requests_leave_a_probe_undecided_and_its_point_estimate_stands_in() -> None:
    few = [sample(i, 50.0) for i in range(20)]  # none beyond, but 20 requests cannot show <= 5% at 95%
    decision = decide(few, objectives(p95=100.0, names=("embedding",)), 0.95, [0])
    assert decision.outcome == ProbeOutcome.UNDECIDED and decision.point and taken_as_passed(decision)
    near = [sample(i, 150.0 if i % 20 == 0 else 50.0) for i in range(400)]  # exactly 5% beyond
    decision = decide(near, objectives(p95=100.0, names=("embedding",)), 0.95, [0])
    assert decision.outcome == ProbeOutcome.UNDECIDED


def test_clustered_slow_requests_widen_the_bounds() -> None:
    """The same count beyond the SLO says less when the slow requests come in one spell (a queue) than spread."""
    spread_out = [i % 25 == 0 for i in range(500)]
    clustered = [i < 20 for i in range(500)]
    assert sum(spread_out) == sum(clustered) == 20
    even = batch_bounds(spread_out, 0.95)
    spell = batch_bounds(clustered, 0.95)
    assert even is not None and spell is not None and spell[1] > even[1]
    beyond = [sample(i, 150.0 if flag else 50.0) for i, flag in enumerate(clustered)]
    decision = decide(beyond, objectives(p95=100.0, names=("embedding",)), 0.95, [0])
    assert decision.outcome == ProbeOutcome.UNDECIDED, "4% beyond, but all in one spell: not shown to be within 5%"
    even_samples = [sample(i, 150.0 if flag else 50.0) for i, flag in enumerate(spread_out)]
    decision = decide(even_samples, objectives(p95=100.0, names=("embedding",)), 0.95, [0])
    assert decision.outcome == ProbeOutcome.UNDECIDED
    assert batch_bounds([True] * 19, 0.95) is None, "fewer than two requests per batch: Wilson's bounds alone"


def test_the_error_budget_guards_without_holding_a_probe_up() -> None:
    spec = objectives(p95=100.0, budget=0.01, names=("embedding",))
    clean = decide([sample(i, 50.0) for i in range(80)], spec, 0.95, [0])
    assert [c.outcome for c in clean.checks] == [ProbeOutcome.PASS] * 2, \
        "no error: the budget passes without 270 requests"
    one = decide([sample(i, 50.0, ok=i != 3) for i in range(80)], spec, 0.95, [0])
    assert one.checks[1].outcome == ProbeOutcome.UNDECIDED, "1 of 80 is beyond 1%, but not shown to be"
    many = decide([sample(i, 50.0, ok=i % 5 != 0) for i in range(80)], spec, 0.95, [0])
    assert many.checks[1].outcome == ProbeOutcome.FAIL and many.outcome == ProbeOutcome.FAIL
    nothing = decide([sample(i, 50.0, ok=False) for i in range(80)], spec, 0.95, [0])
    assert nothing.checks[0].outcome == ProbeOutcome.FAIL and nothing.checks[0].n == 0


def test_an_llm_answer_without_a_first_token_counts_beyond_its_ttft() -> None:
    spec = objectives(p95=1000.0, ttft=100.0, names=("llm",))
    answers = [sample(i, 200.0, workload="llm", ttft_ms=None if i % 4 == 0 else 50.0) for i in range(200)]
    decision = decide(answers, spec, 0.95, [0])
    ttft = next(c for c in decision.checks if c.criterion == "ttft p95")
    assert ttft.exceeded == 50 and ttft.outcome == ProbeOutcome.FAIL and decision.outcome == ProbeOutcome.FAIL


def test_a_stage_that_did_not_complete_fails_its_probe() -> None:
    decision = failed_stage(0.95, [3], "its stage was aborted")
    assert decision.outcome == ProbeOutcome.FAIL and not taken_as_passed(decision)
    assert decision.note == "its stage was aborted"
    assert limiting_check(decision) is None


BEHIND = "CPU-bound: load generator local used 1.03 cores (limit 0.9)"


@pytest.mark.parametrize(("latency_ms", "behind", "outcome"), [
    (50.0, BEHIND, ProbeOutcome.PASS),  # within the SLO even with the client's own delays in it: the servers kept it
    (200.0, BEHIND, ProbeOutcome.GENERATOR_LIMITED),  # beyond it, but the client's delays may have made that
    (200.0, None, ProbeOutcome.FAIL),  # the generator kept up: judged as measured
    (50.0, None, ProbeOutcome.PASS),
])
def test_only_a_pass_is_judged_where_the_load_generator_fell_behind(latency_ms: float, behind: str | None,
                                                                     outcome: str) -> None:
    spec = objectives(p95=100.0, names=("llm",))
    pooled = [sample(i, latency_ms, workload="llm") for i in range(300)]
    decision = judge_lag(decide(pooled, spec, 0.95, [4]), behind)
    assert decision.outcome == outcome and decision.lag_judged
    assert limited_why(decision) == (BEHIND if outcome == ProbeOutcome.GENERATOR_LIMITED else None)
    assert taken_as_passed(decision) == (outcome == ProbeOutcome.PASS)
    if outcome == ProbeOutcome.GENERATOR_LIMITED:
        assert decision.checks == decide(pooled, spec, 0.95, [4]).checks, "its counts stay on record"


def test_an_undecided_probe_of_a_generator_that_fell_behind_stands_only_within_its_allowance() -> None:
    spec = objectives(p95=100.0, names=("llm",))
    few = [sample(i, 50.0, workload="llm") for i in range(20)]  # none beyond: taken as passed, even so delayed
    kept = judge_lag(decide(few, spec, 0.95, [0]), BEHIND)
    assert kept.outcome == ProbeOutcome.UNDECIDED and taken_as_passed(kept) and limited_why(kept) is None
    near = [sample(i, 150.0 if i % 10 == 0 else 50.0, workload="llm") for i in range(40)]  # 10% beyond, undecided
    decision = judge_lag(decide(near, spec, 0.95, [0]), BEHIND)
    assert decision.outcome == ProbeOutcome.GENERATOR_LIMITED and decision.note == BEHIND
    assert not taken_as_passed(decision)
    rolled_back = judge_lag(failed_stage(0.95, [0], "its stage was aborted"), BEHIND)
    assert rolled_back.outcome == ProbeOutcome.GENERATOR_LIMITED, \
        "the rollback stopped it for latency the client may have made"
    assert judge_lag(failed_stage(0.95, [0], "its stage was aborted"), None).outcome == ProbeOutcome.FAIL


def test_a_stage_the_generator_fell_behind_in_is_set_aside_twice_at_most_unless_the_probe_passes() -> None:
    spec = objectives(p95=100.0, names=("llm",))
    slow = decide([sample(i, 200.0, workload="llm") for i in range(300)], spec, 0.95, [4])
    fast = decide([sample(i, 50.0, workload="llm") for i in range(300)], spec, 0.95, [4])
    assert set_aside(slow, BEHIND, 0), "a failure the client may have made is run again"
    assert set_aside(failed_stage(0.95, [4], "its stage was aborted"), BEHIND, 0)
    assert set_aside(slow, BEHIND, 1), "a busy host can lapse twice in a row"
    assert not set_aside(slow, BEHIND, 2), "twice per probe: then it goes unjudged"
    assert judge_lag(slow, BEHIND).outcome == ProbeOutcome.GENERATOR_LIMITED
    assert not set_aside(fast, BEHIND, 0), "a pass stands, late generator or not"
    assert not set_aside(slow, None, 0), "the generator kept up: the failure is judged"


SLO_100 = objectives(p95=100.0, names=("embedding",))


def spread(n: int, beyond: int) -> list[Sample]:
    """``n`` requests of which ``beyond`` (spread evenly) took 500 ms against the 100-ms SLO of ``SLO_100``."""
    every = n // beyond if beyond else n + 1
    return [sample(i, 500.0 if beyond and i % every == 0 and i // every < beyond else 20.0) for i in range(n)]


@pytest.mark.parametrize(("n", "beyond", "more", "futile"), [
    (100, 5, 2, True),  # at the allowance itself: three times the requests still straddle it
    (100, 3, 2, True),  # just within it: so do these
    (100, 3, 5, False),  # five more runs would show it within
    (100, 8, 2, False),  # beyond it: the extensions are expected to show the failure
    (30, 0, 2, False),  # too few requests, none beyond: the extensions are expected to show the pass
    (100, 5, 0, False),  # nothing left to run
])
def test_an_extension_is_skipped_only_where_it_is_not_expected_to_decide(n: int, beyond: int, more: int,
                                                                        futile: bool) -> None:
    decision = decide(spread(n, beyond), SLO_100, 0.95, [0])
    assert decision.outcome == ProbeOutcome.UNDECIDED, decision
    assert extension_futile(decision, 1, more) is futile


def test_a_decided_probe_or_one_without_requests_is_never_futile() -> None:
    assert extension_futile(decide(spread(100, 0), SLO_100, 0.95, [0]), 1, 2) is False  # a pass
    assert extension_futile(decide(spread(100, 20), SLO_100, 0.95, [0]), 1, 2) is False  # a fail
    empty = decide([], SLO_100, 0.95, [0])
    assert empty.outcome == ProbeOutcome.UNDECIDED and extension_futile(empty, 1, 2) is False


def test_a_futile_extension_is_judged_on_the_runs_already_pooled() -> None:
    """Two runs pooled with one left shrink less than one run with two left: the same counts can be futile there."""
    decision = decide(spread(200, 13), SLO_100, 0.95, [0, 1])
    assert decision.outcome == ProbeOutcome.UNDECIDED
    assert extension_futile(decision, 2, 1) is True and extension_futile(decision, 1, 20) is False
