"""Outputs: every file derived from a campaign's results.sqlite (summary.json, summary.md, report.html, report.md).

One path from the store to the files, for the end of a campaign and for ``bench-plugin report DIR``:
the store is read (results.store, version checked), analysed into the typed summary
(analysis.summary), saved (results.summary), and rendered (report.markdown, report.html).
"""

from __future__ import annotations

from pathlib import Path

from bench_plugin.analysis.summary import build_summary
from bench_plugin.results.plan import PlanDocument
from bench_plugin.results.store import open_campaign
from bench_plugin.results.summary import Summary, save_summary

STORE = "results.sqlite"
SUMMARY = "summary.json"


def summarise(results_dir: Path) -> Summary:
    """The typed summary of the campaign stored in ``results_dir`` (nothing written)."""
    with open_campaign(results_dir / STORE) as reader:
        return build_summary(reader)


def write_summaries(results_dir: Path, summary: Summary | None = None) -> Summary:
    """Write summary.json and summary.md into ``results_dir`` (of ``summary``, when already computed from its
    store); return the summary."""
    from bench_plugin.report.markdown import render_summary
    summary = summary if summary is not None else summarise(results_dir)
    save_summary(summary, results_dir / SUMMARY)
    (results_dir / "summary.md").write_text(render_summary(summary, replan(results_dir, summary)), encoding="utf-8")
    return summary


def replan(results_dir: Path, summary: Summary) -> PlanDocument | None:
    """``results_dir``'s capacity plan (plan.json, which ``bench-plugin plan`` writes), planned again on
    ``summary`` for the same traffics, headroom and GPU cost, and rewritten; None where there is none.

    A plan is derived from the envelopes as the summary is: a resumed campaign's store has moved on since
    it was written, and the plan shown beside the new summary must be of it."""
    from bench_plugin.analysis.packing import capacity_plans
    from bench_plugin.results.plan import FILENAME, read_plan, write_plan

    path = results_dir / FILENAME
    if not path.is_file():
        return None
    before = read_plan(path)
    plan = capacity_plans(summary, before.campaign, [dict(p.traffic) for p in before.plans], before.headroom,
                          before.gpu_cost)
    write_plan(path, plan)
    return plan


DERIVED = ("summary.json", "summary.md", "report.html", "report.md")
"""The files written from the store: each says what the store held when it was written."""


def write_outputs(results_dir: Path, summary: Summary | None = None, *, report: bool = True) -> Summary:
    """Write every derived file of ``results_dir`` (report.html and report.md too unless ``report`` is
    False); the summary they show (``summary``, when already computed from the store, is not computed again).

    Where writing fails, no derived file is left beside the store, and the error goes on: one left from an
    earlier write (a resumed campaign's last slice) would show a campaign the store has moved past, and
    one half written, part of this one. report.html and report.md are removed as well when ``report`` is
    False: they would show the store as it was before.
    """
    try:
        summary = write_summaries(results_dir, summary)
        if report:
            from bench_plugin.report.html import write_report

            write_report(results_dir, summary)
    except BaseException:
        remove_outputs(results_dir)
        raise
    if not report:
        remove_outputs(results_dir, DERIVED[2:])
    return summary


def remove_outputs(results_dir: Path, names: tuple[str, ...] = DERIVED) -> list[str]:
    """Remove ``results_dir``'s derived files ``names`` (all by default); the names it removed."""
    removed = []
    for name in names:
        path = results_dir / name
        if path.is_file():
            path.unlink()
            removed.append(name)
    return removed
