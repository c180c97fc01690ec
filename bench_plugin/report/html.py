"""report.html: the campaign for people, in one file that opens offline.

Usage::

    from bench_plugin.report.html import write_report
    write_report(Path("results/day19-..."))   # -> results/day19-.../report.html (and report.md)

or ``python -m bench_plugin.report RESULTS_DIR``. The page is self-contained: CSS in a ``<style>``,
plots as inline SVG drawn by matplotlib, no script, font, image or stylesheet from anywhere else, so
it can be mailed, archived with the results and opened years later without a network.

Order of the page (the seed's "how to read results"): the answer in short with its picture first
(report.answer), then the verdict per arm, then per class the latency against offered load,
normalised throughput and fairness, the per-stage figures (each percentile with its sample count per
repeat) and the stages cut short, then one timeline per trial (the cluster's pods where it recorded
them, placement, readiness, stages, failures, latency, GPU), the per-stage GPU series from Prometheus
beside NVML's (only where the campaign queried one), the measurement checks, the errors, and every
condition of the run. Each section opens with a short "how to read this" (report.guide); a
percentile that rests on too few samples to be bounded is muted, in italics and
marked (report.basis).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench_plugin.report import answer, checks, cut_short, disruption, envelope, guide, latency_split, page_html
from bench_plugin.report import plan as plan_section
from bench_plugin.report.basis import Bases, Basis, any_low, html_cell, low_rule, value_text
from bench_plugin.report.comparison import (
    NO_COMPARISON,
    RATIO_UNIT,
    boundary_short,
    boundary_text,
    call_kind,
    compared,
    offered_text,
    significance_text,
    spread_text,
    status_text,
)
from bench_plugin.report.css import CSS
from bench_plugin.report.figures import Plot, arm_styles
from bench_plugin.report.markdown import render_report
from bench_plugin.report.page import Section
from bench_plugin.report.plots import classes_of, fairness_plot, latency_plot, streaming_plot, throughput_plot
from bench_plugin.report.stage_groups import group_rows, stage_groups
from bench_plugin.report.stage_series import read_trial_series
from bench_plugin.report.stage_series import section as stage_series_section
from bench_plugin.report.tables import Raw, conditions_section, errors_table, esc, table, when
from bench_plugin.report.telemetry import drawn_metrics
from bench_plugin.report.timeline import timeline_plot
from bench_plugin.results.plan import FILENAME as PLAN_FILE
from bench_plugin.results.plan import PlanDocument, read_plan
from bench_plugin.results.reasons import Reason
from bench_plugin.results.record import CampaignRecord
from bench_plugin.results.store import (
    MAX_POINTS,
    count_requests,
    open_store,
    read_failures,
    read_pod_events,
    read_record,
    read_requests,
    read_telemetry,
    read_trials,
)
from bench_plugin.results.summary import ArmComparison, Comparison, Summary, load_summary
from bench_plugin.results.words import Call

VERDICT_CSS: dict[str, str] = {Call.WORTH_IT: "good", Call.TRADE_OFF: "mixed", Call.LOSS: "bad",
                               Call.INCONCLUSIVE: "unsure"}
"""Badge class per verdict call (an inconclusive call, whatever its count of repeats, is ``unsure``)."""

BADGE_CSS = ".badge.unsure { background: #dde6f6; color: #1c3f73; border: 1px dashed #5a7bb0; }"
"""The colour of an inconclusive verdict: neither good nor bad, and dashed, for "not decided yet"."""

PERCENTILE_COLUMNS: tuple[tuple[str, str], ...] = (("P50 ms", "latency_p50_ms"), ("P95 ms", "latency_p95_ms"),
                                                   ("TTFT P95 ms", "ttft_p95_ms"), ("TPOT P95 ms", "tpot_p95_ms"),
                                                   ("ITL P95 ms", "itl_p95_ms"))
"""The percentile columns of the per-stage tables: header and ArmClassFigures field."""


def write_report(results_dir: Path, summary: Summary | None = None, max_points: int = MAX_POINTS) -> Path:
    """Write report.html and report.md into ``results_dir`` from its results.sqlite and its summary.

    ``summary`` is the campaign's typed summary; without it, ``results_dir``'s summary.json is read
    (results.summary.load_summary: a file of another schema version raises SummaryError, one line).
    ``max_points`` caps the successful-request points drawn per trial timeline (failed requests are
    all drawn). Returns the path of report.html.
    """
    if summary is None:
        summary_path = results_dir / "summary.json"
        if not summary_path.is_file():
            raise FileNotFoundError(f"no summary.json in {results_dir} (`bench-plugin report DIR` writes it "
                                    "from results.sqlite)")
        summary = load_summary(summary_path)
    plan = read_plan(results_dir / PLAN_FILE) if (results_dir / PLAN_FILE).is_file() else None
    with open_store(results_dir / "results.sqlite") as db:
        page = render_html(summary, db, max_points, plan=plan)
        record = read_record(db)
        arm_settings: dict[str, str] = {}
        trials = read_trials(db)
        for trial in trials:
            arm_settings.setdefault(trial.arm, trial.settings)
        stage_series = read_trial_series(db, trials)
    out = results_dir / "report.html"
    out.write_text(page, encoding="utf-8")
    text = render_report(summary, started_s=record.started_s, arm_settings=arm_settings, stage_series=stage_series,
                         plan=plan)
    (results_dir / "report.md").write_text(text, encoding="utf-8")
    return out


def render_html(summary: Summary, db: sqlite3.Connection, max_points: int = MAX_POINTS, *,
                plan: PlanDocument | None = None) -> str:
    """The report.html text for a summary and its open results store (and its capacity plan, where one was made)."""
    record = read_record(db)
    trials = read_trials(db)
    comparison = summary.comparison
    styles = arm_styles(summary.arms, summary.control)
    bases = Bases(summary)
    load_plots = [latency_plot(summary, cls, styles, comparison, bases=bases) for cls in classes_of(summary)]
    if "llm" in classes_of(summary):
        load_plots.append(streaming_plot(summary, styles, comparison, bases))
    share_plots = [p for p in (throughput_plot(summary, styles),
                               fairness_plot(comparison, styles, stage_names(summary))) if p is not None]
    timelines = []
    slo = summary.slo
    counts = count_requests(db)
    for trial in trials:
        requests = read_requests(db, trial.id, counts, max_points)
        start = trial.started_s or 0.0
        telemetry = read_telemetry(db, start, trial.ended_s or float("inf"), drawn_metrics())
        mine = next((t for t in summary.trials if t.id == trial.id), None)
        disruptions = [st.disruption for st in mine.stages if st.disruption is not None] if mine else []
        timelines.append(timeline_plot(trial, requests, telemetry, slo, read_pod_events(db, trial.id), disruptions))
    stage_series = read_trial_series(db, trials)
    opening = answer.html(summary, answer.answer_plot(summary, styles))
    cut = cut_short.html(summary)
    goes = latency_split.section(summary)
    disrupted = disruption.section(summary)
    series = stage_series_section(stage_series)
    sections = [
        *([("answer", "The answer", opening)] if opening else []),
        ("verdict", "Verdict", _verdict(summary, comparison, bases)),
        *([("envelope", "Operating envelope", envelope.html_section(summary, envelope.envelope_plot(summary, styles)))]
          if envelope.envelopes(summary) else []),
        *([("plan", "Capacity plan", plan_section.html_section(plan, summary.control))] if plan else []),
        ("load", "Latency vs offered load", _figures(load_plots)),
        ("sharing", "Throughput and fairness", _figures(share_plots) + _fairness_note(comparison)),
        ("stages", "Per-stage figures", _stage_tables(summary, bases)),
        *([_tree(goes)] if goes else []),
        *([("cut-short", "Stages cut short", cut)] if cut else []),
        ("timelines", "Trial timelines", _figures(timelines)),
        *([_tree(disrupted)] if disrupted else []),
        *([_tree(series)] if series else []),
        _tree(checks.section(summary)),
        ("errors", "Errors", errors_table(trials, read_failures(db))),
        ("conditions", "Conditions (everything needed to run it again)", conditions_section(summary, record, trials)),
    ]
    return _page(summary, record, sections, comparison)


def _tree(section: Section) -> tuple[str, str, str]:
    """A section of the document tree (report.page) as the page's (id, title, body)."""
    return section.id, section.title, page_html.body(section)


