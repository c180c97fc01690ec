"""A boundary searched once per class (an exclusive arm): the lowest class's status is the mix's."""

from __future__ import annotations

import pytest
from analysis_builders import stage, stats, trial

from bench_plugin.analysis.capacity import capacity_text, combined_status, limited_checks
from bench_plugin.analysis.selfcheck import CPU_ADVICE, cpu_advice, stalled_advice
from bench_plugin.analysis.significance import ratio_figure
from bench_plugin.analysis.statistics import spread
from bench_plugin.results.summary import (
    Capacity,
    GeneratorCheck,
    ProbeDecision,
    RepeatCapacity,
    SearchProbe,
    SearchResult,
)


def result(name: str, status: str, estimate: float | None) -> SearchResult:
    return SearchResult(segment=0, classes=[name], mix={name: 1.0}, status=status, lo=None, hi=None, estimate=estimate,
                        precision=None, runs=3, fixed_sweep_runs=10)


@pytest.mark.parametrize(("results", "status"), [
    # llm found at 15 while the others passed up to the maximum: the mix's boundary is llm's, found
    ([result("llm", "found", 15.0), result("embedding", "above the maximum", 32.0),
      result("asr", "above the maximum", 32.0)], "found"),
    ([result("llm", "above the maximum", 32.0), result("asr", "above the maximum", 32.0)], "above the maximum"),
    ([result("llm", "found", 32.0), result("asr", "above the maximum", 32.0)], "found"),  # a tie goes to found
    ([result("llm", "found", 3.0), result("asr", "below the minimum", 0.5)], "below the minimum"),
    ([result("llm", "found", 3.0), result("asr", "bisecting", 6.0)], "bisecting"),  # not finished: no boundary yet
    ([result("llm", "found", 3.0)], "found"),
    # the embedding's generator fell behind above 20: llm's boundary at 15 still sets the mix's
    ([result("llm", "found", 15.0), result("embedding", "generator-limited", 20.0)], "found"),
    ([result("llm", "found", 15.0), result("embedding", "generator-limited", 8.0)], "generator-limited"),
])
def test_the_lowest_class_decides(results: list[SearchResult], status: str) -> None:
    assert combined_status(results) == status


def capacity(per_device: list[float], limited: list[str | None]) -> Capacity:
    """An arm's capacity over repeats (``limited``: each repeat's generator stop, None where it kept up)."""
    repeats = [RepeatCapacity(repeat=i, status="generator-limited" if why else "found", scale=v, runs=6,
                              fixed_sweep_runs=20, capacity_per_device=v, limited=why)
               for i, (v, why) in enumerate(zip(per_device, limited, strict=True))]
    return Capacity(mix={"llm": 1.0}, scale=spread(per_device), offered={"llm": 1.0},
                    capacity_per_device=spread(per_device), capacity_per_device_ratio=None, per_repeat=repeats)


BEHIND = "the load generator fell behind at x16 (CPU-bound: load generator local used 1.03 cores (limit 0.9))"


def with_ratio(arm: Capacity, control: Capacity) -> Capacity:
    ratios = [a / c for a, c in zip((r.capacity_per_device for r in arm.per_repeat),
                                    (r.capacity_per_device for r in control.per_repeat), strict=True)
              if a is not None and c is not None]
    return arm.model_copy(update={"capacity_per_device_ratio": ratio_figure(ratios)})


@pytest.mark.parametrize(("mine", "mine_limited", "theirs", "theirs_limited", "call"), [
    # a lower bound on the arm's capacity that is already significantly higher: worth it all the more
    ([30.0, 31.0, 32.0], [BEHIND, None, None], [10.0, 10.2, 10.1], [None] * 3, "worth it"),
    # a lower bound on the control's that the arm is significantly below: a loss all the more
    ([5.0, 5.1, 5.2], [None] * 3, [10.0, 10.2, 10.1], [None, BEHIND, None], "loss"),
    # the arm's lower bound below the control's: its true capacity may be higher or lower
    ([5.0, 5.1, 5.2], [BEHIND, None, None], [10.0, 10.2, 10.1], [None] * 3, "generator-limited"),
    # the control's lower bound below the arm's: the same
    ([30.0, 31.0, 32.0], [None] * 3, [10.0, 10.2, 10.1], [BEHIND, None, None], "generator-limited"),
    ([30.0, 31.0, 32.0], [BEHIND] * 3, [10.0, 10.2, 10.1], [BEHIND] * 3, "generator-limited"),
])
def test_a_capacity_its_load_generator_bounded_is_judged_only_where_the_bound_decides(
        mine: list[float], mine_limited: list[str | None], theirs: list[float], theirs_limited: list[str | None],
        call: str) -> None:
    arm, control = capacity(mine, mine_limited), capacity(theirs, theirs_limited)
    said, text = capacity_text("mps", "exclusive", with_ratio(arm, control), control)
    assert said == call, text
    assert "is a lower bound (the load generator fell behind at x16 (CPU-bound" in text
    if call == "generator-limited":
        assert text.startswith("mps is not judged: capacity within SLOs ") and CPU_ADVICE in text


