"""report.md and summary.md: the answer first, the figures next, the conditions last; tolerant of what is missing."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from bench_plugin.report.comparison import (
    NO_COMPARISON,
    compared,
    error_bars,
    interval,
    ratio_text,
    significance_text,
    spread_text,
)
from bench_plugin.report.html import stored
from bench_plugin.report.markdown import render_report, render_summary
from bench_plugin.results.reasons import reason
from bench_plugin.results.store import open_store
from bench_plugin.results.summary import Boundary, Judged, Spread, Summary, load_summary

MakeCampaign = Callable[..., Path]  # the make_campaign fixture of this folder's conftest.py


def summary_of(results: Path) -> Summary:
    return load_summary(results / "summary.json")


def test_verdict_comes_first_then_stages_then_errors_then_conditions(default_results: Path) -> None:
    summary = summary_of(default_results)
    with open_store(default_results / "results.sqlite") as db:
        text = render_report(summary, stored(summary, db))
    order = [text.index(h) for h in ("## Verdict", "## Per-stage figures", "## Errors", "## Conditions")]
    assert order == sorted(order)
    verdict = text[text.index("## Verdict"):text.index("## Per-stage figures")]
    row = ("| shared | time-slicing | **worth it** | 0 low "
           "| reached at about llm 2, embedding 4, asr 1; limited by llm |")
    assert row in verdict
    assert "| exclusive | exclusive | **control** |" in verdict
    assert "worth it up to stage 0 (low); a trade-off above it" in verdict
    assert "| 1 high | llm 4 req/s, embedding 8 req/s, asr 2 req/s | 1.60x [1.52, 1.68] (higher) | 0.88 ± 0.05 " \
        "| 2.40 [2.29, 2.52] | " in verdict
    assert "| **trade-off** | • llm P95 1.9x the control<br>• errors 2% > budget 1% |" in verdict  # a bullet per reason
    assert "### exclusive (control: the reference every other arm is compared with)" in verdict
    assert "**Operating boundary.** every stage met its SLOs" in verdict
    assert "- **started**: 2027-01-15 08:00:00 +00:00" in text and '| shared | `{"' in text
    assert "- **driver**: 550.54.15" in text


def test_without_a_comparison_it_says_so_and_still_gives_the_figures(make_campaign: MakeCampaign) -> None:
    summary = summary_of(make_campaign(comparison=None))
    assert not compared(summary.comparison)
    text = render_report(summary)
    assert text.count(NO_COMPARISON) == 2  # the verdict, and fairness in "Throughput and fairness"
    assert "### Stage 2: offered llm 8 req/s, embedding 16 req/s, asr 4 req/s" in text
    assert "| shared | llm |" in text


def test_a_partial_comparison_does_not_break_the_report(default_results: Path) -> None:
    summary = summary_of(default_results)
    shared = summary.comparison.arms["shared"]
    assert shared.verdict is not None
    # What the models let be missing: a boundary never measured (and no sentence for it), a figure, a stage.
    shared.boundary = Boundary(status="not measured", text="", stage_position=Spread(mean=None, ci95=None, values=[]),
                               offered={}, limiting=None)
    shared.stages[1].fairness = None
    shared.verdict.worth_it_up_to_stage = None
    shared.stages[0].classes["llm"].slowdown_p95 = None
    text = render_report(summary)
    assert "| shared | time-slicing | **worth it** | - | not measured |" in text
    assert "**Operating boundary.** not measured" in text
    assert "| 1 high | llm 4 req/s, embedding 8 req/s, asr 2 req/s | 1.60x [1.52, 1.68] (higher) | - |" in text


def test_pipes_in_reasons_do_not_break_tables(default_results: Path) -> None:
    summary = summary_of(default_results)
    summary.comparison.arms["shared"].stages[0].reasons = [reason("a | b")]
    text = render_report(summary)
    assert "a \\| b" in text


def test_summary_md_still_renders_with_a_comparison_section(default_results: Path) -> None:
    text = render_summary(summary_of(default_results))
    assert text.startswith("# Campaign synthetic")
    assert "## Stage 0: offered llm 2 req/s, embedding 4 req/s, asr 1 req/s" in text


def test_a_ratio_shows_its_asymmetric_interval_and_a_value_its_half_width() -> None:
    ratio = Spread(kind="ratio", mean=1.71, ci95=None, lo=0.9, hi=3.2, values=[1.0, 1.5, 3.4])
    assert ratio_text(ratio) == "1.71x [0.90, 3.20]"
    judged = Judged(**ratio.model_dump(exclude={"n"}), no_change=1.0, significant=False,
                    call="no significant difference")
    assert significance_text(judged, 2, "x") == "1.71x [0.90, 3.20] (no significant difference)"
    assert interval(ratio) == (0.9, 3.2) and error_bars(ratio) == (pytest.approx(0.81), pytest.approx(1.49))
    tiny = ratio.model_copy(update={"mean": 0.58, "lo": 0.0012, "hi": 57.7})
    assert ratio_text(tiny) == "0.58x [0.0012, 57.70]"  # a small lower end is never shown as 0.00
    value = Spread(kind="value", mean=12.0, ci95=4.97, lo=7.03, hi=16.97, values=[])
    assert spread_text(value, 1, " ms") == "12.0 ± 5.0 ms" and error_bars(value) == (pytest.approx(4.97),) * 2
    one = Spread(kind="ratio", mean=1.8, ci95=None, values=[1.8])
    assert ratio_text(one) == "1.80x" and error_bars(one) == (0.0, 0.0)
    half_width = Judged(mean=1.6, ci95=0.05, values=[1.6, 1.6], no_change=1.0, significant=True, call="higher")
    assert significance_text(half_width, 2, "x") == "1.60 ± 0.05x (higher)"  # no ends given: mean ± ci95
    assert interval(half_width) == (pytest.approx(1.55), pytest.approx(1.65))
    assert spread_text(None) == "-" and interval(Spread(mean=None, ci95=None, values=[])) is None


def test_an_inconclusive_verdict_is_shown_as_such(default_results: Path) -> None:
    summary = summary_of(default_results)
    shared = summary.comparison.arms["shared"]
    assert shared.verdict is not None
    shared.verdict = shared.verdict.model_copy(update={
        "call": "inconclusive (1 repeat)", "worth_it_up_to_stage": None,
        "text": "shared against exclusive: inconclusive (1 repeat) at stages 0-2"})
    for st in shared.stages:
        st.verdict = "inconclusive (1 repeat)"
    text = render_report(summary)
    assert "| shared | time-slicing | **inconclusive (1 repeat)** | - |" in text
    assert "shared against exclusive: inconclusive (1 repeat) at stages 0-2" in text
    # the arms' table, then each of the arm's three stages
    assert text.count("| **inconclusive (1 repeat)** |") == 4 and "| **loss** |" not in text.split("## Per-stage")[0]
    assert "### shared (inconclusive (1 repeat))" in text


def test_the_analysis_writes_ratio_intervals_the_report_shows(make_campaign: MakeCampaign) -> None:
    summary = summary_of(make_campaign(comparison="analysis"))
    norm = summary.arms["shared"].stages[0].classes["llm"].normalised_throughput
    assert norm is not None and norm.kind == "ratio" and norm.ci95 is None
    assert norm.lo is not None and norm.hi is not None and norm.mean is not None
    assert 0 < norm.lo <= norm.mean <= norm.hi
    text = render_summary(summary)
    assert f"| {ratio_text(norm)} |" in text and "geometric means" in text
    ratio = summary.comparison.arms["shared"].stages[0].goodput_per_device_ratio
    assert ratio is not None and ratio.kind == "ratio"
    assert f"| {significance_text(ratio, 2, 'x')} |" in render_report(summary)