def stage_names(summary: Summary) -> list[str]:
    """``"0 low"``, ``"1 high"``...: each stage's index and name, from the first trial that ran it."""
    names: dict[int, str] = {}
    for trial in summary.trials:
        for stage in trial.stages:
            names.setdefault(stage.index, f"{stage.index} {stage.name or ''}".strip())
    return [names[i] for i in sorted(names)]


def _figures(plots: Sequence[Plot]) -> str:
    return "\n".join(
        f'<figure class="plot" id="{esc(p.id)}" data-plot="{esc(p.id)}">\n<h3>{esc(p.title)}</h3>\n{p.svg}\n'
        f"<figcaption>{esc(p.caption)}</figcaption>\n</figure>" for p in plots)


def _fairness_note(comparison: Comparison) -> str:
    if not compared(comparison):
        return f'<p class="note">Fairness per arm: {esc(NO_COMPARISON)}</p>'
    return ""


def _badge(call: str | None) -> Raw:
    css = VERDICT_CSS.get(call_kind(call) or "", "none")
    return Raw(f'<span class="badge {css}">{esc(call or Call.NO_VERDICT)}</span>')


def _call(comp: ArmComparison) -> str | None:
    return comp.verdict.call if comp.verdict else None


def _upto(comp: ArmComparison) -> int | None:
    return comp.verdict.worth_it_up_to_stage if comp.verdict else None


