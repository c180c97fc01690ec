"""Stages cut short: what a stage measured before a stop, a lost load generator or a failure ended it.

Such a stage (``interrupted``: the run was stopped in it; ``invalid``: its load was not the stated one,
a load generator lost or a server gone mid-stage; ``running``: the process died in it) says nothing
about its load, so the figures over repeats leave it out. What it measured is still shown, from its
own trial's figures and marked as cut short, so a stopped campaign's last minutes are not lost from
the page. The terminal answer, summary.md, report.md and report.html read these rows.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from bench_plugin.analysis.boundary import format_offered
from bench_plugin.report.page import Item, Paragraph, Section, table
from bench_plugin.results.summary import ClassStats, Percentiles, StageSummary, Summary, TrialSummary
from bench_plugin.results.words import JUDGED_STATUSES

HEADINGS = ("trial", "arm", "repeat", "stage", "status", "ran", "class", "requests", "errors",
            "throughput req/s", "P50 ms", "P95 ms", "TTFT P95 ms", "TPOT P95 ms")
"""The columns of the cut-short table."""

NOTE = ("Not counted in any figure over repeats, nor in a verdict or a boundary: a stage cut short says nothing "
        "about its load. Its figures are its own trial's, over the time it ran.")


@dataclass(frozen=True)
class CutShort:
    """One stage of one trial that did not run its course, with what it measured."""

    trial: TrialSummary
    stage: StageSummary

    @property
    def ran(self) -> str:
        """How long it ran of its plan: ``5.6 s of 10 s``."""
        ran = self.stage.duration_s
        planned = self.stage.planned_s
        if ran is None:
            return "-"
        return f"{ran:.1f} s" + (f" of {planned:g} s" if planned is not None else "")

    @property
    def label(self) -> str:
        """``1 high``: the stage's index and name."""
        return f"{self.stage.index} {self.stage.name or ''}".strip()

    @property
    def load(self) -> str:
        """Its offered load in words."""
        return format_offered(self.stage.offered, self.stage.arrival)


def cut_short(summary: Summary, arm: str | None = None) -> list[CutShort]:
    """Every stage (of ``arm``'s trials, or of all) that was cut short and measured some request, in run order."""
    return [CutShort(trial, stage) for trial in summary.trials if arm is None or trial.arm == arm
            for stage in trial.stages
            if stage.status not in JUDGED_STATUSES and any(c.requests for c in stage.classes.values())]


def class_cells(stats: ClassStats) -> list[str]:
    """requests, errors, throughput, P50, P95, TTFT P95, TPOT P95 of one class."""
    def ms(values: Percentiles | None, key: str) -> str:
        value = (values or {}).get(key)
        return "-" if value is None else f"{value:.1f}"

    return [str(stats.requests), str(stats.errors), f"{stats.throughput_rps:.2f}", ms(stats.latency_ms, "p50"),
            ms(stats.latency_ms, "p95"), ms(stats.ttft_ms, "p95"), ms(stats.tpot_ms, "p95")]


def _rows(summary: Summary) -> Iterator[list[str]]:
    for cut in cut_short(summary):
        status = cut.stage.status + (f" ({cut.stage.reason})" if cut.stage.reason else "")
        for name, stats in cut.stage.classes.items():
            yield [str(cut.trial.id), cut.trial.arm, str(cut.trial.repeat), f"{cut.label}: {cut.load}", status,
                   cut.ran, name, *class_cells(stats)]


def section(summary: Summary) -> Section | None:
    """The section (None when no stage was cut short): the note, then one row per stage and class."""
    rows = list(_rows(summary))
    if not rows:
        return None
    return Section("cut-short", "Stages cut short", (Paragraph((NOTE,), "note"), table(HEADINGS, rows)))


def terminal(summary: Summary, arm: str) -> list[Item]:
    """One bullet per stage of ``arm`` cut short, for the terminal answer."""
    out = []
    for cut in cut_short(summary, arm):
        figures = "; ".join(f"{name} {stats.requests} requests" + "".join(
            f", {label} {value:.0f} ms" for label, value in (("P95", (stats.latency_ms or {}).get("p95")),
                                                           ("TTFT P95", (stats.ttft_ms or {}).get("p95")),
                                                           ("TPOT P95", (stats.tpot_ms or {}).get("p95")))
            if value is not None) for name, stats in cut.stage.classes.items())
        load = ", ".join(f"{name} {rate:.3g}" for name, rate in cut.stage.offered.items())
        out.append(Item((f"stage {cut.stage.index} ({load} req/s), repeat {cut.trial.repeat}: CUT SHORT "
                         f"({cut.stage.status}) after {cut.ran}, not counted: {figures}",)))
    return out
