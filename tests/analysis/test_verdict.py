"""The verdict (the seed's rule): worth it, trade-off, loss or inconclusive, per stage and in one sentence."""

from __future__ import annotations

from analysis_builders import objectives, stage, stats, trial
from stored_scenario import resolved

from bench_plugin.analysis.capacity import capacity_text
from bench_plugin.analysis.comparison import build_comparison
from bench_plugin.analysis.contention import stage_contention
from bench_plugin.analysis.significance import ratio_figure
from bench_plugin.analysis.statistics import spread
from bench_plugin.analysis.verdict import StageVerdict, inconclusive, is_inconclusive, stage_verdict
from bench_plugin.results.record import StoredScenario
from bench_plugin.results.summary import Capacity, PlacedClass, Provenance, RepeatCapacity, TrialSummary
from bench_plugin.results.words import Call

OBJ = objectives(p95=1000.0, budget=0.05)
NOISE = (0.0, 0.1, -0.1)


def arm(name: str, thr: float, p95: float, devices: int, repeats: int = 3, p95_llm: float | None = None,
        stages: int = 1) -> list[TrialSummary]:
    """Trials whose stage i offers llm (i+1) and embedding 2(i+1) req/s; llm P95 rises 10x per stage if asked."""
    out = []
    for r in range(1, repeats + 1):
        jitter = NOISE[(r - 1) % 3]
        st = [stage(i, {"llm": stats(thr + jitter, (p95_llm or p95) * (10 if p95_llm and i == stages - 1 else 1)),
                        "embedding": stats(thr - jitter, p95)},
                    offered={"llm": i + 1.0, "embedding": 2.0 * (i + 1)}) for i in range(stages)]
        out.append(trial(name, r, st, devices))
    return out


def verdict_of(mine: list[TrialSummary], control: list[TrialSummary]) -> StageVerdict:
    return stage_verdict(stage_contention(0, mine, control, OBJ))


def test_worth_it_when_goodput_per_device_rises_and_every_class_keeps_its_slo() -> None:
    v = verdict_of(arm("shared", 9.0, 400.0, 1), arm("exclusive", 10.0, 300.0, 2))
    assert v.call == Call.WORTH_IT and v.pairs == 3
    assert str(v.reasons[0]) == ("goodput per device 18 vs 10 req/s within SLO, 1.80x the control's (geometric mean of "
                            "3 repeats, 95% CI [1.80, 1.80]: higher)")


def test_trade_off_when_it_rises_but_a_class_breaks_its_slo() -> None:
    v = verdict_of(arm("shared", 9.0, 400.0, 1, p95_llm=210.0), arm("exclusive", 10.0, 300.0, 2))
    assert v.call == Call.TRADE_OFF
    assert any(r.startswith("llm p95 2.10x its SLO (2100 ms vs 1000 ms)") for r in map(str, v.reasons))


def test_trade_off_when_errors_exceed_the_budget() -> None:
    shared = arm("shared", 9.0, 400.0, 1)
    for t in shared:
        t.stages[0].classes["embedding"] = stats(9.0, 400.0, errors=10)
    v = verdict_of(shared, arm("exclusive", 10.0, 300.0, 2))
    assert v.call == Call.TRADE_OFF
    assert any("embedding error rate 10.0% vs its budget 5.0%" in r for r in map(str, v.reasons))


def test_loss_when_goodput_per_device_shows_no_significant_difference() -> None:
    v = verdict_of(arm("mps", 10.0, 300.0, 2), arm("exclusive", 10.0, 300.0, 2))
    assert v.call == Call.LOSS and "no significant difference" in str(v.reasons[0])


def test_loss_when_goodput_per_device_falls() -> None:
    v = verdict_of(arm("mps", 6.0, 300.0, 2), arm("exclusive", 10.0, 300.0, 2))
    assert v.call == Call.LOSS and str(v.reasons[0]).endswith(": lower)")


def test_one_repeat_is_inconclusive_never_a_loss() -> None:
    v = verdict_of(arm("shared", 9.0, 400.0, 1, repeats=1), arm("exclusive", 10.0, 300.0, 2, repeats=1))
    assert v.call == "inconclusive (1 repeat)" == inconclusive(1) and v.pairs == 1 and is_inconclusive(v.call)
    assert "1.80x the control's (one repeat: no spread" in str(v.reasons[0])
    assert str(v.reasons[1]) == "every class kept its SLOs and error budget in every repeat"
    assert str(v.reasons[2]).startswith("1 paired repeat has no spread")
    assert "run at least 2 repeats" in str(v.reasons[2])
    # Falling goodput per device with one repeat is no more a loss than a rise is a win.
    assert verdict_of(arm("mps", 6.0, 300.0, 2, repeats=1), arm("exclusive", 10.0, 300.0, 2, repeats=1)).call == \
        inconclusive(1)


