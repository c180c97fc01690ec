"""report.md and summary.md: the answer first, the figures next, the conditions last; tolerant of what is missing."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench_plugin.report.comparison import NO_COMPARISON, read_comparison
from bench_plugin.report.markdown import render_report, render_summary

MakeCampaign = Callable[..., Path]  # the make_campaign fixture of this folder's conftest.py


def summary_of(results: Path) -> dict[str, Any]:
    return dict(json.loads((results / "summary.json").read_text(encoding="utf-8")))


def test_verdict_comes_first_then_stages_then_boundaries_then_conditions(make_campaign: MakeCampaign) -> None:
    text = render_report(summary_of(make_campaign()), started_s=1_800_000_000.0,
                         arm_settings={"shared": {"sharing": "time-slicing"}})
    order = [text.index(h) for h in ("## Verdict", "## Per-stage figures", "## Operating boundary per arm",
                                     "## Conditions")]
    assert order == sorted(order)
    verdict = text[text.index("## Verdict"):text.index("## Per-stage figures")]
    row = ("| shared | time-slicing | **worth it** | 0 low "
           "| reached at about llm 2, embedding 4, asr 1; limited by llm |")
    assert row in verdict
    assert "| exclusive | exclusive | control |" in verdict
    assert "worth it up to stage 0 (low); a trade-off above it" in verdict
    assert "| 1 high | llm 4 req/s, embedding 8 req/s, asr 2 req/s | 1.60 ± 0.05x (higher) |" in verdict
    assert "llm P95 1.9x the control; errors 2% > budget 1%" in verdict
    assert "- **exclusive**: every stage met its SLOs" in text
    assert "2027-01-15 08:00 UTC" in text and '`{"sharing": "time-slicing"}`' in text
    assert "driver: 550.54.15" in text


def test_without_a_comparison_it_says_so_and_still_gives_the_figures(make_campaign: MakeCampaign) -> None:
    summary = summary_of(make_campaign(comparison=None))
    assert read_comparison(summary) is None
    text = render_report(summary)
    assert text.count(NO_COMPARISON) == 2  # the verdict and the boundary sections
    assert "### Stage 2: offered llm 8 req/s, embedding 16 req/s, asr 4 req/s" in text
    assert "| shared | llm |" in text


def test_a_partial_comparison_does_not_break_the_report(make_campaign: MakeCampaign) -> None:
    summary = summary_of(make_campaign())
    shared = summary["comparison"]["arms"]["shared"]
    del shared["boundary"], shared["stages"][1]["fairness"], shared["verdict"]["worth_it_up_to_stage"]
    shared["stages"][0]["classes"]["llm"] = {"slowdown_p95": None}
    text = render_report(summary)
    assert "| shared | time-slicing | **worth it** | - | - |" in text
    assert "- **shared**: -" in text


def test_pipes_in_reasons_do_not_break_tables(make_campaign: MakeCampaign) -> None:
    summary = summary_of(make_campaign())
    summary["comparison"]["arms"]["shared"]["stages"][0]["reasons"] = ["a | b"]
    text = render_report(summary)
    assert "a \\| b" in text


def test_summary_md_still_renders_with_a_comparison_section(make_campaign: MakeCampaign) -> None:
    text = render_summary(summary_of(make_campaign()))
    assert text.startswith("# Campaign synthetic")
    assert "## Stage 0: offered llm 2 req/s, embedding 4 req/s, asr 1 req/s" in text
