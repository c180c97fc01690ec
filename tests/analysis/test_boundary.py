"""The operating boundary: a planted knee is recovered by interpolating the limit ratios between stages."""

from __future__ import annotations

import math

import pytest
from analysis_builders import objectives, stage, stats, trial

from bench_plugin.analysis.answer import NEXT_STEPS, next_step
from bench_plugin.analysis.boundary import DISRUPTED, arm_boundary, load_order, repeat_boundary, searched_limit
from bench_plugin.analysis.statistics import spread
from bench_plugin.results.limits import SKIPPED, Limit, limits_text
from bench_plugin.results.summary import ArmComparison, SearchProbe, StageDisruption, TrialSummary
from bench_plugin.results.words import BoundaryStatus

OBJ = objectives(p95=1000.0, budget=0.01)
LLM_P95 = Limit(workload="llm", figure="p95")


def ramp(repeat: int, p95s: list[float], **kw: float) -> TrialSummary:
    """Stages 0..n-1 at llm load 1..n req/s (embedding twice that), llm P95 as given, embedding well inside."""
    stages = [stage(i, {"llm": stats(10.0, p95), "embedding": stats(10.0, 100.0)},
                    offered={"llm": i + 1.0, "embedding": 2.0 * (i + 1)}) for i, p95 in enumerate(p95s)]
    return trial("a", repeat, stages)


def test_a_planted_knee_between_stages_2_and_3_is_found_at_its_fraction() -> None:
    # llm P95/SLO is 0.8 at stage 2 and 1.4 at stage 3: linear in between, it reaches 1 a third of the way
    b = repeat_boundary(ramp(1, [200, 300, 800, 1400, 2000]), [0, 1, 2, 3, 4], OBJ)
    assert b is not None and b.status == BoundaryStatus.REACHED
    assert b.stage_position == pytest.approx(2 + 1 / 3)
    assert b.offered == pytest.approx({"llm": 3 + 1 / 3, "embedding": 2 * (3 + 1 / 3)})
    assert b.limiting == [LLM_P95] and b.between == [2, 3]


def disrupted(t: TrialSummary, *indices: int) -> TrialSummary:
    """``t`` with a restart mid-way through each of stages ``indices``."""
    for s in t.stages:
        if s.index in indices:
            s.disruption = StageDisruption(kind="restart", at_s=3.0, started_s=100.0 + s.index)
    return t


def test_a_disrupted_stage_measured_the_disruption_and_is_left_out() -> None:
    # stage 1's P95 broke its SLO while the restart ran; the load alone broke it only between stages 2 and 3
    p95s = [200, 1500, 800, 1400]
    plain = repeat_boundary(ramp(1, p95s), [0, 1, 2, 3], OBJ)
    assert plain is not None and plain.between == [0, 1]  # the control: judged as load, stage 1 bounds it
    b = repeat_boundary(disrupted(ramp(1, p95s), 1), [0, 1, 2, 3], OBJ)
    assert b is not None and b.status == BoundaryStatus.REACHED and b.between == [2, 3] and b.note is None
    assert b.stage_position == pytest.approx(2 + 1 / 3)  # positions stay those of the stages in load order
    assert b.offered == pytest.approx({"llm": 3 + 1 / 3, "embedding": 2 * (3 + 1 / 3)})
    # a disrupted lowest stage: the lowest judged one is stage 1, at its own position
    low = repeat_boundary(disrupted(ramp(1, [100, 1200, 1300]), 0), [0, 1, 2], OBJ)
    assert low is not None and low.status == BoundaryStatus.BELOW_LOWEST and low.stage_position == 1.0
    # every stage left passing is below a disrupted top: not reached, no "measured up to" cut
    top = repeat_boundary(disrupted(ramp(1, [100, 200, 5000]), 2), [0, 1, 2], OBJ)
    assert top is not None and top.status == BoundaryStatus.NOT_REACHED and top.stage_position == 1.0
    assert top.note is None