def test_one_pair_is_inconclusive_even_when_each_arm_has_more_repeats() -> None:
    control = arm("exclusive", 10.0, 300.0, 2)
    for t in control[1:]:
        t.stages[0].status = "interrupted"  # only repeat 1 of the control measured the stage
    v = verdict_of(arm("shared", 9.0, 400.0, 1), control)
    assert v.call == inconclusive(1) and v.pairs == 1


def test_two_pairs_are_enough_to_call_a_loss() -> None:
    v = verdict_of(arm("mps", 6.0, 300.0, 2, repeats=2), arm("exclusive", 10.0, 300.0, 2, repeats=2))
    assert v.call == Call.LOSS and v.pairs == 2


def test_no_goodput_in_some_repeat_is_a_loss_not_a_geometric_mean_over_the_rest() -> None:
    shared = arm("shared", 9.0, 400.0, 1)
    shared[0].stages[0].classes = {n: stats(9.0, 400.0, goodput=0.0) for n in ("llm", "embedding")}
    v = verdict_of(shared, arm("exclusive", 10.0, 300.0, 2))
    assert v.call == Call.LOSS and v.pairs == 3
    assert "1 of 3 repeats left out (a geometric mean needs positive ratios): 0 not positive" in str(v.reasons[0])
    assert str(v.reasons[1]) == "no request of this arm met every SLO in 1 of 3 paired repeats (goodput per device 0)"


def test_not_compared_without_a_control_measurement() -> None:
    control = arm("exclusive", 10.0, 300.0, 2)
    for t in control:
        t.stages[0].status = "interrupted"
    assert verdict_of(arm("shared", 9.0, 400.0, 1), control).call == Call.NOT_COMPARED


SCENARIO = StoredScenario.model_validate({"resolved": resolved(
    [{"name": "exclusive", "control": True, "sharing": "exclusive"},
     {"name": "shared", "control": False, "sharing": "time-slicing"}], {"llm": {"slo": {"p95_ms": 1000.0}}})})
CONDITIONS = Provenance(backend={"backend": "local", "driver": "550.54.15",
                                 "devices": [{"name": "cuda:0", "model": "NVIDIA H200"}]})


def test_overall_worth_it_up_to_a_stage_then_a_trade_off_with_the_numbers_and_conditions() -> None:
    control = arm("exclusive", 10.0, 300.0, 2, stages=3)
    shared = arm("shared", 9.0, 400.0, 1, p95_llm=210.0, stages=3)
    for t in shared:
        t.placement = {name: PlacedClass(url="http://127.0.0.1:1", device="cuda:0", segment=0, ready=None)
                       for name in ("llm", "embedding")}
    comparison = build_comparison([*control, *shared], SCENARIO, CONDITIONS, OBJ)
    result = comparison.arms["shared"]
    assert [s.verdict for s in result.stages if s.verdict] == [Call.WORTH_IT, Call.WORTH_IT, Call.TRADE_OFF]
    v = result.verdict
    assert v is not None and v.call == Call.WORTH_IT and v.worth_it_up_to_stage == 1
    assert v.text.startswith("shared against exclusive: worth it up to stage 1 (llm 2 req/s, embedding 4 req/s): "
                             "goodput per device 18 vs 10 req/s within SLO, 1.80x the control's")
    assert "; a trade-off above, at stage 2 (llm 3 req/s, embedding 6 req/s)" in v.text
    assert "llm p95 2.10x its SLO" in v.text
    assert "Operating boundary: every class meets its SLOs" in v.text
    assert "cuda:0 (NVIDIA H200), driver 550.54.15 (local backend), sharing time-slicing against exclusive" in v.text
    assert v.conditions.load_range == {"llm": (1.0, 3.0), "embedding": (2.0, 6.0)}
    assert comparison.arms["exclusive"].verdict is None and comparison.arms["exclusive"].is_control


def test_overall_loss_says_no_significant_difference() -> None:
    comparison = build_comparison([*arm("exclusive", 10.0, 300.0, 2), *arm("shared", 10.0, 300.0, 2)], SCENARIO,
                                  CONDITIONS, OBJ)
    v = comparison.arms["shared"].verdict
    assert v is not None and v.call == Call.LOSS and v.worth_it_up_to_stage is None
    assert "a loss at stage 0" in v.text and "no significant difference" in v.text


