"""One trial on one clock: scheduling, readiness, stages, failures, latency and GPU telemetry.

The seed's reading rule: put scheduling results and service results on one timeline; first why a
Pod was placed, then when the model became Ready, and last whether requests succeeded. So a trial's
timeline stacks panels over a shared x axis (seconds from the trial start), top to bottom:

0. pods, where the cluster's pod events were recorded (the Kubernetes backend): per pod its Pending
   time, scheduled -> Ready, Ready, and each FailedScheduling, preemption, eviction and deletion
   (pod_panel.py); the axis then reaches the last of them (a deletion when the arm was restored);
1. placement and readiness: per class, where it was placed when the arm was applied, the loading
   time until it answered its first real request (Running is not Ready), then its serving span;
2. stages: each stage's span, coloured by how it ended (aborted = rolled back);
3. failed requests: one tick per failed request at its intended send time, per class;
4. latency: each successful request's end-to-end latency at its intended send time (log scale), thinned
   evenly in time, with each class's P95 SLO dashed;
5. GPU telemetry, when results.sqlite has a ``telemetry`` table with rows in the trial's window:
   utilisation, VRAM and more, per device and per process (telemetry.py). Otherwise no panel.

Dash-dot vertical lines through every panel mark each time the arm was applied (a segment start). Where a
stage was disrupted on the local backend, dotted lines mark its steps (the old server's kill, refuse, stop
and stopped; the new one's spawn and ready; the front's route to it), and in the placement panel the class's
row shows, shaded, the time it had no server (refuse or kill to route) and the new server's loading.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.patches import Patch

from bench_plugin.report import pod_panel
from bench_plugin.report.figures import (
    SLO_STYLE,
    STAGE_STATUS_COLOURS,
    STAGE_STATUS_LABELS,
    DataMarks,
    Layout,
    Plot,
    class_colour,
    figure_svg,
    grid,
    log_y,
    new_figure,
    style,
)
from bench_plugin.report.placement import where_label
from bench_plugin.report.telemetry import draw_panel, panels_with_data, process_names
from bench_plugin.results.pod_events import PodEvent
from bench_plugin.results.store import ClassRequests, TelemetrySeries, TrialRecord
from bench_plugin.results.summary import StageDisruption
from bench_plugin.results.words import StageStatus

TICK_RESOLUTION = 5000
"""Failed-request ticks closer than 1/TICK_RESOLUTION of the trial are drawn once: below a pixel apart
at page width, so every failed request still has its tick while a storm of timeouts stays a small file."""

LAYOUT = Layout(left=1.5, right=2.55, top=0.3, bottom=0.55, hgap=0.4)
"""Wide left margin for the per-class row labels, right margin for each panel's legend."""

SLOs = dict[str, dict[str, float | None] | None]
"""Class -> its SLOs (``p95_ms``...), as in the summary (results.summary.Summary.slo)."""

_APPLIED: dict[str, Any] = {"color": "#555555", "linestyle": "-.", "linewidth": 1.0}
_RIGHT: dict[str, Any] = {"loc": "center left", "bbox_to_anchor": (1.005, 0.5), "frameon": False}
STEP_COLOURS = {"kill": "#b22222", "refuse": "#b22222", "stop": "#777777", "stopped": "#777777",
                "spawn": "#777777", "ready": "#2e8b57", "route": "#2e8b57"}
"""The disruption steps drawn (sharing/restart.py), each a dotted line of its colour."""
NO_SERVER = "#b22222"


def _classes(trial: TrialRecord, requests: dict[str, ClassRequests]) -> list[str]:
    names: list[str] = []
    for seg in trial.segments:
        names += [c for c in seg.classes if c not in names]
    return names + [c for c in requests if c not in names]


def _class_rows(ax: Axes, classes: list[str], labels: list[str] | None = None) -> None:
    ax.set_yticks(range(len(classes)), labels or classes)
    for tick, name in zip(ax.get_yticklabels(), classes, strict=True):
        tick.set_color(class_colour(name))
    ax.set_ylim(len(classes) - 0.4, -0.7)
    ax.grid(axis="y", visible=False)