def _stage_tables(summary: Summary, bases: Bases) -> str:
    """Per load the arms ran (report.stage_groups), one table of every arm's and class's figures over
    repeats, each percentile with its count."""
    parts = []
    for group in stage_groups(summary):
        parts.append(f"<h3>{esc(group.heading(offered_text(group.offered, group.arrival)))}</h3>")
        rows: list[list[Any]] = []
        shown: list[Basis | None] = []
        for arm, index, name, fig in group_rows(summary, group):
            cells: list[Any] = [arm, name, spread_text(fig.throughput_rps, 2)]
            for _, key in PERCENTILE_COLUMNS:
                basis = bases.get(arm, index, name, key)
                text = value_text(getattr(fig, key), basis)
                shown.append(None if text == "-" else basis)  # the rule goes under a table that shows its mark
                cells.append(html_cell(text, basis))
            err = fig.error_rate.mean
            norm = "control" if arm == summary.control else spread_text(fig.normalised_throughput, 2, RATIO_UNIT)
            cells += ["-" if err is None else f"{100 * err:.1f}%", norm]
            rows.append(cells)
        parts.append(table(["arm", "class", "throughput req/s", *(h for h, _ in PERCENTILE_COLUMNS), "error rate",
                            "thr. vs control"], rows, "stages"))
        if any_low(shown):
            parts.append(f'<p class="low-rule">{esc(low_rule())}.</p>')
    if not parts:
        return '<p class="note">No stage has figures.</p>'
    return "\n".join(parts)


def _verdict(summary: Summary, comparison: Comparison, bases: Bases) -> str:
    if not compared(comparison):
        return f'<p class="note">{esc(NO_COMPARISON)} The figures below still compare the arms side by side.</p>'
    names = stage_names(summary)
    rows: list[list[Any]] = []
    for arm, comp in comparison.arms.items():
        upto = _upto(comp)
        rows.append([arm, comp.sharing,
                     Raw('<span class="badge none">control</span>') if comp.is_control else _badge(_call(comp)),
                     names[upto] if upto is not None and upto < len(names) else ("-" if upto is None else upto),
                     boundary_short(comp.boundary)])
    parts = [table(["arm", "sharing", "verdict", "worth it up to stage", "operating boundary"], rows, "verdict")]
    parts += [_arm_detail(arm, comp, names, bases, comparison.control) for arm, comp in comparison.arms.items()]
    return "\n".join(parts)


def _arm_detail(arm: str, comp: ArmComparison, names: list[str], bases: Bases, control: str | None) -> str:
    """The analysis's own sentences for one arm (why this verdict, where the boundary is) and its stages."""
    role = "control: the reference every other arm is compared with" if comp.is_control else (_call(comp) or "")
    parts = [f'<details open class="arm"><summary>{esc(arm)} ({esc(role)})</summary>']
    text = comp.verdict.text if comp.verdict and comp.verdict.text and not comp.is_control else ""
    if text:
        parts.append(f"<p>{esc(text)}</p>")
    boundary = boundary_text(comp.boundary)
    if boundary.lower().rstrip(".") not in text.lower():  # the analysis's verdict often quotes it already
        parts.append(f"<p><b>Operating boundary.</b> {esc(boundary)}</p>")
    if comp.stages and not comp.is_control:
        parts.append(_arm_stages(arm, comp, names, bases, control))
    return "\n".join([*parts, "</details>"])


