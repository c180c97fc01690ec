"""The terminal answer: a campaign that did not complete says so first (status, cause, when); no empty figures."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from bench_plugin.report.outputs import summarise
from bench_plugin.report.terminal import clock, render_answer

MakeCampaign = Callable[..., Path]


def test_a_completed_campaign_starts_with_its_arms(make_campaign: MakeCampaign) -> None:
    lines = render_answer(summarise(make_campaign(comparison="analysis"))).splitlines()
    assert lines[0].startswith("bench_plugin: the answer for synthetic (2 arms, 2 repeats; control: exclusive)")
    assert lines[1].startswith("  exclusive (control)")
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
