"""The answer in the terminal: what a headless campaign prints at its end, from the typed summary.

Locust's own end table sums every arm and stage together, which says nothing about the A/B. This is
the campaign's answer in a few lines: first, for a campaign that did not complete, its status, why and
when; then per arm its verdict and operating boundary; per stage the
verdict and each class's P95 (TTFT and TPOT P95 for the LLM) with the ratio to the control's; the
flags that make a figure weaker than it looks (a load generator that fell behind, a host busy with
other work, a P95 resting on too few samples, a verdict from too few repeats); and where the report
is. Figures are the means over repeats that summary.json holds.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from bench_plugin.results.summary import ArmClassFigures, ArmComparison, StageComparison, StageSummary, Summary

FIGURES: tuple[tuple[str, str, str], ...] = (("latency_p95_ms", "slowdown_p95", "P95"),
                                            ("ttft_p95_ms", "slowdown_ttft_p95", "TTFT P95"),
                                            ("tpot_p95_ms", "slowdown_tpot_p95", "TPOT P95"))
"""Per class: the arm's figure, its ratio to the control's (in the comparison), and its label."""


def render_answer(summary: Summary, report: Path | None = None) -> str:
    """The campaign's answer as lines of text (ending in a newline)."""
    comparison = summary.comparison
    arms = comparison.arms
    repeats = max((trial.repeat for trial in summary.trials), default=0)
    head = (f"bench_plugin: the answer for {summary.scenario.name or 'this campaign'} "
            f"({len(arms)} arm{'s' if len(arms) != 1 else ''}, {repeats} repeat{'s' if repeats != 1 else ''}; "
            f"control: {comparison.control or 'none'})")
    lines = [head]
    status = summary.status
    if status.status != "completed":
        when = f" at {clock(status.ended_s)}" if status.ended_s is not None else ""
        lines.append(f"  {status.status.upper()}{when}: {status.reason or 'no reason was recorded'}"
                     + ("; the figures below are of what ran before" if summary.trials else ""))
    for name, arm in arms.items():
        lines += _arm(summary, name, arm)
    flags = sorted({flag for trial in summary.trials for stage in trial.stages for flag in _stage_flags(stage)})
    if flags:
        lines.append("  flags: " + "; ".join(flags))
    if report is not None:
        lines.append(f"  report: {report}")
    return "\n".join(lines) + "\n"


def clock(epoch_s: float, date: bool = True) -> str:
    """An epoch time as this host's local clock time with its UTC offset (``2026-12-03 07:20:01 +01:00``;
    without ``date``: ``07:20:01 +01:00``)."""
    local = dt.datetime.fromtimestamp(epoch_s).astimezone()
    offset = local.strftime("%z")
    return f"{local:%Y-%m-%d %H:%M:%S}"[0 if date else 11:] + f" {offset[:3]}:{offset[3:]}"


def _arm(summary: Summary, name: str, arm: ArmComparison) -> list[str]:
    role = " (control)" if arm.is_control else ""
    call = f": {arm.verdict.call}" if arm.verdict is not None else ""
    out = [f"  {name}{role}{call}; {arm.boundary.text}"]
    figures = {stage.index: stage for stage in summary.arms[name].stages} if name in summary.arms else {}
    for stage in arm.stages:
        mine = figures.get(stage.index)
        if mine is None:
            continue
        load = ", ".join(f"{c} {rate:.3g}" for c, rate in (mine.realised or mine.offered).items())
        verdict = f"{stage.verdict}: " if stage.verdict else ""
        classes = "; ".join(_class(c, figures_, stage, arm.is_control) for c, figures_ in mine.classes.items())
        classes = classes or "no request ended in it"
        notes = [f"{label} in {len(found)} trial{'s' if len(found) != 1 else ''}" for label, found in
                 (("generator-limited", stage.generator_limited), ("host busy", stage.host_busy)) if found]
        out.append(f"    stage {stage.index}" + (f" ({load} req/s)" if load else "") + f": {verdict}{classes}"
                   + (f" [{'; '.join(notes)}]" if notes else ""))
    return out


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
