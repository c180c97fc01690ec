"""What limits an arm is a list of typed items; files written before, which joined them into one string, read
into the same items and render as they did (results/limits.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench_plugin.analysis.packing import capacity_plans
from bench_plugin.report import plan as plan_report
from bench_plugin.report.markdown import render_summary
from bench_plugin.results.limits import Limit, limits_text, parse_limit
from bench_plugin.results.plan import SCHEMA as PLAN_SCHEMA
from bench_plugin.results.plan import read_plan, write_plan
from bench_plugin.results.summary import SCHEMA, load_summary, parse_summary

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "docs" / "results"
ENVELOPE = RESULTS / "h200-envelope"


@pytest.mark.parametrize(("text", "limit"), [
    ("llm p95", Limit(workload="llm", figure="p95")),
    ("llm ttft p95", Limit(workload="llm", figure="ttft p95")),
    ("llm", Limit(workload="llm")),
    ("llm p95 3.06x its SLO", Limit(workload="llm", figure="p95", times=3.06)),
    ("llm tpot p95 2.88x its SLO", Limit(workload="llm", figure="tpot p95", times=2.88)),
    ("embedding error rate 14.5% vs its budget 1.0%",
     Limit(workload="embedding", figure="error rate", measured=0.145, budget=0.01)),
    ("asr error rate - vs its budget 5.0%", Limit(workload="asr", figure="error rate", budget=0.05)),
    ("llm p95: no request succeeded", Limit(workload="llm", figure="p95", note="no request succeeded")),
    ("asr skipped after a rollback in 1 of 3 repeats",
     Limit(workload="asr", note="skipped after a rollback in 1 of 3 repeats")),
    ("llm not measured at this stage", Limit(workload="llm", note="not measured at this stage")),
    ("asr at its highest load tried", Limit(workload="asr", note="at its highest load tried")),
    ("rolled back: llm p95 12x its SLO", Limit(note="rolled back: llm p95 12x its SLO")),
])
def test_each_form_an_older_file_holds_reads_into_its_item_and_makes_the_same_words(text: str, limit: Limit) -> None:
    parsed = parse_limit(text)
    assert parsed.model_copy(update={"measured": None}) == limit.model_copy(update={"measured": None})
    assert parsed.measured == (None if limit.measured is None else pytest.approx(limit.measured))
    assert parsed.text() == text


def test_the_items_are_written_with_only_the_fields_they_have_and_read_back_equal() -> None:
    limits = [Limit(workload="llm", figure="p95", times=1.5), Limit(workload="asr")]
    dumped = [limit.model_dump(mode="json") for limit in limits]
    assert dumped == [{"workload": "llm", "figure": "p95", "times": 1.5}, {"workload": "asr"}]
    assert [Limit.model_validate(d) for d in dumped] == limits
    assert limits_text(limits) == "llm p95 1.50x its SLO, asr" and limits_text(limits, " and ").count(" and ") == 1


def test_a_summary_2_file_reads_as_lists_and_is_written_again_as_summary_3(tmp_path: Path) -> None:
    """The committed envelope campaign (written as bench_plugin.summary/2, each limit one joined string)."""
    data = json.loads((ENVELOPE / "summary.json").read_text())
    assert data["schema"] == "bench_plugin.summary/2"
    joined = {arm: c["answer"]["limiting"] for arm, c in data["comparison"]["arms"].items()}
    summary = parse_summary(data)
    assert summary.schema_ == SCHEMA
    for arm, comp in summary.comparison.arms.items():
        assert comp.answer is not None and limits_text(comp.answer.limiting) == (joined[arm] or "")
        assert all(isinstance(limit, Limit) and limit.workload for limit in comp.answer.limiting)
    rays = [ray for comp in summary.comparison.arms.values() if comp.envelope for ray in comp.envelope.rays]
    assert rays and all(len(ray.limit) <= 3 for ray in rays) and any(ray.limit for ray in rays)
    written = tmp_path / "summary.json"
    written.write_text(summary.to_json())
    again = json.loads(written.read_text())
    assert again["schema"] == SCHEMA
    assert all(isinstance(c["boundary"]["limiting"], list) for c in again["comparison"]["arms"].values())
    assert load_summary(written) == summary


RENDERED = sorted(str(p.parent.relative_to(RESULTS)) for p in RESULTS.glob("**/summary.json")
                  if (p.parent / "summary.md").is_file())


@pytest.mark.parametrize("folder", RENDERED)
def test_every_committed_summary_renders_its_summary_md_as_committed(folder: str) -> None:
    """Whichever schema it was written in: read through the one reader, the words come out byte for byte."""
    where = RESULTS / folder
    plan = read_plan(where / "plan.json") if (where / "plan.json").is_file() else None
    assert render_summary(load_summary(where / "summary.json"), plan) == (where / "summary.md").read_text()


def test_a_plan_1_file_reads_and_planning_again_gives_the_committed_words(tmp_path: Path) -> None:
    """plan.json of the envelope campaign (bench_plugin.plan/1, ``first_limit`` joined with " and "): read as it
    is, and planned again from the summary with the same arguments, both print the committed plan.txt."""
    before = read_plan(ENVELOPE / "plan.json")
    summary = load_summary(ENVELOPE / "summary.json")
    committed = (ENVELOPE / "plan.txt").read_text()
    assert plan_report.terminal(before, summary.control) == committed
    several = [arm.first_limit for traffic in before.plans for arm in traffic.arms if len(arm.first_limit) > 1]
    assert several and all(limit.figure == "p95" for limits in several for limit in limits)
    again = capacity_plans(summary, before.campaign, [dict(p.traffic) for p in before.plans], before.headroom,
                           before.gpu_cost)
    assert plan_report.terminal(again, summary.control) == committed
    write_plan(tmp_path / "plan.json", again)
    assert json.loads((tmp_path / "plan.json").read_text())["schema"] == PLAN_SCHEMA
    assert read_plan(tmp_path / "plan.json") == again