def _arm_stages(arm: str, comp: ArmComparison, names: list[str], bases: Bases, control: str | None) -> str:
    rows = []
    shown: list[Basis | None] = []
    for st in comp.stages:
        lines = []
        for cls, figs in st.classes.items():
            if figs.slowdown_p95 is None:
                continue
            basis = _slowdown_basis(bases.get(arm, st.index, cls, "latency_p95_ms"),
                                    bases.get(control, st.index, cls, "latency_p95_ms") if control else None)
            shown.append(basis)
            lines.append(html_cell(f"{cls} {significance_text(figs.slowdown_p95, 2, RATIO_UNIT)}", basis))
        rows.append([names[st.index] if st.index < len(names) else st.index, offered_text(st.offered),
                     significance_text(st.goodput_per_device_ratio, 2, RATIO_UNIT), spread_text(st.fairness, 2),
                     spread_text(st.consolidation_gain, 2),
                     Raw(f'<div class="slowdown">{"<br>".join(lines)}</div>' if lines else "-"), _badge(st.verdict),
                     _reasons(st.reasons)])
    body = table(["stage", "offered", "goodput/device vs control", "fairness", "consolidation gain",
                  "P95 slowdown vs control", "verdict", "reasons"], rows)
    if any_low(shown):
        body += f'\n<p class="low-rule">{esc(low_rule())}. A slowdown\'s count is its arm\'s, then the control\'s.</p>'
    return body


def _slowdown_basis(mine: Basis | None, theirs: Basis | None) -> Basis | None:
    """What a P95 ratio to the control rests on: the arm's runs, then the control's (low if either is)."""
    if mine is None or theirs is None:
        return mine
    return Basis(mine.label, mine.q, mine.runs, mine.notes + theirs.notes, against=theirs.runs)


def _reasons(reasons: list[Reason]) -> Raw:
    """A stage's reasons as a short bulleted list (a list reason's items nested under it)."""
    if not reasons:
        return Raw("-")
    items = []
    for why in reasons:
        sub = "<ul>" + "".join(f"<li>{esc(item)}</li>" for item in why.items) + "</ul>" if why.items else ""
        items.append(f"<li>{esc(why.text)}{':' if why.items else ''}{sub}</li>")
    return Raw('<ul class="reasons">' + "".join(items) + "</ul>")


def _verdict_fact(summary: Summary, comparison: Comparison) -> str:
    """The verdict of every sharing arm in a few words, for the header."""
    if not compared(comparison):
        return "not available (no control arm to compare with)"
    names = stage_names(summary)
    calls = []
    for arm, comp in comparison.arms.items():
        if comp.is_control:
            continue
        upto = _upto(comp)
        where = "" if upto is None else f" up to stage {names[upto] if upto < len(names) else upto}"
        calls.append(f"{arm}: {_call(comp) or Call.NO_VERDICT}{where}")
    return "; ".join(calls) or "no sharing arm"


def _page(summary: Summary, record: CampaignRecord, sections: list[tuple[str, str, str]],
          comparison: Comparison) -> str:
    scenario = summary.scenario
    status = summary.status
    state = status.status
    facts = [("scenario", f"{scenario.name} ({scenario.path})"),
             ("status", status_text(summary, ": {}")),
             ("date", when(summary, record.started_s)), ("control arm", summary.control or "none"),
             ("arms", ", ".join(summary.arms)), ("repeats", _repeats(summary)),
             ("verdict", _verdict_fact(summary, comparison))]
    header = "".join(f"<div><dt>{esc(k)}</dt><dd>{esc(v)}</dd></div>" for k, v in facts)
    nav = " · ".join(f'<a href="#{sid}">{esc(title.split(" (")[0])}</a>' for sid, title, _ in sections)
    body = "\n".join(f'<section id="{sid}">\n<h2>{esc(title)}</h2>\n{guide.html(sid)}{content}\n</section>'
                     for sid, title, content in sections)
    title = f"GPU sharing report: {scenario.name}"
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{esc(title)}</title>
<style>{CSS}{BADGE_CSS}
</style>
</head>
<body>
<main>
<header>
<h1>{esc(title)}</h1>
<dl class="facts status-{esc(state)}">{header}</dl>
<nav>{nav}</nav>
</header>
{body}
<footer>Written by bench_plugin.report from results.sqlite and summary.json ({esc(summary.schema_)}).
Figures are means over repeats with 95% confidence intervals (Student t): mean ± half-width for values and
differences; for ratios to the control (1.71x [0.90, 3.20]), the geometric mean and its interval [lo, hi],
computed on the log scale. An arm with fewer than 2 paired repeats at a stage is inconclusive there. Latency is
measured from each request's intended send time.</footer>
</main>
</body>
</html>
"""


def _repeats(summary: Summary) -> str:
    counts: dict[str, int] = {}
    for t in summary.trials:
        counts[t.arm] = counts.get(t.arm, 0) + 1
    return ", ".join(f"{arm} {n}" for arm, n in counts.items()) or "none ran"
