"""Markdown for terminals and pull requests: summary.md (the figures) and report.md (the answer first).

summary.md lists the trials (and, where the cluster's pod events were recorded, their scheduling), then per
stage, arm and class the figures over repeats, then the stages cut short; an envelope campaign's envelope and
capacity plan lead. report.md is the report's one page (report/document.py) without its pictures, the same
page report.html shows. Both read the typed summary (bench_plugin.results.summary.Summary), and report.md what
the results store adds where it was read.
"""

from __future__ import annotations

from bench_plugin.report import (
    cut_short,
    document,
    envelope,
    page_markdown,
    scheduling,
    stage_tables,
)
from bench_plugin.report import plan as plan_section
from bench_plugin.report.comparison import status_text
from bench_plugin.report.generators import generators_line
from bench_plugin.report.warm_start import warm_start_line
from bench_plugin.results.facts import BackendFacts
from bench_plugin.results.plan import PlanDocument
from bench_plugin.results.summary import Summary


def _trials_table(summary: Summary) -> list[str]:
    lines = ["| trial | arm | repeat | status | stages (status) |", "|---|---|---|---|---|"]
    for t in summary.trials:
        stages = ", ".join(f"{s.index}:{s.status}" for s in t.stages)
        reason = f" ({t.reason})" if t.reason else ""
        lines.append(f"| {t.id} | {t.arm} | {t.repeat} | {t.status}{reason} | {stages} |")
    return lines


def _overrides(summary: Summary) -> dict[str, str | int | float]:
    return summary.overrides.given() if summary.overrides else {}


def render_summary(summary: Summary, plan: PlanDocument | None = None) -> str:
    """The markdown text of summary.md; an envelope campaign's envelope and ``plan`` (the campaign's
    ``bench-plugin plan`` output, where there is one) lead, before the trials and the per-load tables."""
    scenario = summary.scenario
    lines = [
        f"# Campaign {scenario.name}",
        "",
        f"- status: {status_text(summary)}",
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
    lines += ["", f"{stage_tables.SPREAD_NOTE} "
              "Latency is measured from each request's intended send time; percentiles come from exact samples. "
              "Throughput counts successful requests over the time it took to serve the stage's requests "
              "(at least the stage's duration); throughput vs control is the per-repeat ratio to the control "
              "arm at the same stage (in a search: at the same load, or an exclusive control's class alone at "
              "the same rate).", ""]
    # what an envelope campaign is read for, before the per-load tables
    lines += page_markdown.section(envelope.section(summary), guided=False)
    if plan is not None:
        lines += page_markdown.section(plan_section.section(plan, summary.control), guided=False)
    lines += ["## Trials", "", *_trials_table(summary), ""]
    lines += page_markdown.section(scheduling.section(summary), guided=False)
    lines += page_markdown.blocks(stage_tables.tables(summary), 1)
    lines += page_markdown.section(cut_short.section(summary), guided=False)
    return "\n".join(lines)


def render_report(summary: Summary, stored: document.Stored | None = None,
                  plan: PlanDocument | None = None) -> str:
    """The markdown text of report.md: the page (report/document.py) without its pictures; ``stored`` is what the
    results store adds (report.html.stored), ``plan`` the campaign's capacity plan (both optional)."""
    return page_markdown.page(document.build(summary, stored, plan))
