"""The terminal answer, a page of the document tree: a campaign that did not complete says so first (status, cause,
when); per arm its figure per device against the control's and the next step; the stages cut short with what they
measured; no empty figures."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from bench_plugin.report import page_text
from bench_plugin.report.clock import clock
from bench_plugin.report.outputs import summarise
from bench_plugin.report.page import Bullets, Paragraph
from bench_plugin.report.terminal import answer_page, render_answer

MakeCampaign = Callable[..., Path]


def test_a_completed_campaign_starts_with_its_arms(make_campaign: MakeCampaign) -> None:
    lines = render_answer(summarise(make_campaign(comparison="analysis"))).splitlines()
    assert lines[0].startswith("bench_plugin: the answer for synthetic (2 arms, 2 repeats; control: exclusive)")
    assert lines[1].startswith("  exclusive: control; boundary ")
    assert not [line for line in lines if "( req/s)" in line or line.rstrip().endswith(":")]


def test_a_stopped_campaign_says_so_first_with_its_cause_and_time(make_campaign: MakeCampaign) -> None:
    summary = summarise(make_campaign(comparison="analysis", interrupted=True))
    assert summary.status.ended_s is not None
    lines = render_answer(summary).splitlines()
    assert lines[1] == (f"  INTERRUPTED at {clock(summary.status.ended_s)}: no reason was recorded; "
                        "the figures below are of what ran before")
    assert not [line for line in lines if "( req/s)" in line or line.rstrip().endswith(":")], lines


def test_clock_is_local_time_with_its_utc_offset() -> None:
    text = clock(1_800_000_000.0)
    assert len(text) == len("2027-01-15 08:00:00 +00:00") and text[-6] in "+-" and text[-3] == ":"
    assert clock(1_800_000_000.0, date=False) == text[11:]


def test_each_arm_gives_its_figure_per_device_and_its_next_step(make_campaign: MakeCampaign) -> None:
    summary = summarise(make_campaign(comparison="analysis"))
    shared = summary.comparison.arms["shared"]
    assert shared.answer is not None and shared.answer.per_device is not None
    text = render_answer(summary)
    line = next(line for line in text.splitlines() if line.startswith("  shared: "))
    assert f"goodput at {shared.answer.at} " in line and "req/s per device vs" in line and "for exclusive" in line
    assert "boundary " in line
    nexts = [line for line in text.splitlines() if line.startswith("    next: ")]
    assert len(nexts) == 2 and f"    next: {shared.answer.next_step}" in nexts


def test_a_stage_cut_short_is_shown_with_what_it_measured(make_campaign: MakeCampaign) -> None:
    """The interrupted stage's figures are in no figure over repeats, but the answer still shows them, marked."""
    summary = summarise(make_campaign(comparison="analysis", interrupted=True))
    cut = [(t, s) for t in summary.trials for s in t.stages if s.status == "interrupted"]
    assert cut
    trial, stage = cut[0]
    lines = [line for line in render_answer(summary).splitlines() if "CUT SHORT" in line]
    assert len(lines) == len(cut)
    llm = stage.classes["llm"]
    assert lines[0].startswith(f"    stage {stage.index} (")
    assert f"repeat {trial.repeat}: CUT SHORT (interrupted)" in lines[0]
    assert f"llm {llm.requests} requests, P95 {llm.latency_ms['p95']:.0f} ms" in lines[0]


def test_the_answer_is_a_page_of_the_document_tree(make_campaign: MakeCampaign) -> None:
    """The terminal writes a tree of the report's own blocks: each arm a bullet, its stages and next step under it."""
    summary = summarise(make_campaign(comparison="analysis"))
    page = answer_page(summary, Path("r/report.html"))
    assert render_answer(summary, Path("r/report.html")) == page_text.page(page)
    (section,) = page.sections
    arms = next(b for b in section.blocks if isinstance(b, Bullets)).items
    assert [page_text.line(arm.text).split(":")[0] for arm in arms] == list(summary.comparison.arms)
    for arm in arms:
        assert arm.sub is not None
        under = [page_text.line(item.text) for item in arm.sub.items]
        assert under[0].startswith("stage 0 (") and under[-1].startswith("next: ")
    assert section.blocks[-1] == Paragraph(("report: r/report.html",))