def test_every_stage_disrupted_leaves_the_boundary_unmeasured_and_the_next_step_says_why() -> None:
    """A disruption campaign of steps alone (scenarios/h200-disruption.yaml): the errors of a restart are not an
    SLO broken by the load, so no boundary "below the lowest load" and no advice to measure lower."""
    trials = [disrupted(ramp(r, [1100, 1200]), 0, 1) for r in (1, 2, 3)]
    b = arm_boundary(trials, OBJ)
    assert b.status == BoundaryStatus.NOT_MEASURED and b.limiting == []
    assert b.text == f"Not measured: {DISRUPTED}."
    comparison = ArmComparison(sharing="mps", is_control=False, devices_charged=spread([1.0]), boundary=b, stages=[])
    step = next_step(comparison, trials, None, {"llm": 2.0}, {"llm": 1.0})
    assert step == NEXT_STEPS["disrupted"]
    # one undisrupted stage is enough to judge the load again
    mixed = arm_boundary([disrupted(ramp(r, [1100, 1200]), 1) for r in (1, 2, 3)], OBJ)
    assert mixed.status == BoundaryStatus.BELOW_LOWEST


def test_a_convex_knee_is_bracketed_and_estimated_on_the_safe_side() -> None:
    # P95 = 100 ms x load^2 crosses its 1000 ms SLO at load sqrt(10) = 3.162 (between stages 2 and 3)
    b = repeat_boundary(ramp(1, [100.0 * load**2 for load in (1, 2, 3, 4, 5)]), [0, 1, 2, 3, 4], OBJ)
    assert b is not None and 2 <= b.stage_position <= 3  # the stated precision: the bracketing stages
    true_load = math.sqrt(10)
    assert b.offered["llm"] == pytest.approx(3 + 0.1 / 0.7)
    assert b.offered["llm"] <= true_load and true_load - b.offered["llm"] < 0.05


def test_mean_and_interval_over_repeats() -> None:
    trials = [ramp(1, [100, 800, 1600]), ramp(2, [100, 900, 1300]), ramp(3, [100, 700, 1300])]
    b = arm_boundary(trials, OBJ)
    # fractions 0.2/0.8, 0.1/0.4, 0.3/0.6 past stage 1
    assert b.status == BoundaryStatus.REACHED
    assert b.stage_position.values == pytest.approx([1.25, 1.25, 1.5])
    assert b.stage_position.mean == pytest.approx(4 / 3)
    assert b.stage_position.ci95 is not None and b.limiting == [LLM_P95]
    assert b.offered["llm"] == pytest.approx(2 + 1 / 3)
    assert "limited by llm p95" in b.text


def test_every_stage_passing_means_not_reached_and_stage_0_failing_means_below() -> None:
    up = arm_boundary([ramp(1, [100, 200]), ramp(2, [100, 300])], OBJ)
    assert up.status == BoundaryStatus.NOT_REACHED and up.stage_position.mean == 1.0 and up.limiting == []
    assert "above the highest load measured" in up.text
    down = arm_boundary([ramp(1, [1100, 1200])], OBJ)
    assert down.status == BoundaryStatus.BELOW_LOWEST and down.limiting == [LLM_P95]
    assert "below the lowest load" in down.text


def test_the_error_budget_and_ttft_limit_too() -> None:
    t = trial("a", 1, [stage(0, {"embedding": stats(10.0, 100.0, requests=100, errors=0)}, {"embedding": 4.0}),
                       stage(1, {"embedding": stats(10.0, 100.0, requests=100, errors=2)}, {"embedding": 8.0})])
    b = repeat_boundary(t, [0, 1], OBJ)
    assert b and b.stage_position == pytest.approx(0.5)
    assert b.limiting == [Limit(workload="embedding", figure="error rate")]
    assert b.offered == pytest.approx({"embedding": 6.0})
    # TTFT ratio 0.2 -> 1.8 crosses at 0.5; P95 0.5 -> 1.1 only at 5/6: TTFT limits
    t = trial("a", 1, [stage(0, {"llm": stats(10.0, 500.0, ttft=100.0)}), stage(1, {"llm": stats(10.0, 1100.0,
                                                                                                  ttft=900.0)})])
    b = repeat_boundary(t, [0, 1], objectives(p95=1000.0, ttft=500.0))
    assert b and b.stage_position == pytest.approx(0.5) and b.limiting == [Limit(workload="llm", figure="ttft p95")]


