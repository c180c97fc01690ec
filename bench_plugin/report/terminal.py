"""The answer in the terminal: what a headless campaign prints at its end, from the typed summary.

Locust's own end table sums every arm and stage together, which says nothing about the A/B. This is
the campaign's answer in a few lines: first, for a campaign that did not complete, its status, why and
when (on the clock of the host that ran it); then per arm its verdict, its figure per device against
the control's (capacity within SLOs in a search, goodput at the stage its verdict rests on in a
sweep: analysis/answer.py), its operating boundary and what limits it; per stage the verdict and
each class's P95 (TTFT and TPOT P95 for the LLM) with the ratio to the control's; the stages cut short,
with what they measured; the next step; the flags that make a figure weaker than it looks (a load
generator that fell behind, a host busy with other work, a P95 resting on too few samples); how many
load-generating processes sent the load and why; and where the report is. Figures are the means over
repeats that summary.json holds.

The answer is a page of the document tree (report/page.py) that report/page_text.py writes for a terminal, as
report.html and report.md are the report's page written by their writers: an arm is a bullet, its stages the
bullets under it.
"""

from __future__ import annotations

from pathlib import Path

from bench_plugin.analysis.answer import SEARCHED
from bench_plugin.report import cut_short, disruption, envelope, page_text
from bench_plugin.report.clock import campaign_clock
from bench_plugin.report.comparison import boundary_short, spread_text
from bench_plugin.report.generators import generators_line
from bench_plugin.report.latency_split import growth_text, stage_names
from bench_plugin.report.page import Block, Bullets, Item, Page, Paragraph, Section, bullets
from bench_plugin.report.warm_start import warm_start_line
from bench_plugin.results.limits import limits_text
from bench_plugin.results.summary import (
    Answer,
    ArmClassFigures,
    ArmComparison,
    StageComparison,
    StageSummary,
    Summary,
)
from bench_plugin.results.words import BoundaryStatus, Call, CampaignState

FIGURES: tuple[tuple[str, str, str], ...] = (("latency_p95_ms", "slowdown_p95", "P95"),
                                            ("ttft_p95_ms", "slowdown_ttft_p95", "TTFT P95"),
                                            ("tpot_p95_ms", "slowdown_tpot_p95", "TPOT P95"))
"""Per class: the arm's figure, its ratio to the control's (in the comparison), and its label."""


def answer_page(summary: Summary, report: Path | None = None) -> Page:
    """The campaign's answer as a page of the document tree: its head line as title, one untitled section."""
    comparison = summary.comparison
    arms = comparison.arms
    repeats = max((trial.repeat for trial in summary.trials), default=0)
    head = (f"bench_plugin: the answer for {summary.scenario.name or 'this campaign'} "
            f"({len(arms)} arm{'s' if len(arms) != 1 else ''}, {repeats} repeat{'s' if repeats != 1 else ''}; "
            f"control: {comparison.control or 'none'})")
    found: list[Block] = []
    status = summary.status
    if status.status != CampaignState.COMPLETED:
        when = f" at {campaign_clock(summary, status.ended_s)}" if status.ended_s is not None else ""
        found.append(Paragraph((f"{status.status.upper()}{when}: {status.reason or 'no reason was recorded'}"
                                + ("; the figures below are of what ran before" if summary.trials else ""),)))
    items = envelope.terminal(summary)  # an envelope campaign is read for its envelope first
    items += [_arm(summary, name, arm, comparison.control) for name, arm in arms.items()]
    found.append(Bullets(tuple(items)))
    flags = sorted({flag for trial in summary.trials for stage in trial.stages for flag in _stage_flags(stage)})
    tail = [*(["flags: " + "; ".join(flags)] if flags else []), generators_line(summary.load_generators),
            warm_start_line(summary), None if report is None else f"report: {report}"]
    found += [Paragraph((text,)) for text in tail if text is not None]
    return Page(title=head, facts=(), sections=(Section("answer", "", tuple(found)),), footer="",
                state=status.status, schema=summary.schema_)


def render_answer(summary: Summary, report: Path | None = None) -> str:
    """The campaign's answer as lines of text (ending in a newline): :func:`answer_page`, written for a
    terminal (report.page_text)."""
    return page_text.page(answer_page(summary, report))


