"""The report as one page: its title, its facts and its sections, in one order, built once.

:func:`build` makes the page from the typed summary, the campaign's capacity plan where there is one, and what the
results store adds (:class:`Stored`: the campaign record, each trial's settings and servers, the failed requests,
the per-stage series from Prometheus and each trial's timeline, drawn); with ``draw`` it draws the plots too.
report/page_html.py writes that one page as report.html and report/page_markdown.py as report.md, so the two say
the same things in the same order; report.md leaves the pictures out, and a section of pictures alone with them.

The order is the seed's "how to read results": the answer in short, the verdict per arm, the operating envelope
and the capacity plan (an envelope campaign's), latency against offered load, throughput and fairness, the
per-stage figures and the stages cut short, where the added latency goes, the trials' timelines, the pods'
scheduling, the disruptions, the per-stage GPU series, the measurement checks, the errors, and every condition of
the run. A new section is one module with a ``section`` function, and a line here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bench_plugin.report import (
    answer,
    checks,
    conditions,
    cut_short,
    disruption,
    envelope,
    errors,
    latency_split,
    scheduling,
    stage_tables,
    verdict,
)
from bench_plugin.report import plan as plan_section
from bench_plugin.report.comparison import NO_COMPARISON, compared, status_text
from bench_plugin.report.page import Block, Figure, Page, Paragraph, Section
from bench_plugin.report.stage_series import TrialSeries
from bench_plugin.report.stage_series import section as series_section
from bench_plugin.report.tables import when
from bench_plugin.results.plan import PlanDocument
from bench_plugin.results.record import CampaignRecord
from bench_plugin.results.store import FailureGroup, TrialRecord
from bench_plugin.results.summary import Summary
from bench_plugin.results.words import Call

if TYPE_CHECKING:
    from bench_plugin.report.figures import Plot

FOOTER = ("Figures are means over repeats with 95% confidence intervals (Student t): mean ± half-width for values "
          "and differences; for ratios to the control (1.71x [0.90, 3.20]), the geometric mean and its interval "
          "[lo, hi], computed on the log scale. An arm with fewer than 2 paired repeats at a stage is inconclusive "
          "there. Latency is measured from each request's intended send time.")
"""How to read every figure of the page, said once at its end."""


@dataclass(frozen=True)
class Stored:
    """What the results store adds to the summary (a page from the summary alone has none of it)."""

    record: CampaignRecord | None = None
    trials: Sequence[TrialRecord] = ()
    failures: Sequence[FailureGroup] | None = None
    """The failed requests, grouped (None: not read, and the page has no "Errors" section)."""
    stage_series: Sequence[TrialSeries] = ()
    timelines: Sequence[Plot] = ()
    """Each trial's timeline, drawn (report.timeline)."""


def _repeats(summary: Summary) -> str:
    counts: dict[str, int] = {}
    for t in summary.trials:
        counts[t.arm] = counts.get(t.arm, 0) + 1
    return ", ".join(f"{arm} {n}" for arm, n in counts.items()) or "none ran"


def _verdicts(summary: Summary) -> str:
    """The verdict of every sharing arm in a few words."""
    comparison = summary.comparison
    if not compared(comparison):
        return "not available (no control arm to compare with)"
    names = verdict.stage_labels(summary)
    calls = []
    for arm, comp in comparison.arms.items():
        if comp.is_control:
            continue
        upto = verdict.upto(comp, names)
        where = "" if upto is None else f" up to stage {upto}"
        calls.append(f"{arm}: {(comp.verdict.call if comp.verdict else None) or Call.NO_VERDICT}{where}")
    return "; ".join(calls) or "no sharing arm"


def facts(summary: Summary, record: CampaignRecord | None) -> tuple[tuple[str, str], ...]:
    """The facts under the title: scenario, status, date, control, arms, repeats and the verdicts in short."""
    scenario = summary.scenario
    return (("scenario", f"{scenario.name} ({scenario.path})"), ("status", status_text(summary, ": {}")),
            ("date", when(summary, record.started_s if record else None)), ("control arm", summary.control or "none"),
            ("arms", ", ".join(summary.arms)), ("repeats", _repeats(summary)), ("verdict", _verdicts(summary)))


@dataclass(frozen=True)
class _Drawn:
    """The plots of the page (none where it is not drawn)."""

    answer: Plot | None = None
    envelope: Plot | None = None
    load: Sequence[Plot] = ()
    sharing: Sequence[Plot] = ()


def _draw(summary: Summary) -> _Drawn:
    # matplotlib: imported only for a page with pictures
    from bench_plugin.report.basis import Bases
    from bench_plugin.report.figures import arm_styles
    from bench_plugin.report.plots import (
        classes_of,
        fairness_plot,
        latency_plot,
        streaming_plot,
        throughput_plot,
    )

    comparison = summary.comparison
    styles = arm_styles(summary.arms, summary.control)
    bases = Bases(summary)
    load = [latency_plot(summary, cls, styles, comparison, bases=bases) for cls in classes_of(summary)]
    if "llm" in classes_of(summary):
        load.append(streaming_plot(summary, styles, comparison, bases))
    sharing = [p for p in (throughput_plot(summary, styles),
                           fairness_plot(comparison, styles, verdict.stage_labels(summary))) if p is not None]
    return _Drawn(answer.answer_plot(summary, styles), envelope.envelope_plot(summary, styles), load, sharing)


def _figures(section_id: str, title: str, plots: Sequence[Plot], *more: Block) -> Section | None:
    blocks = (*(Figure.of(p) for p in plots), *more)
    return Section(section_id, title, blocks) if blocks else None


def build(summary: Summary, stored: Stored | None = None, plan: PlanDocument | None = None, *,
          draw: bool = False) -> Page:
    """The page of ``summary`` (the module's order), with what the store adds where it was read; ``draw``: with
    its plots (report.html's)."""
    stored = stored or Stored()
    drawn = _draw(summary) if draw else _Drawn()
    comparison = summary.comparison
    unfair = () if compared(comparison) else (Paragraph((f"Fairness per arm: {NO_COMPARISON}",), "note"),)
    found = [
        answer.section(summary, drawn.answer),
        verdict.section(summary, comparison),
        envelope.section(summary, drawn.envelope),
        plan_section.section(plan, summary.control) if plan is not None else None,
        _figures("load", "Latency vs offered load", drawn.load),
        _figures("sharing", "Throughput and fairness", drawn.sharing, *unfair),
        stage_tables.section(summary),
        cut_short.section(summary),
        latency_split.section(summary, figures=draw),
        _figures("timelines", "Trial timelines", stored.timelines),
        scheduling.section(summary),
        disruption.section(summary),
        series_section(stored.stage_series),
        checks.section(summary),
        errors.section(stored.trials, stored.failures) if stored.failures is not None else None,
        conditions.section(summary, stored.record, stored.trials),
    ]
    return Page(title=f"GPU sharing report: {summary.scenario.name}", facts=facts(summary, stored.record),
                sections=tuple(s for s in found if s is not None), footer=FOOTER, state=summary.status.status,
                schema=summary.schema_)
