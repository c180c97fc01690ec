"""Answer: the figure an arm's verdict rests on, what limits it, and the first next step that holds."""

from __future__ import annotations

from bench_plugin.analysis.answer import NEXT_STEPS, arm_answer, decisive_stage
from bench_plugin.analysis.significance import ratio_figure
from bench_plugin.analysis.statistics import spread
from bench_plugin.results.limits import Limit, limits_text
from bench_plugin.results.summary import (
    Answer,
    ArmComparison,
    Boundary,
    ClassComparison,
    Conditions,
    StageComparison,
    TrialSummary,
    Verdict,
)
from bench_plugin.results.words import BoundaryStatus, Call

CONDITIONS = Conditions(backend="local", devices=[], driver=None, sharing="mps", control_sharing=None, load_range={},
                        arrival={}, repeats=3)
HIGH = {"llm": 8.0, "embedding": 40.0}
LOW = {"llm": 2.0, "embedding": 10.0}


def stage(index: int, call: str | None, ratios: list[float], breaches: tuple[str, ...] = (),
          generator_limited: bool = False, limits: tuple[Limit, ...] = ()) -> StageComparison:
    kept = not breaches
    llm = ClassComparison(slo_attainment=spread([1.0]), goodput_rps=spread([1.0]), meets_slo=kept,
                          within_error_budget=True, breaches=list(breaches), limits=list(limits) or None)
    return StageComparison(index=index, offered={"llm": 2.0 * (index + 1)}, repeats=len(ratios), classes={"llm": llm},
                           goodput_per_device=spread([10.0 * r for r in ratios]),
                           control_goodput_per_device=spread([10.0] * len(ratios)),
                           goodput_per_device_ratio=ratio_figure(ratios), verdict=call,
                           generator_limited=["shared repeat 1: send lag"] if generator_limited else [])


def arm(stages: list[StageComparison], call: str, status: str = BoundaryStatus.REACHED,
        is_control: bool = False) -> ArmComparison:
    boundary = Boundary(status=status, text="", stage_position=spread([1.0]), offered=HIGH,
                        limiting="llm p95" if status != BoundaryStatus.NOT_REACHED else None)
    verdict = None if is_control else Verdict(call=call, text="", worth_it_up_to_stage=None, conditions=CONDITIONS)
    return ArmComparison(sharing="mps", is_control=is_control, devices_charged=spread([1.0]), boundary=boundary,
                         stages=stages, verdict=verdict)


def trial(status: str = "completed") -> TrialSummary:
    return TrialSummary(id=1, arm="shared", repeat=1, status=status, reason=None, placement={}, stages=[])


CONTROL = arm([], "control", is_control=True)


def answer(comparison: ArmComparison, trials: list[TrialSummary] | None = None) -> Answer:
    return arm_answer(comparison, CONTROL, trials or [trial()], HIGH, LOW)


def test_worth_it_rests_on_the_highest_stage_of_its_run_from_the_lowest() -> None:
    shared = arm([stage(0, Call.WORTH_IT, [2.0, 2.1, 1.9]), stage(1, Call.WORTH_IT, [1.5, 1.6, 1.4]),
                  stage(2, Call.TRADE_OFF, [1.2, 1.3, 1.1], ("llm p95 1.2x its SLO (1200 ms vs 1000 ms)",))],
                 Call.WORTH_IT)
    assert decisive_stage(shared) is shared.stages[1]
    got = answer(shared)
    assert got.call == Call.WORTH_IT and got.at == "stage 1" and got.ratio is not None
    assert got.ratio.mean is not None and abs(got.ratio.mean - 1.5) < 0.01
    assert got.control_per_device is not None and got.control_per_device.mean == 10.0
    assert got.next_step == NEXT_STEPS["none"]


def test_a_trade_off_names_what_broke_there_in_short() -> None:
    broke = (Limit(workload="llm", figure="p95", times=9176 / 3000), Limit(workload="llm", figure="tpot p95",
                                                                          times=72 / 25))
    breaches = ("llm p95 3.06x its SLO (9176 ms vs 3000 ms) (mean)", "llm tpot p95 2.88x its SLO (72 ms vs 25 ms)")
    shared = arm([stage(0, Call.TRADE_OFF, [2.0, 2.0, 2.0], breaches, limits=broke)], Call.TRADE_OFF)
    got = answer(shared)
    assert got.at == "stage 0" and got.limiting == list(broke)
    assert limits_text(got.limiting) == "llm p95 3.06x its SLO, llm tpot p95 2.88x its SLO"
    # a class past its SLO with no breach recorded is named as a class
    bare = answer(arm([stage(0, Call.TRADE_OFF, [2.0, 2.0, 2.0], ("llm over",))], Call.TRADE_OFF))
    assert bare.limiting == [Limit(workload="llm")]


def test_next_steps_in_their_order() -> None:
    ok = [stage(0, Call.LOSS, [0.5, 0.6, 0.55])]
    # 1. an unfinished trial comes first, even with a generator-limited stage
    limited = arm([stage(0, Call.GENERATOR_LIMITED, [1.0, 1.1, 0.9], generator_limited=True)], Call.LOSS)
    assert answer(limited, [trial("interrupted")]).next_step == NEXT_STEPS["unfinished"]
    # 2. a load generator that fell behind
    assert answer(limited).next_step == NEXT_STEPS["generator"]
    # 3. one paired repeat
    one = arm([stage(0, "inconclusive (1 repeat)", [1.5])], "inconclusive (1 repeat)")
    assert answer(one).next_step == NEXT_STEPS["repeats"].format(n=1)
    # 4. a boundary outside the loads measured
    above = answer(arm(ok, Call.LOSS, status=BoundaryStatus.NOT_REACHED)).next_step
    assert above == NEXT_STEPS["above"].format(load="llm 8 req/s, embedding 40 req/s")
    below = answer(arm(ok, Call.LOSS, status=BoundaryStatus.BELOW_LOWEST)).next_step
    assert below == NEXT_STEPS["below"].format(load="llm 2 req/s, embedding 10 req/s")
    # 5. no significant difference from the control
    unsure = arm([stage(0, Call.LOSS, [0.8, 1.3, 1.0])], Call.LOSS)
    assert answer(unsure).next_step == NEXT_STEPS["spread"].format(n=3)
    # 6. none
    assert answer(arm(ok, Call.LOSS)).next_step == NEXT_STEPS["none"]


def test_the_control_of_a_sweep_has_no_figure_of_its_own() -> None:
    got = arm_answer(CONTROL, CONTROL, [trial()], HIGH, LOW)
    assert got.call == "control" and got.per_device is None and got.at is None
