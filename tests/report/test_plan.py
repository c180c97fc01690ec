"""The capacity plan in words: what each arm saves, what breaks first, and why the best arm is the best."""

from __future__ import annotations

from bench_plugin.analysis.packing import best_arm, with_costs
from bench_plugin.report import page_html, page_markdown
from bench_plugin.report.plan import best_text, growth_text, saved_text, section, terminal
from bench_plugin.results.limits import parse_limit
from bench_plugin.results.plan import ArmPlan, GroupPlan, PlanDocument, TrafficPlan

TRAFFIC = {"llm": 20.0, "embedding": 100.0, "asr": 20.0}


def arm(name: str, gpus: int | None, growth: float | None = 1.3, first: str | None = "embedding p95",
        extrapolation: list[str] | None = None) -> ArmPlan:
    groups = [] if gpus is None else [GroupPlan(classes=list(TRAFFIC), gpus=gpus, load=dict(TRAFFIC), used=0.8,
                                                limited_by=first or "embedding p95")]
    return ArmPlan(arm=name, sharing=None if name == "exclusive" else name, gpus=gpus, groups=groups, growth=growth,
                   first_limit=[parse_limit(f) for f in first.split(" and ")] if first else [],
                   extrapolation=extrapolation or [], note=None if gpus else "no model")


def traffic_plan(*arms: ArmPlan, gpu_cost: float | None = 2.5) -> TrafficPlan:
    priced = with_costs(list(arms), "exclusive", gpu_cost)
    return TrafficPlan(traffic=dict(TRAFFIC), arms=priced, best=best_arm(priced))


def test_one_criterion_breaks_two_break() -> None:
    assert growth_text(arm("mps", 3)) == "absorbs +30% traffic before it needs another GPU; embedding p95 breaks first"
    both = arm("mps", 3, first="embedding p95 and llm ttft p95")
    assert growth_text(both).endswith("; embedding p95 and llm ttft p95 break first")
    assert growth_text(arm("mps", 3, growth=None)) == ""


def test_savings_say_gpus_and_cost_either_way() -> None:
    plan = traffic_plan(arm("exclusive", 4), arm("mps", 3), arm("time-slicing", 4), arm("mig", 6))
    saved = {a.arm: saved_text(a) for a in plan.arms}
    assert saved == {"exclusive": "saves none", "mps": "saves 1 GPU (2.50)", "time-slicing": "saves none",
                     "mig": "needs 2 more GPUs (5.00 more)"}
    uncosted = traffic_plan(arm("exclusive", 4), arm("mps", 2), arm("mig", 5), gpu_cost=None)
    assert [saved_text(a) for a in uncosted.arms] == ["saves none", "saves 2 GPUs", "needs 1 more GPU"]
    assert saved_text(arm("mps", 3)) is None  # priced against no control
    lines = terminal(PlanDocument(campaign="c", headroom=0.2, gpu_cost=2.5, method="m", plans=[plan]),
                     "exclusive").splitlines()
    assert lines[1].startswith("  exclusive (control): 4 GPUs; cost 10.00: ")  # the control saves nothing by definition
    assert lines[2].startswith("  mps: 3 GPUs; saves 1 GPU (2.50); cost 7.50: ")


def test_the_best_arm_says_why() -> None:
    fewest = traffic_plan(arm("exclusive", 4), arm("mps", 3), arm("time-slicing", 4))
    assert best_text(fewest) == "mps, with the fewest GPUs (3)"
    tie = traffic_plan(arm("exclusive", 4, growth=1.51), arm("time-slicing", 4, growth=1.34))
    assert best_text(tie) == "exclusive, at 4 GPUs like time-slicing, but absorbing more growth (+51%)"
    three = traffic_plan(arm("exclusive", 4, growth=1.2), arm("time-slicing", 4, growth=1.34),
                         arm("mps", 4, growth=1.1))
    assert best_text(three) == "time-slicing, at 4 GPUs like exclusive and mps, but absorbing the most growth (+34%)"
    passed_over = traffic_plan(arm("exclusive", 4), arm("mps", 2, extrapolation=["beyond the busiest stage"]))
    assert best_text(passed_over) == ("exclusive, with the fewest GPUs (4); mps needs 2 GPUs, but its plan is an "
                                      "extrapolation")
    assert best_text(traffic_plan(arm("exclusive", None), arm("mps", 2, extrapolation=["x"]))) == (
        "none rests on validated ground")


def test_the_report_sections_carry_the_reason() -> None:
    plan = traffic_plan(arm("exclusive", 4), arm("mps", 3))
    document = PlanDocument(campaign="c", headroom=0.2, gpu_cost=None, method="m", plans=[plan])
    assert "<p>Best: mps, with the fewest GPUs (3).</p>" in page_html.body(section(document, "exclusive"))
    assert "Best: mps, with the fewest GPUs (3)." in page_markdown.section(section(document, "exclusive"))
    assert terminal(document, "exclusive").endswith("  best: mps, with the fewest GPUs (3)\n")
