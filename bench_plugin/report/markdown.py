"""Markdown for terminals and pull requests: summary.md (the figures) and report.md (the answer first).

summary.md lists the trials (and, where the cluster's pod events were recorded, their scheduling),
then per stage, arm and class the figures over repeats, then the stages cut short. report.md reads like
report.html without the plots: the answer in short first (report.answer), then the verdict per arm
(when the campaign has a control to compare with), then the
per-stage tables, the operating boundary per arm, the pods' scheduling (where it was recorded), the
per-stage GPU series from Prometheus beside NVML's (when the campaign queried one), and the
conditions of the run in short. Both read the typed
summary (bench_plugin.results.summary.Summary) only.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import Any

from bench_plugin.report import (
    answer,
    checks,
    cut_short,
    disruption,
    envelope,
    guide,
    latency_split,
    page_markdown,
    scheduling,
)
from bench_plugin.report import plan as plan_section
from bench_plugin.report.basis import FIGURES, Bases, any_low, low_rule, markdown_text, value_text
from bench_plugin.report.clock import campaign_clock
from bench_plugin.report.comparison import (
    NO_COMPARISON,
    RATIO_UNIT,
    RESUME_COLUMNS,
    boundary_short,
    boundary_text,
    compared,
    resume_rows,
    significance_text,
    status_text,
)
from bench_plugin.report.comparison import offered_text as _offered
from bench_plugin.report.comparison import spread_text as _fmt
from bench_plugin.report.generators import generators_line
from bench_plugin.report.placement import cpus_by_arm
from bench_plugin.report.protocol import embedding_format_lines, output_length_lines
from bench_plugin.report.stage_groups import StageGroup, group_rows, stage_groups
from bench_plugin.report.stage_series import TrialSeries
from bench_plugin.report.stage_series import section as stage_series_section
from bench_plugin.report.warm_start import warm_start_line
from bench_plugin.results.facts import BackendFacts
from bench_plugin.results.plan import PlanDocument
from bench_plugin.results.reasons import Reason
from bench_plugin.results.summary import Comparison, Provenance, Summary
from bench_plugin.results.words import Call

SPREAD_NOTE = ("Figures are mean ± 95% CI half-width over repeats (Student t; none with one repeat). Ratios to "
               "the control (1.71x [0.90, 3.20]) are geometric means with their 95% CI [lo, hi], computed on the "
               "log scale, so it is asymmetric and never reaches zero.")
"""How to read a figure's interval, said once above the tables."""


def _trials_table(summary: Summary) -> list[str]:
    lines = ["| trial | arm | repeat | status | stages (status) |", "|---|---|---|---|---|"]
    for t in summary.trials:
        stages = ", ".join(f"{s.index}:{s.status}" for s in t.stages)
        reason = f" ({t.reason})" if t.reason else ""
        lines.append(f"| {t.id} | {t.arm} | {t.repeat} | {t.status}{reason} | {stages} |")
    return lines