def test_a_rolled_back_or_skipped_stage_fails_and_later_passes_do_not_count() -> None:
    rolled = trial("a", 1, [stage(0, {"llm": stats(10.0, 500.0)}), stage(1, {"llm": stats(1.0, 1500.0)},
                                                                            status="aborted"),
                            stage(2, {}, skipped=("llm",), status="skipped")])
    b = repeat_boundary(rolled, [0, 1, 2], OBJ)
    assert b and b.status == BoundaryStatus.REACHED and b.stage_position == pytest.approx(0.5) and b.between == [0, 1]
    skipped = trial("a", 1, [stage(0, {"llm": stats(10.0, 500.0), "asr": stats(1.0, 100.0)}),
                             stage(1, {"llm": stats(10.0, 600.0)}, skipped=("asr",), status="skipped")])
    b = repeat_boundary(skipped, [0, 1], OBJ)
    assert b and b.stage_position == 0.0 and limits_text(b.limiting) == "asr skipped after a rollback"
    assert b.limiting == [Limit(workload="asr", note=SKIPPED)]
    noisy = ramp(1, [100, 1200, 900])  # fails at stage 1, passes again at 2: the first failure decides
    b = repeat_boundary(noisy, [0, 1, 2], OBJ)
    assert b and b.between == [0, 1]


def test_an_interrupted_stage_is_not_judged() -> None:
    t = ramp(1, [100, 200, 5000])
    t.stages[2].status = "interrupted"
    b = repeat_boundary(t, [0, 1, 2], OBJ)
    assert b and b.status == BoundaryStatus.NOT_REACHED and b.note == "measured up to stage 1 only"
    text = arm_boundary([t], OBJ).text  # the highest stage judged is 1, not the interrupted 2, and it says so
    assert "up to stage 1 (" in text and "the stages above it did not run to their end" in text, text


def test_repeats_that_disagree_are_said_to() -> None:
    b = arm_boundary([ramp(1, [100, 200]), ramp(2, [100, 1400])], OBJ)
    assert b.status == BoundaryStatus.REACHED and "Repeats disagree" in b.text
    assert sorted(b.stage_position.values) == pytest.approx([0.9 / 1.3, 1.0])


def test_stages_are_ordered_by_offered_load() -> None:
    t = trial("a", 1, [stage(0, {"llm": stats()}, {"llm": 4.0}), stage(1, {"llm": stats()}, {"llm": 1.0}),
                       stage(2, {"llm": stats()}, {"llm": 2.0})])
    assert load_order([t]) == [1, 2, 0]


def test_what_broke_first_leaves_out_stages_set_aside_and_other_rays() -> None:
    """A mix probe's set-aside stage (its load generator behind: llm looked slow at the lowest load) and every stage of
    another ray (asr failing alone, at a lower total load) say nothing of what breaks the mix: embedding does, at the
    lowest failing mix load."""
    ok = {"llm": stats(10.0, 100.0), "embedding": stats(10.0, 100.0)}
    stages = [
        stage(0, {"llm": stats(10.0, 5000.0), "embedding": stats(10.0, 100.0)}, offered={"llm": 1.0, "embedding": 1.0}),
        stage(1, dict(ok), offered={"llm": 1.0, "embedding": 1.0}),
        stage(2, {"llm": stats(10.0, 100.0), "embedding": stats(10.0, 3000.0)}, offered={"llm": 2.0, "embedding": 2.0}),
        stage(3, {"asr": stats(10.0, 4000.0)}, offered={"asr": 0.5}),
        stage(4, {"asr": stats(10.0, 4000.0)}, offered={"asr": 0.5}),
    ]
    probes = [SearchProbe(segment=0, ray="mix", phase="probe", scale=1.0, passed=True, stages=[1], set_aside=[0]),
              SearchProbe(segment=0, ray="mix", phase="probe", scale=2.0, passed=False, stages=[2]),
              SearchProbe(segment=0, ray="asr", phase="probe", scale=1.0, passed=False, stages=[4], set_aside=[3])]
    one = trial("a", 1, stages).model_copy(update={"probes": probes})
    assert searched_limit([one], OBJ) == [Limit(workload="embedding", figure="p95")]