def _placement_panel(ax: Axes, trial: TrialRecord, t0: float, end: float, classes: list[str],
                     marks: DataMarks) -> None:
    for seg in trial.segments:
        applied = (seg.applied_s or t0) - t0
        released = (seg.released_s - t0) if seg.released_s else end
        ax.annotate(f"arm applied (segment {seg.index})", xy=(applied, 1), xycoords=("data", "axes fraction"),
                    xytext=(3, -2), textcoords="offset points", fontsize=7.5, color="#555555", va="top")
        for cls in seg.classes:
            row = classes.index(cls)
            colour = class_colour(cls)
            ready_s = seg.ready.get(cls)
            ax.annotate(f"{cls} on {where_label(seg.placement.get(cls))}", xy=(applied, row), xytext=(3, 5),
                        textcoords="offset points", fontsize=8, va="bottom", color=colour)
            if ready_s is None:
                ax.plot([applied, released], [row, row], color=colour, linestyle=":", linewidth=1.5)
                ax.annotate("never ready", xy=(released, row), xytext=(-3, 5), textcoords="offset points",
                            ha="right", fontsize=8, color="#b22222")
                continue
            ready = ready_s - t0
            marks.tag(ax.plot([applied, ready], [row, row], color=colour, linewidth=1.2, alpha=0.6)[0])
            marks.tag(ax.broken_barh([(ready, max(released - ready, 0.0))], (row - 0.18, 0.36), color=colour,
                                     alpha=0.22, linewidth=0))
            marks.tag(ax.plot([ready], [row], marker="D", color=colour, markersize=6, linestyle="none")[0])
            ax.annotate(f"ready +{ready - applied:.1f} s", xy=(ready, row), xytext=(5, -4), textcoords="offset points",
                        fontsize=8, va="top", color=colour)
            warm = seg.warmup.get(cls)
            if warm and warm.started_s and warm.ended_s:  # unmeasured: hatched, never a sample
                start = warm.started_s - t0
                marks.tag(ax.broken_barh([(start, max(warm.ended_s - warm.started_s, 0.0))], (row - 0.18, 0.36),
                                         facecolor="none", edgecolor=colour, hatch="////", linewidth=0.6))
    _class_rows(ax, classes)
    ax.set_ylim(len(classes) - 0.45, -1.2)  # a free band on top for the "arm applied" labels
    handles = [ax.plot([], [], color="#777777", linewidth=1.2)[0],
               ax.plot([], [], marker="D", color="#777777", linestyle="none")[0],
               Patch(color="#777777", alpha=0.22), Patch(facecolor="none", edgecolor="#777777", hatch="////"),
               ax.plot([], [], **_APPLIED)[0]]
    ax.legend(handles, ["loading (applied → ready)", "ready: first real answer", "serving",
                        "warm-up (unmeasured)", "arm applied"], **_RIGHT)
    ax.set_title("placement and readiness", loc="left")


def _steps_of(d: StageDisruption, name: str, *actions: str) -> float | None:
    return next((a.t for a in d.actions if a.target == f"class/{name}" and a.action in actions and a.t), None)


def _disruption_marks(axes: Sequence[Axes], placement: Axes, disruptions: Sequence[StageDisruption], t0: float,
                      classes: list[str], marks: DataMarks) -> bool:
    """Draw each disruption's steps (dotted lines, named in the placement panel) and each replaced class's time
    without a server; whether anything was drawn."""
    drawn = False
    for d in disruptions:
        for step in d.actions:
            colour = STEP_COLOURS.get(step.action)
            if colour is None or step.t is None:
                continue
            drawn = True
            for ax in axes:
                ax.axvline(step.t - t0, color=colour, linestyle=":", linewidth=0.8)
            placement.annotate(step.action, xy=(step.t - t0, 1), xycoords=("data", "axes fraction"), xytext=(1, -2),
                               textcoords="offset points", fontsize=6.5, color=colour, rotation=90, va="top")
        for name in classes:
            row = classes.index(name)
            down, up = _steps_of(d, name, "refuse", "kill"), _steps_of(d, name, "route")
            spawn, ready = _steps_of(d, name, "spawn"), _steps_of(d, name, "ready")
            if down is not None:
                marks.tag(placement.broken_barh([(down - t0, max((up or down) - down, 0.0))], (row - 0.3, 0.6),
                                                facecolor=NO_SERVER, alpha=0.3, linewidth=0))
            if spawn is not None and ready is not None:
                marks.tag(placement.plot([spawn - t0, ready - t0], [row + 0.25, row + 0.25], color=class_colour(name),
                                         linewidth=1.2, alpha=0.6)[0])
    return drawn