def _stage_table(summary: Summary, group: StageGroup, bases: Bases) -> list[str]:
    """The figures of one load (``group``) per arm and class; each percentile with its sample count per repeat.

    A percentile that rests on too few samples to be bounded in some repeat is in italics and marked,
    and the rule is said under the table.
    """
    lines = [
        "| arm | class | throughput req/s | P50 ms | P95 ms | TTFT P95 ms | TPOT P95 ms | ITL P95 ms | error rate "
        "| thr. vs control |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    shown = []
    for arm, index, name, fig in group_rows(summary, group):
        norm_text = "control" if arm == summary.control else _fmt(fig.normalised_throughput, 2, RATIO_UNIT)
        err = fig.error_rate.mean
        err_text = "-" if err is None else f"{100 * err:.1f}%"
        cells = []
        for key in FIGURES:
            basis = bases.get(arm, index, name, key)
            text = value_text(getattr(fig, key), basis)
            shown.append(None if text == "-" else basis)  # the rule goes under a table that shows its mark
            cells.append(markdown_text(text, basis))
        lines.append(f"| {arm} | {name} | {_fmt(fig.throughput_rps, 2)} | " + " | ".join(cells)
                     + f" | {err_text} | {norm_text} |")
    if any_low(shown):
        lines += ["", low_rule() + "."]
    return lines


def _stage_sections(summary: Summary, level: str) -> list[str]:
    """A heading (``level``: "##" or "###") and a table per load the arms ran (report.stage_groups)."""
    bases = Bases(summary)
    lines: list[str] = []
    for group in stage_groups(summary):
        lines += [f"{level} {group.heading(_offered(group.offered, group.arrival))}", "",
                  *_stage_table(summary, group, bases), ""]
    return lines


def _overrides(summary: Summary) -> dict[str, str | int | float]:
    return summary.overrides.given() if summary.overrides else {}


def _status(summary: Summary) -> str:
    return status_text(summary)


def envelope_and_plan(summary: Summary, plan: PlanDocument | None) -> list[str]:
    """The operating envelope (each arm's rays and model) and the capacity plan where there are: what an
    envelope campaign is read for, so it comes before the per-load tables."""
    lines = ["## Operating envelope", "", *envelope.markdown(summary)] if envelope.envelopes(summary) else []
    return lines + (plan_section.markdown(plan, summary.control) if plan is not None else [])


def render_summary(summary: Summary, plan: PlanDocument | None = None) -> str:
    """The markdown text of summary.md; an envelope campaign's envelope and ``plan`` (the campaign's
    ``bench-plugin plan`` output, where there is one) lead, before the trials and the per-load tables."""
    scenario = summary.scenario
    lines = [
        f"# Campaign {scenario.name}",
        "",
        f"- status: {_status(summary)}",
        f"- scenario sha256: `{scenario.sha256}`",
        f"- control arm: {summary.control}",
        f"- overrides: {_overrides(summary) or 'none'}",
    ]
    for name, rs in (summary.request_sets or {}).items():
        lines.append(f"- request set {name}: {rs.count} requests, sha256 `{rs.sha256[:16]}…` ({rs.source})")
    backend = (summary.conditions.backend if summary.conditions else None) or BackendFacts()
    lines.append(f"- backend: {backend.backend}; devices: "
                 + ", ".join(f"{d.name} ({d.model})" for d in backend.devices or []))
    if (generators := generators_line(summary.load_generators)) is not None:
        lines.append(f"- {generators}")
    if (warm := warm_start_line(summary)) is not None:
        lines.append(f"- {warm}")
    lines += ["", f"{SPREAD_NOTE} "
              "Latency is measured from each request's intended send time; percentiles come from exact samples. "
              "Throughput counts successful requests over the time it took to serve the stage's requests "
              "(at least the stage's duration); throughput vs control is the per-repeat ratio to the control "
              "arm at the same stage (in a search: at the same load, or an exclusive control's class alone at "
              "the same rate).", ""]
    lines += envelope_and_plan(summary, plan)
    lines += ["## Trials", "", *_trials_table(summary), ""]
    lines += scheduling.markdown_section(summary)
    lines += _stage_sections(summary, "##")
    lines += cut_short.markdown(summary, "##")
    return "\n".join(lines)


def _cell(text: Any) -> str:
    """Table-safe text: a pipe or a newline would break the markdown table."""
    return str(text if text is not None else "-").replace("|", "\\|").replace("\n", " ")


def reasons_cell(reasons: list[Reason]) -> str:
    """A stage's reasons as bullets inside one table cell: ``• a<br>• b``, a list reason's items as ``◦``."""
    lines = []
    for why in reasons:
        lines.append(f"• {why.text}" + (":" if why.items else ""))
        lines += [f"&nbsp;&nbsp;◦ {item}" for item in why.items or ()]
    return _cell("<br>".join(lines) or "-")


def _stage_labels(summary: Summary) -> dict[int, str]:
    labels: dict[int, str] = {}
    for t in summary.trials:
        for s in t.stages:
            labels.setdefault(s.index, f"{s.index} {s.name or ''}".strip())
    return labels


def _verdict_section(summary: Summary, comparison: Comparison) -> list[str]:
    labels = _stage_labels(summary)
    lines = ["## Verdict", "", *guide.markdown("verdict"),
             "| arm | sharing | verdict | worth it up to stage | operating boundary |", "|---|---|---|---|---|"]
    for arm, comp in comparison.arms.items():
        upto = comp.verdict.worth_it_up_to_stage if comp.verdict else None
        call = Call.CONTROL if comp.is_control else f"**{_cell(comp.verdict.call if comp.verdict else None)}**"
        lines.append(f"| {arm} | {_cell(comp.sharing)} | {call} | "
                     f"{_cell(labels.get(upto, upto) if upto is not None else None)} | "
                     f"{_cell(boundary_short(comp.boundary))} |")
    for arm, comp in comparison.arms.items():
        if comp.is_control:
            continue
        lines += ["", f"### {arm}", ""]
        if comp.verdict and comp.verdict.text:
            lines += [comp.verdict.text, ""]
        if not comp.stages:
            continue
        lines += ["| stage | offered | goodput/device vs control | fairness | consolidation gain | verdict | reasons |",
                  "|---|---|---|---|---|---|---|"]
        for st in comp.stages:
            lines.append(
                f"| {_cell(labels.get(st.index, st.index))} | {_offered(st.offered)} "
                f"| {significance_text(st.goodput_per_device_ratio, 2, RATIO_UNIT)} | {_fmt(st.fairness, 2)} "
                f"| {_fmt(st.consolidation_gain, 2)} | {_cell(st.verdict)} | {reasons_cell(st.reasons)} |")
    return [*lines, ""]


def _boundary_section(comparison: Comparison) -> list[str]:
    lines = ["## Operating boundary per arm", "", *guide.markdown("boundary")]
    if not compared(comparison):
        return [*lines, NO_COMPARISON, ""]
    for arm, comp in comparison.arms.items():
        lines.append(f"- **{arm}**: {boundary_text(comp.boundary)}")
    return [*lines, ""]


def _conditions_section(summary: Summary, started_s: float | None,
                        arm_settings: dict[str, str] | None) -> list[str]:
    scenario = summary.scenario
    cond = summary.conditions or Provenance()
    backend = cond.backend or BackendFacts()
    command = cond.command
    started = campaign_clock(summary, started_s, seconds=False) if started_s else "-"
    lines = [
        "## Conditions", "", *guide.markdown("conditions"),
        f"- scenario: `{scenario.path}` sha256 `{scenario.sha256}`; overrides: {_overrides(summary) or 'none'}",
        f"- started: {started}; host {cond.host}; {cond.platform}; python {cond.python}",
        f"- source revision: `{cond.source_revision}`",
        f"- command: `{shlex.join(command) if isinstance(command, list) else command}`",
        f"- backend: {backend.backend}; devices: "
        + (", ".join(f"{d.name} ({d.model})" for d in backend.devices or []) or "-")
        + "".join(f"; {label}: {value}" for label, value in (("driver", backend.driver), ("nvml", backend.nvml))
                  if value),
    ]
    if (warm := warm_start_line(summary)) is not None:
        lines.append(f"- {warm}")
    if (generators := generators_line(summary.load_generators)) is not None:
        lines.append(f"- {generators}")
    for row in resume_rows(summary):
        lines.append("- " + "; ".join(f"{column} {value}" for column, value in zip(RESUME_COLUMNS, row, strict=True)))
    for name, rs in (summary.request_sets or {}).items():
        lines.append(f"- request set {name}: {rs.count} requests, sha256 `{rs.sha256}` ({rs.source})")
    packages = cond.packages or {}
    if packages:
        lines.append("- packages: " + ", ".join(f"{k} {v}" for k, v in sorted(packages.items())))
    for arm, settings in (arm_settings or {}).items():
        lines.append(f"- arm {arm}: `{settings}`")
    for arm, classes in cpus_by_arm((t.arm, t.placement) for t in summary.trials).items():
        lines.append(f"- arm {arm}, CPU cores of each server (read back at its start): "
                     + "; ".join(f"{name} {' / '.join(labels)}" for name, labels in classes.items()))
    lines += [f"- {line}" for line in output_length_lines(summary) + embedding_format_lines(summary)]
    lines.append("- each server's command line: see report.html (Conditions) or results.sqlite (segments.placement)")
    return [*lines, ""]


def render_report(summary: Summary, *, started_s: float | None = None,
                  arm_settings: dict[str, str] | None = None,
                  stage_series: Sequence[TrialSeries] = (), plan: PlanDocument | None = None) -> str:
    """The markdown text of report.md: the answer and verdict first, then the envelope and ``plan`` (an envelope
    campaign's), then per-stage tables, boundaries and conditions.

    ``started_s`` (the campaign start, epoch seconds), ``arm_settings`` (each arm's settings as
    recorded in trials.arm_config, as JSON text) and ``stage_series`` (report.stage_series.read_trial_series) come
    from results.sqlite; all are optional.
    """
    comparison = summary.comparison
    lines = [
        f"# GPU sharing report: {summary.scenario.name}", "",
        f"- status: {_status(summary)}",
        f"- control arm: {summary.control}",
        f"- arms: {', '.join(summary.arms)}", "",
    ]
    lines += _guided(answer.markdown(summary), "answer")
    if compared(comparison):
        lines += _verdict_section(summary, comparison)
    else:
        lines += ["## Verdict", "", *guide.markdown("verdict"), NO_COMPARISON, ""]
    lines += envelope_and_plan(summary, plan)
    lines += ["## Per-stage figures", "", *guide.markdown("stages"),
              f"{SPREAD_NOTE} Latency is from each request's intended send time.", ""]
    lines += _stage_sections(summary, "###")
    lines += cut_short.markdown(summary, "###")
    lines += _boundary_section(comparison)
    lines += page_markdown.section(latency_split.section(summary, figures=False))
    lines += page_markdown.section(disruption.section(summary))
    lines += _guided(scheduling.markdown_section(summary), "scheduling")
    lines += page_markdown.section(checks.section(summary))
    lines += page_markdown.section(stage_series_section(stage_series))
    lines += _conditions_section(summary, started_s, arm_settings)
    return "\n".join(lines)


def _guided(lines: list[str], section: str) -> list[str]:
    """A section's lines with its "how to read this" under its heading (nothing where the section is empty)."""
    if not lines:
        return lines
    return [*lines[:2], *guide.markdown(section), *lines[2:]]