def per_device_text(answer: Answer, control: str | None) -> str:
    """``capacity within SLOs 63.0 req/s per device vs 31.9 for exclusive, 2.00x [1.28, 3.11] (higher)``; for a
    sweep, ``goodput at stage 0 ...``; "" when the arm has no such figure."""
    if answer.per_device is None or answer.per_device.mean is None:
        return ""
    what = "capacity within SLOs" if answer.at == SEARCHED else f"goodput at {answer.at}"
    text = f"{what} {spread_text(answer.per_device, 1)} req/s per device"
    ref = answer.control_per_device
    if ref is not None and ref.mean is not None:
        text += f" vs {spread_text(ref, 1)} for {control or 'the control'}"
    if answer.ratio is not None and answer.ratio.mean is not None:
        text += f", {spread_text(answer.ratio, 2, 'x')} ({answer.ratio.call})"
    return text


def _arm(summary: Summary, name: str, arm: ArmComparison, control: str | None) -> Item:
    """The arm's call, figure and boundary, and under it each stage measured, the stages cut short, where the
    growth went and the next step."""
    answer = arm.answer
    call = Call.CONTROL if arm.is_control else (arm.verdict.call if arm.verdict else Call.NO_VERDICT)
    parts = [f"{name}: {call.upper() if not arm.is_control else call}"]
    if answer is not None and (figure := per_device_text(answer, control)):
        there = limits_text(answer.limiting) if answer.limiting != arm.boundary.limiting else None
        parts.append(figure + (f"; there {there}" if there else ""))
    boundary = arm.boundary  # one that could not be measured says why in its own sentence
    parts.append(boundary.text if boundary.status == BoundaryStatus.NOT_MEASURED
                 else f"boundary {boundary_short(boundary)}")
    out: list[Item] = []
    figures = {stage.index: stage for stage in summary.arms[name].stages} if name in summary.arms else {}
    for stage in arm.stages:
        mine = figures.get(stage.index)
        if mine is None or not mine.classes:
            continue  # no run of it was measured (cut short: below)
        load = ", ".join(f"{c} {rate:.3g}" for c, rate in (mine.realised or mine.offered).items())
        verdict = f"{stage.verdict}: " if stage.verdict else ""
        classes = "; ".join(_class(c, figures_, stage, arm.is_control) for c, figures_ in mine.classes.items())
        notes = [f"{label} in {len(found)} trial{'s' if len(found) != 1 else ''}" for label, found in
                 (("generator-limited", stage.generator_limited), ("host busy", stage.host_busy)) if found]
        cost = None if mine.disruption is None else disruption.cost_text(mine.disruption)
        disrupted = None if cost is None else bullets([f"disrupted, {cost}"])
        out.append(Item((f"stage {stage.index}" + (f" ({load} req/s)" if load else "") + f": {verdict}{classes}"
                         + (f" [{'; '.join(notes)}]" if notes else ""),), disrupted))
    out += cut_short.terminal(summary, name)
    if answer is not None and answer.growth is not None:
        out.append(Item((growth_text(answer.growth, stage_names(summary).get(answer.growth.stage)),)))
    if answer is not None:
        out.append(Item((f"next: {answer.next_step}",)))
    return Item(("; ".join(parts),), Bullets(tuple(out)) if out else None)


def _class(name: str, figures: ArmClassFigures, stage: StageComparison, is_control: bool) -> str:
    parts = []
    compared = stage.classes.get(name)
    for field, ratio_field, label in FIGURES:
        spread = getattr(figures, field)
        if spread is None or spread.mean is None:
            continue
        text = f"{label} {spread.mean:.0f} ms"
        ratio = getattr(compared, ratio_field, None) if compared is not None and not is_control else None
        if ratio is not None and ratio.mean is not None:
            text += f" ({ratio.mean:.2f}x the control's)"
        parts.append(text)
    errors = figures.error_rate.mean
    if errors:
        parts.append(f"errors {errors:.1%}")
    return f"{name} " + ", ".join(parts) if parts else f"{name} no figures"


def _stage_flags(stage: StageSummary) -> list[str]:
    """Flags of one trial's stage that weaken its figures."""
    out = []
    if stage.generator_limited:
        out.append("a load generator fell behind in some stages (generator-limited)")
    if stage.host_busy:
        out.append("the host was busy with other work in some stages (host busy)")
    for name, stats in stage.classes.items():
        if stats.p95_note:
            out.append(f"{name}: some P95s rest on too few samples to be bounded")
    return out