def _stage_panel(ax: Axes, trial: TrialRecord, t0: float) -> None:
    statuses = []
    for st in trial.stages:
        if st.started_s is None or st.ended_s is None:
            continue
        start, width = st.started_s - t0, max(st.ended_s - st.started_s, 0.0)
        statuses.append(st.status)
        ax.broken_barh([(start, width)], (0.1, 0.8), facecolor=STAGE_STATUS_COLOURS.get(st.status, "#dddddd"),
                       edgecolor="#888888", linewidth=0.6)
        label = st.name or f"stage {st.index}"
        if st.status != StageStatus.COMPLETED:
            skipped = sum(1 for o in trial.stages if o.segment == st.segment and o.status == StageStatus.SKIPPED)
            label += "\n" + STAGE_STATUS_LABELS.get(st.status, st.status).replace(" (", "\n(")
            if skipped:
                label += f"\n+{skipped} skipped"
        ax.text(start + width / 2, 0.5, label, ha="center", va="center", fontsize=7.5, clip_on=True)
    statuses += [StageStatus.SKIPPED] if any(s.status == StageStatus.SKIPPED for s in trial.stages) else []
    ax.set_ylim(0, 1)
    ax.set_yticks([])
    ax.grid(False)
    shown = [s for s in STAGE_STATUS_COLOURS if s in statuses]
    ax.legend([Patch(facecolor=STAGE_STATUS_COLOURS[s], edgecolor="#888888") for s in shown],
              [STAGE_STATUS_LABELS[s] for s in shown], **_RIGHT)
    ax.set_title("stages (offered load steps)", loc="left")


def _error_panel(ax: Axes, requests: dict[str, ClassRequests], t0: float, span: float, classes: list[str],
                 marks: DataMarks) -> None:
    labels = []
    for row, cls in enumerate(classes):
        req = requests.get(cls)
        failed = req.failed_t if req is not None else np.empty(0)
        labels.append(f"{cls}: {len(failed)} failed")
        if not len(failed):
            continue
        rel = failed - t0
        step = max(span / TICK_RESOLUTION, 1e-9)
        ticks = np.unique(np.round(rel / step)) * step
        # One path of short vertical strokes (x, row-h) -> (x, row+h), NaN-separated: an SVG marker per
        # tick costs a hundred bytes and a Python call each, which a storm of timeouts makes seconds.
        xs = np.repeat(ticks, 3)
        ys = np.tile([row - 0.3, row + 0.3, np.nan], len(ticks))
        xs[2::3] = np.nan
        marks.tag(ax.plot(xs, ys, linewidth=1.3, color=class_colour(cls), solid_capstyle="butt")[0])
    if all(req is None or not len(req.failed_t) for req in requests.values()):
        ax.text(0.5, 0.5, "no failed requests in this trial", transform=ax.transAxes, ha="center", va="center",
                color="#666666", fontsize=9)
    _class_rows(ax, classes, labels)
    ax.set_title("failed requests (one tick each, at the intended send time)", loc="left")


def _latency_panel(ax: Axes, requests: dict[str, ClassRequests], t0: float, slo: SLOs,
                   classes: list[str], marks: DataMarks) -> None:
    values = []
    for cls in classes:
        req = requests.get(cls)
        if req is None or not len(req.ok_t):
            continue
        shown = len(req.ok_t)
        label = (f"{cls}: {req.ok_total} successful" if shown == req.ok_total
                 else f"{cls}: {shown} of {req.ok_total} successful (thinned)")
        marks.tag(ax.plot(req.ok_t - t0, req.ok_latency_ms, marker=".", markersize=3.5, alpha=0.65,
                          linestyle="none", color=class_colour(cls), label=label)[0])
        values += [float(req.ok_latency_ms.min()), float(req.ok_latency_ms.max())]
    for cls in classes:
        limit = (slo.get(cls) or {}).get("p95_ms")
        if limit:
            values.append(float(limit))
            ax.axhline(float(limit), color=class_colour(cls), label=f"{cls} P95 SLO {limit:g} ms", **SLO_STYLE)
    if not values:
        ax.text(0.5, 0.5, "no successful request in this trial", transform=ax.transAxes, ha="center",
                va="center", color="#666666")
        return
    log_y(ax)
    ax.set_ylim(max(min(values), 1e-3) / 1.6, max(values) * 1.6)
    ax.set_ylabel("latency (ms, log)")
    ax.legend(**_RIGHT, markerscale=3)
    ax.set_title("latency of each successful request, at its intended send time", loc="left")