def test_a_capacity_its_load_generator_kept_up_with_is_judged_as_before() -> None:
    arm, control = capacity([30.0, 31.0, 32.0], [None] * 3), capacity([10.0, 10.2, 10.1], [None] * 3)
    said, text = capacity_text("mps", "exclusive", with_ratio(arm, control), control)
    assert said == "worth it" and "lower bound" not in text


def test_a_capacity_needs_every_class_of_the_mix_searched_to_an_end() -> None:
    """An exclusive control cut after its llm segment's search ended, before the others ran: its capacity is
    not llm's alone; and a search cut while bisecting has no scale yet (it keeps what it held)."""
    from bench_plugin.analysis.capacity import arm_capacity
    from bench_plugin.results.summary import TrialSummary

    mix = {"llm": 2.0, "embedding": 10.0, "asr": 2.0}

    def alone(segment: int, name: str, status: str, estimate: float | None) -> SearchResult:
        return SearchResult(segment=segment, classes=[name], mix={name: mix[name]}, status=status, lo=estimate,
                            hi=None, estimate=estimate, precision=None, runs=3, fixed_sweep_runs=10)

    def trial(repeat: int, search: list[SearchResult]) -> TrialSummary:
        return TrialSummary(id=repeat, arm="exclusive", repeat=repeat, status="interrupted", reason=None,
                            placement={}, stages=[], devices_charged=3, search=search)

    done = [alone(0, "llm", "found", 8.0), alone(1, "embedding", "found", 3.0), alone(2, "asr", "found", 5.0)]
    whole = arm_capacity([trial(1, done)], None, mix)
    assert whole is not None and whole.scale.mean == 3.0
    assert arm_capacity([trial(1, done[:1])], None, mix) is None  # embedding and asr never ran
    cut = arm_capacity([trial(1, [*done[:2], alone(2, "asr", "bisecting", 2.5)])], None, mix)
    assert cut is not None and cut.scale.mean is None and cut.per_repeat[0].status == "bisecting"
    both = arm_capacity([trial(1, done), trial(2, done[:2])], None, mix)  # a second repeat cut short
    assert both is not None and [r.repeat for r in both.per_repeat] == [1] and both.scale.mean == 3.0


def test_the_advice_for_a_bounded_capacity_follows_the_kind_the_self_check_found() -> None:
    """The words of a search's stop are not read back: the checks of the stages where the generator fell behind
    decide (analysis/selfcheck.advice). A stalled loop gets the stalled fix, where the words once always gave CPU's."""
    arm, control = capacity([5.0, 5.1, 5.2], [BEHIND, None, None]), capacity([10.0, 10.2, 10.1], [None] * 3)
    cause = "stall.hold_the_loop (stall.py:9)"
    stalled = GeneratorCheck(kind="stalled", cause=cause, processes=1, cores=0.1)
    arm.per_repeat[0].generator_checks = [stalled]
    said, text = capacity_text("mps", "exclusive", with_ratio(arm, control), control)
    assert said == "generator-limited" and stalled_advice([cause]) in text and "--processes" not in text
    arm.per_repeat[0].generator_checks = [GeneratorCheck(kind="cpu-bound", processes=2, cores=1.9)]
    said, text = capacity_text("mps", "exclusive", with_ratio(arm, control), control)
    assert cpu_advice(4) in text


def test_a_limited_search_finds_the_checks_of_the_stages_its_load_generator_fell_behind_in() -> None:
    stages = [stage(i, {"llm": stats()}) for i in range(4)]
    stages[2].generator_limited = "CPU-bound: ..."
    stages[2].generator_check = GeneratorCheck(kind="cpu-bound", processes=1, cores=0.97)
    stages[3].generator_limited = "stalled: ..."  # another segment's search: not this one's
    stages[3].generator_check = GeneratorCheck(kind="stalled", cause="x")
    t = trial("mps", 1, stages)

    def probe(segment: int, scale: float, indices: list[int], outcome: str) -> SearchProbe:
        return SearchProbe(segment=segment, ray="mix", phase="probe", scale=scale, passed=outcome == "pass",
                           stages=indices, decision=ProbeDecision(outcome=outcome, point=False, confidence=0.95,
                                                                  stages=indices))

    t.probes = [probe(0, 1.0, [0, 1], "pass"), probe(0, 2.0, [2], "generator-limited"),
                probe(1, 2.0, [3], "generator-limited")]
    result = SearchResult(segment=0, classes=["llm"], mix={"llm": 1.0}, status="generator-limited", lo=1.0,
                          hi=None, estimate=1.0, precision=None, runs=3, fixed_sweep_runs=10)
    assert limited_checks(t, result) == [stages[2].generator_check]
    t.probes = []  # a search whose probes were not recorded: an empty check, worded as CPU-bound
    assert limited_checks(t, result) == [GeneratorCheck()]
