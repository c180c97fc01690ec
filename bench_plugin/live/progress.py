"""Progress in the terminal: where a headless campaign is and how its current stage looks, every few seconds.

A long campaign (arms x repeats x stages, servers started per segment) otherwise prints nothing between
its start and its end. Every PROGRESS_S seconds a headless master or local run writes one line to
stderr from the live view (bench_plugin.live.view): the trial (arm, repeat), the stage and the seconds left
in it, and each class's P95 over the stage's last WINDOW_S seconds (fewer early in the stage: the
line says how many; TTFT and TPOT P95 for the LLM) with its SLO state, and once a trial has ended, when
the campaign should end. ``--only-summary`` quiets Locust's own periodic tables, not this line: it is
the campaign's position.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import gevent

from bench_plugin.live.view import ClassLive, LiveSnapshot
from bench_plugin.report.clock import clock
from bench_plugin.results.words import CampaignState

PROGRESS_S = 5.0
"""Seconds between two progress lines."""


def progress_line(snapshot: LiveSnapshot) -> str | None:
    """One line saying where the campaign is and how the last window looks; None while nothing runs."""
    position = snapshot.position
    if snapshot.status != CampaignState.RUNNING or not position:
        return None
    where = f"trial {position['trial']}/{position['of']} ({position['arm']}, repeat {position['repeat']})"
    if position.get("stage"):
        where += f", {position['stage']}"
        if position.get("stage_left_s") is not None:
            where += f", {position['stage_left_s']:.0f} s left"
    if position.get("eta_end_s") is not None:
        done = position.get("trials_done", 0)
        where += (f"; campaign ends about {clock(position['eta_end_s'], date=False)} "
                  f"(from {done} trial{'s' if done != 1 else ''})")
    figures = "; ".join(_class(c) for c in snapshot.classes if c.window.requests)
    span = snapshot.window_end_s - snapshot.window_start_s
    return f"bench_plugin: {where}" + (f"; last {span:.0f} s: {figures}" if figures else "")


def _class(live: ClassLive) -> str:
    window = live.window
    parts = [f"P95 {window.p95_ms:.0f} ms" if window.p95_ms is not None else "no success"]
    if window.ttft_p95_ms is not None:
        parts.append(f"TTFT {window.ttft_p95_ms:.0f}")
    if window.tpot_p95_ms is not None:
        parts.append(f"TPOT {window.tpot_p95_ms:.0f}")
    if window.errors:
        parts.append(f"{window.errors} errors")
    return f"{live.name} {', '.join(parts)} (SLO {window.slo})"


def report_progress(snapshot: Callable[[], LiveSnapshot], write: Callable[[str], object] = sys.stderr.write,
                    every_s: float = PROGRESS_S) -> None:
    """Write a progress line every ``every_s`` seconds, for ever (run it in a greenlet; kill it to stop)."""
    while True:
        gevent.sleep(every_s)
        line = progress_line(snapshot())
        if line:
            write(line + "\n")