def timeline_plot(trial: TrialRecord, requests: dict[str, ClassRequests], telemetry: Sequence[TelemetrySeries],
                  slo: SLOs, pods: Sequence[PodEvent] = (), disruptions: Sequence[StageDisruption] = ()) -> Plot:
    """The trial's timeline figure (see the module docstring for its panels); ``slo`` is Summary.slo.

    ``pods`` are the trial's pod events (results.store.read_pod_events); without any, no pods panel.
    ``disruptions``: the trial's disrupted stages (the summary's), whose steps are marked.
    """
    plot_id = f"timeline-trial-{trial.id}"
    times = [t for st in trial.stages for t in (st.started_s, st.ended_s) if t is not None]
    times += [t for seg in trial.segments for t in (seg.applied_s, seg.released_s) if t is not None]
    t0 = trial.started_s or min(times, default=0.0)
    end = (trial.ended_s or max(times, default=t0 + 1.0)) - t0
    rows = pod_panel.pod_rows(pods, t0, end)
    right = max(end, *(e.t - t0 for e in pods)) if pods else end  # a restore's deletions come after the end
    classes = _classes(trial, requests)
    panels = panels_with_data(telemetry)
    n = max(len(classes), 1)
    heights = [0.42 * n + 0.75, 0.75, 0.32 * n + 0.3, 2.6] + [1.4] * len(panels)  # inches of each panel
    if rows:
        heights.insert(0, 0.3 * min(len(rows), pod_panel.MAX_ROWS) + 0.55)
    marks = DataMarks(plot_id)
    with style():
        fig = new_figure(sum(heights) + LAYOUT.top + LAYOUT.bottom + LAYOUT.hgap * (len(heights) - 1))
        axes = grid(fig, len(heights), 1, LAYOUT, height_ratios=heights, sharex=True)
        if rows:
            pod_panel.draw_panel(axes[0], rows, marks, pod_panel.first_reason(pods))
        first = 1 if rows else 0
        _placement_panel(axes[first], trial, t0, end, classes, marks)
        _stage_panel(axes[first + 1], trial, t0)
        _error_panel(axes[first + 2], requests, t0, max(end, 1e-3), classes, marks)
        _latency_panel(axes[first + 3], requests, t0, slo, classes, marks)
        for ax, (panel, series) in zip(axes[first + 4:], panels, strict=True):
            draw_panel(ax, panel, series, t0, process_names(trial), marks)
        for ax in axes:
            for seg in trial.segments:
                if seg.applied_s is not None:
                    ax.axvline(seg.applied_s - t0, **_APPLIED)
        disrupted = _disruption_marks(axes, axes[first], disruptions, t0, classes, marks)
        axes[-1].set_xlim(min(0.0, *(t - t0 for t in times)) if times else 0.0, right * 1.01 + 0.1)
        axes[-1].set_xlabel("seconds from the trial start")
        svg = figure_svg(fig, plot_id)
    status = trial.status + (f": {trial.reason}" if trial.reason else "")
    text = _caption(trial, requests, bool(panels)) + (pod_panel.caption(rows, pods) if rows else "")
    if disrupted:
        text += (" Dotted lines mark the disruption's steps (red: the old server killed or the class's front "
                 "refusing; grey: stop, stopped, spawn; green: the new server ready and routed); red shading on a "
                 "class's row is the time it had no server, the line under it the new server's loading.")
    return Plot(plot_id, f"Trial {trial.id}: arm {trial.arm}, repeat {trial.repeat} ({status})", svg, text)


def _caption(trial: TrialRecord, requests: dict[str, ClassRequests], has_telemetry: bool) -> str:
    total = sum(r.ok_total for r in requests.values())
    shown = sum(len(r.ok_t) for r in requests.values())
    failed = sum(len(r.failed_t) for r in requests.values())
    text = ("Read top to bottom: where each class was placed when the arm was applied, how long it took to answer "
            "its first real request (Running is not Ready), which stages ran and how they ended, then whether "
            f"requests succeeded: {failed} failed")
    text += f", and the latency of {total} successful ones" if shown == total else (
        f"; {shown} of {total} successful requests are drawn, chosen evenly in time")
    text += ". Points above a class's dashed SLO line are slow requests; a rising band means queueing."
    if not has_telemetry:
        text += " No GPU telemetry was recorded for this trial (results.sqlite has no telemetry rows)."
    if trial.reason:
        text += f" Trial ended {trial.status}: {trial.reason}."
    return text
