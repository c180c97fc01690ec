"""report.html and report.md: the campaign for people, one page written twice.

Usage::

    from bench_plugin.report.html import write_report
    write_report(Path("results/day19-..."))   # -> results/day19-.../report.html (and report.md)

or ``python -m bench_plugin.report RESULTS_DIR``. The page is built once (report/document.py) from the summary,
the capacity plan and what results.sqlite adds (each trial's timeline, drawn here, its settings and servers, the
failed requests, the per-stage series from Prometheus), and written as report.html (report/page_html.py: one
self-contained file that opens offline) and as report.md (report/page_markdown.py: the same without the pictures).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from bench_plugin.report import document, page_html, page_markdown
from bench_plugin.report.stage_series import read_trial_series
from bench_plugin.report.telemetry import drawn_metrics
from bench_plugin.report.timeline import timeline_plot
from bench_plugin.results.plan import FILENAME as PLAN_FILE
from bench_plugin.results.plan import PlanDocument, read_plan
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
from bench_plugin.results.summary import Summary, load_summary


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
        page = document.build(summary, stored(summary, db, max_points), plan, draw=True)
    out = results_dir / "report.html"
    out.write_text(page_html.page(page), encoding="utf-8")
    (results_dir / "report.md").write_text(page_markdown.page(page), encoding="utf-8")
    return out


def stored(summary: Summary, db: sqlite3.Connection, max_points: int = MAX_POINTS) -> document.Stored:
    """What an open results store adds to ``summary``'s page, each trial's timeline drawn."""
    record = read_record(db)
    trials = read_trials(db)
    timelines = []
    counts = count_requests(db)
    for trial in trials:
        requests = read_requests(db, trial.id, counts, max_points)
        start = trial.started_s or 0.0
        telemetry = read_telemetry(db, start, trial.ended_s or float("inf"), drawn_metrics())
        mine = next((t for t in summary.trials if t.id == trial.id), None)
        disruptions = [st.disruption for st in mine.stages if st.disruption is not None] if mine else []
        timelines.append(timeline_plot(trial, requests, telemetry, summary.slo, read_pod_events(db, trial.id),
                                       disruptions))
    return document.Stored(record=record, trials=trials, failures=read_failures(db),
                           stage_series=read_trial_series(db, trials), timelines=timelines)


def render_html(summary: Summary, db: sqlite3.Connection, max_points: int = MAX_POINTS, *,
                plan: PlanDocument | None = None) -> str:
    """The report.html text for a summary and its open results store (and its capacity plan, where one was made)."""
    return page_html.page(document.build(summary, stored(summary, db, max_points), plan, draw=True))