def test_not_compared_says_which_side_was_skipped() -> None:
    control = arm("exclusive", 10.0, 300.0, 2)
    for t in control:
        del t.stages[0].classes["embedding"]  # offered but without figures: skipped after a rollback
        t.stages[0].status = "skipped"
    v = verdict_of(arm("shared", 9.0, 400.0, 1), control)
    assert v.call == Call.NOT_COMPARED and str(v.reasons[0]).startswith("the control has no complete measurement")


def test_a_one_repeat_campaign_is_inconclusive_overall_with_its_reasons() -> None:
    control = arm("exclusive", 10.0, 300.0, 2, repeats=1, stages=3)
    shared = arm("shared", 9.0, 400.0, 1, repeats=1, stages=3)
    comparison = build_comparison([*control, *shared], SCENARIO, CONDITIONS, OBJ)
    result = comparison.arms["shared"]
    assert [s.verdict for s in result.stages if s.verdict] == [inconclusive(1)] * 3
    v = result.verdict
    assert v is not None and v.call == "inconclusive (1 repeat)" and v.worth_it_up_to_stage is None
    assert v.text.startswith("shared against exclusive: inconclusive (1 repeat) at stages 0-2 (llm 1 req/s, "
                             "embedding 2 req/s): goodput per device 18 vs 10 req/s within SLO, 1.80x the control's "
                             "(one repeat: no spread, so no significant difference); every class kept its SLOs")
    assert "run at least 2 repeats" in v.text and "loss" not in v.text
    assert ", 1 repeat; another device" in v.text


def test_enough_repeats_at_one_stage_decide_the_arm_over_an_inconclusive_one() -> None:
    control = arm("exclusive", 10.0, 300.0, 2, stages=2)
    shared = arm("shared", 6.0, 300.0, 2, stages=2)
    for t in shared[1:]:
        t.stages[1].status = "interrupted"  # stage 1 measured in repeat 1 only
    result = build_comparison([*control, *shared], SCENARIO, CONDITIONS, OBJ).arms["shared"]
    assert [s.verdict for s in result.stages if s.verdict] == [Call.LOSS, inconclusive(1)]
    assert result.verdict is not None and result.verdict.call == Call.LOSS
    assert "; inconclusive (1 repeat) above, at stage 1" in result.verdict.text


def capacity(per_device: list[float]) -> Capacity:
    repeats = [RepeatCapacity(repeat=r, status="found", scale=1.0, runs=5, fixed_sweep_runs=50,
                              capacity_per_device=c) for r, c in enumerate(per_device, 1)]
    return Capacity(mix={"llm": 1.0}, scale=spread([1.0] * len(per_device)), offered={"llm": 1.0},
                    capacity_per_device=spread(per_device), capacity_per_device_ratio=None, per_repeat=repeats)


def test_a_searched_arm_with_one_repeat_is_inconclusive() -> None:
    mine, theirs = capacity([3.0]), capacity([1.0])
    mine = mine.model_copy(update={"capacity_per_device_ratio": ratio_figure([3.0])})
    call, text = capacity_text("shared", "exclusive", mine, theirs)
    assert call == inconclusive(1)
    assert text.startswith("shared is inconclusive (1 repeat): capacity within SLOs 3.00 req/s per device against "
                           "1.00 for exclusive, 3.00x the control's (one repeat: no spread, so no significant "
                           "difference); 1 paired repeat has no spread")
    two = mine.model_copy(update={"capacity_per_device_ratio": ratio_figure([3.0, 2.9])})
    assert capacity_text("shared", "exclusive", two, theirs)[0] == Call.WORTH_IT
    low = mine.model_copy(update={"capacity_per_device_ratio": ratio_figure([0.5, 2.5])})
    assert capacity_text("shared", "exclusive", low, theirs)[0] == Call.LOSS



def test_a_generator_limited_stage_is_not_blamed_on_the_gpu() -> None:

    shared, control = arm("mps", 6.0, 300.0, 2), arm("exclusive", 10.0, 300.0, 2)
    assert verdict_of(shared, control).call == Call.LOSS
    control[1].stages[0].generator_limited = "send lag P99 42.0 ms for llm (limit 10 ms)"
    figures = stage_contention(0, shared, control, OBJ)
    assert [str(f) for f in figures.generator_limited] == [
        "exclusive repeat 2: send lag P99 42.0 ms for llm (limit 10 ms)"]
    assert (figures.generator_limited[0].arm, figures.generator_limited[0].repeat) == ("exclusive", 2)
    verdict = stage_verdict(figures)
    assert verdict.call == Call.GENERATOR_LIMITED
    behind = verdict.reasons[0]
    assert behind.text == "the load generator fell behind, so latency here is partly the client's"
    assert behind.items == ("exclusive repeat 2: send lag P99 42.0 ms for llm (limit 10 ms)",)
