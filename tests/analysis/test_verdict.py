"""The verdict (the seed's rule): worth it, trade-off or loss, per stage and as one actionable sentence."""

from __future__ import annotations

from analysis_builders import objectives, stage, stats, trial

from bench_plugin.analysis.comparison import build_comparison
from bench_plugin.analysis.contention import stage_contention
from bench_plugin.analysis.records import TrialSummary
from bench_plugin.analysis.verdict import LOSS, NOT_COMPARED, TRADE_OFF, WORTH_IT, StageVerdict, stage_verdict

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
    assert v.call == WORTH_IT
    assert v.reasons[0].startswith("goodput per device 18 vs 10 req/s within SLO, 1.80x the control's (95% CI")
    assert v.reasons[0].endswith(": higher)")


def test_trade_off_when_it_rises_but_a_class_breaks_its_slo() -> None:
    v = verdict_of(arm("shared", 9.0, 400.0, 1, p95_llm=210.0), arm("exclusive", 10.0, 300.0, 2))
    assert v.call == TRADE_OFF
    assert any(r.startswith("llm p95 2.10x its SLO (2100 ms vs 1000 ms)") for r in v.reasons)


def test_trade_off_when_errors_exceed_the_budget() -> None:
    shared = arm("shared", 9.0, 400.0, 1)
    for t in shared:
        t.stages[0].classes["embedding"] = stats(9.0, 400.0, errors=10)
    v = verdict_of(shared, arm("exclusive", 10.0, 300.0, 2))
    assert v.call == TRADE_OFF and any("embedding error rate 10.0% vs its budget 5.0%" in r for r in v.reasons)


def test_loss_when_goodput_per_device_shows_no_significant_difference() -> None:
    v = verdict_of(arm("mps", 10.0, 300.0, 2), arm("exclusive", 10.0, 300.0, 2))
    assert v.call == LOSS and "no significant difference" in v.reasons[0]


def test_loss_when_goodput_per_device_falls() -> None:
    v = verdict_of(arm("mps", 6.0, 300.0, 2), arm("exclusive", 10.0, 300.0, 2))
    assert v.call == LOSS and v.reasons[0].endswith(": lower)")


def test_one_repeat_cannot_show_a_rise() -> None:
    v = verdict_of(arm("shared", 9.0, 400.0, 1, repeats=1), arm("exclusive", 10.0, 300.0, 2, repeats=1))
    assert v.call == LOSS and "one repeat: no spread" in v.reasons[0]


def test_not_compared_without_a_control_measurement() -> None:
    control = arm("exclusive", 10.0, 300.0, 2)
    for t in control:
        t.stages[0].status = "interrupted"
    assert verdict_of(arm("shared", 9.0, 400.0, 1), control).call == NOT_COMPARED


SCENARIO = {"resolved": {"arms": [{"name": "exclusive", "control": True, "sharing": "exclusive"},
                                  {"name": "shared", "control": False, "sharing": "time-slicing"}]}}
CONDITIONS = {"backend": {"backend": "local", "driver": "550.54.15",
                          "devices": [{"name": "cuda:0", "model": "NVIDIA H200"}]}}


def test_overall_worth_it_up_to_a_stage_then_a_trade_off_with_the_numbers_and_conditions() -> None:
    control = arm("exclusive", 10.0, 300.0, 2, stages=3)
    shared = arm("shared", 9.0, 400.0, 1, p95_llm=210.0, stages=3)
    for t in shared:
        t.placement = {"llm": {"device": "cuda:0"}, "embedding": {"device": "cuda:0"}}
    comparison = build_comparison([*control, *shared], SCENARIO, CONDITIONS, OBJ)
    result = comparison.arms["shared"]
    assert [s.verdict.call for s in result.stages if s.verdict] == [WORTH_IT, WORTH_IT, TRADE_OFF]
    v = result.verdict
    assert v is not None and v.call == WORTH_IT and v.worth_it_up_to_stage == 1
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
    assert v is not None and v.call == LOSS and v.worth_it_up_to_stage is None
    assert "a loss at stage 0" in v.text and "no significant difference" in v.text


def test_not_compared_says_which_side_was_skipped() -> None:
    control = arm("exclusive", 10.0, 300.0, 2)
    for t in control:
        del t.stages[0].classes["embedding"]  # offered but without figures: skipped after a rollback
        t.stages[0].status = "skipped"
    v = verdict_of(arm("shared", 9.0, 400.0, 1), control)
    assert v.call == NOT_COMPARED and v.reasons[0].startswith("the control has no complete measurement")
