"""The "Per-stage figures" section: per load the arms ran (report.stage_groups), one table of every arm's and
class's figures over repeats.

Each row is an arm and a class: its throughput, its percentiles (each with its sample count per repeat, one
that rests on too few samples to be bounded muted and marked, report.basis, with the rule under its table), its
error rate and its throughput against the control's. summary.md shows the same tables, without the section.
"""

from __future__ import annotations

from bench_plugin.report.basis import FIGURES, Bases, Basis, any_low, low_rule, value_text
from bench_plugin.report.comparison import RATIO_UNIT, offered_text, spread_text
from bench_plugin.report.page import Block, Heading, Inline, Paragraph, Pct, Section, table
from bench_plugin.report.stage_groups import StageGroup, group_rows, stage_groups
from bench_plugin.results.summary import Summary

SPREAD_NOTE = ("Figures are mean ± 95% CI half-width over repeats (Student t; none with one repeat). Ratios to "
               "the control (1.71x [0.90, 3.20]) are geometric means with their 95% CI [lo, hi], computed on the "
               "log scale, so it is asymmetric and never reaches zero.")
"""How to read a figure's interval, said once above the tables."""

HEADERS = ("arm", "class", "throughput req/s", *(label + " ms" for _, _, label in FIGURES.values()), "error rate",
           "thr. vs control")
"""The columns: the percentiles are report.basis's FIGURES, in its order."""


def _table(summary: Summary, group: StageGroup, bases: Bases) -> list[Block]:
    """One load's table, and the rule under it where it shows a low percentile's mark."""
    rows: list[list[Inline]] = []
    shown: list[Basis | None] = []
    for arm, index, name, fig in group_rows(summary, group):
        cells: list[Inline] = [arm, name, spread_text(fig.throughput_rps, 2)]
        for key in FIGURES:
            basis = bases.get(arm, index, name, key)
            text = value_text(getattr(fig, key), basis)
            shown.append(None if text == "-" else basis)  # the rule goes under a table that shows its mark
            cells.append(Pct(text, basis))
        err = fig.error_rate.mean
        norm = "control" if arm == summary.control else spread_text(fig.normalised_throughput, 2, RATIO_UNIT)
        rows.append([*cells, "-" if err is None else f"{100 * err:.1f}%", norm])
    blocks: list[Block] = [table(HEADERS, rows, "stages")]
    if any_low(shown):
        blocks.append(Paragraph((low_rule() + ".",), "low-rule"))
    return blocks


def tables(summary: Summary) -> list[Block]:
    """A heading and a table per load the arms ran."""
    bases = Bases(summary)
    blocks: list[Block] = []
    for group in stage_groups(summary):
        blocks += [Heading(group.heading(offered_text(group.offered, group.arrival))), *_table(summary, group, bases)]
    return blocks


def section(summary: Summary) -> Section:
    """The section: how to read a figure's interval, then the tables (a note where no stage has figures)."""
    found = tables(summary)
    note = Paragraph((f"{SPREAD_NOTE} Latency is from each request's intended send time.",))
    return Section("stages", "Per-stage figures",
                   (note, *found) if found else (note, Paragraph(("No stage has figures.",), "note")))
