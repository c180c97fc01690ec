"""The pods panel of a trial's timeline: what the cluster did to each workload pod, on the trial's clock.

From the trial's pod events (results.store.read_pod_events), one row per pod in order of creation:
hatched while Pending (from its creation until it was scheduled, or deleted, or the trial ended), a
line from scheduled to Ready, a band while Ready, and marks for each FailedScheduling attempt (the
first reason is in the legend), a preemption, an eviction, a kubelet's Killing and the deletion.
Trials without pod events (the local and manual backends) get no panel.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from matplotlib.axes import Axes
from matplotlib.patches import Patch

from bench_plugin.report.figures import DataMarks, class_colour
from bench_plugin.results.pod_events import PodEvent, in_order
from bench_plugin.scenario import class_rank
from bench_plugin.sharing.kubernetes.podevents import scheduling_reasons

MAX_ROWS = 30
"""Pods drawn per trial; the others are counted in the caption (summary.json lists every one)."""
LEGEND_WIDTH = 30
"""Characters per legend line: the legend has the figure's right margin (2.55 in) only."""
_RIGHT: dict[str, Any] = {"loc": "center left", "bbox_to_anchor": (1.005, 0.5), "frameon": False}
_MARKS: dict[str, tuple[str, dict[str, Any]]] = {  # kind -> legend label, marker style
    "failed_scheduling": ("FailedScheduling", {"marker": "x", "color": "#b22222", "markersize": 6}),
    "preempted": ("preempted", {"marker": "v", "color": "#7b1fa2", "markersize": 7}),
    "preempting": ("preempted other work", {"marker": "^", "color": "#7b1fa2", "markersize": 7}),
    "evicted": ("evicted", {"marker": "s", "color": "#e65100", "markersize": 6}),
    "killing": ("Killing (kubelet)", {"marker": "|", "color": "#444444", "markersize": 9}),
    "deleted": ("deletion asked", {"marker": "X", "color": "#222222", "markersize": 6}),
}


@dataclass
class PodRow:
    """One pod's spans and marks, in seconds from the trial start."""

    pod: str
    workload: str | None
    node: str | None
    created: float | None
    pending_end: float | None
    scheduled: float | None
    ready: list[tuple[float, float]] = field(default_factory=list)
    """(start, width) of each time it was Ready."""
    marks: dict[str, list[float]] = field(default_factory=dict)

    @property
    def label(self) -> str:
        """The pod's name without its ``bench-<class>-`` prefix (the class is the row's colour)."""
        prefix = f"bench-{self.workload}-"
        return self.pod[len(prefix):] if self.workload and self.pod.startswith(prefix) else self.pod


def pod_rows(events: Sequence[PodEvent], t0: float, end: float) -> list[PodRow]:
    """Each pod of ``events`` as a row, in order of creation; ``end`` (s from ``t0``) closes what is still open."""
    by_uid: dict[str, list[PodEvent]] = {}
    for event in in_order(list(events)):
        by_uid.setdefault(event.uid, []).append(event)
    rows = [_row(mine, t0, end) for mine in by_uid.values()]
    return sorted(rows, key=lambda r: (r.created if r.created is not None else float("inf"),
                                       class_rank(r.workload), r.pod))


def _row(events: list[PodEvent], t0: float, end: float) -> PodRow:
    def first(kind: str) -> float | None:
        return next((e.t - t0 for e in events if e.kind == kind), None)

    created, scheduled, deleted = first("created"), first("scheduled"), first("deleted")
    stop = deleted if deleted is not None else end
    row = PodRow(pod=events[0].pod, workload=next((e.workload for e in events if e.workload), None),
                 node=next((e.node for e in events if e.kind == "scheduled"), None), created=created,
                 pending_end=scheduled if scheduled is not None else stop, scheduled=scheduled)
    since: float | None = None
    for event in events:
        t = event.t - t0
        if event.kind == "ready" and since is None:
            since = t
        elif event.kind in ("not_ready", "deleted") and since is not None:
            row.ready.append((since, max(t - since, 0.0)))
            since = None
        if event.kind in _MARKS:
            row.marks.setdefault(event.kind, []).append(t)
    if since is not None:
        row.ready.append((since, max(stop - since, 0.0)))
    return row


def first_reason(events: Sequence[PodEvent]) -> str | None:
    """The first FailedScheduling message of a trial, or None."""
    return next((e.message for e in in_order(list(events)) if e.kind == "failed_scheduling" and e.message), None)


def draw_panel(ax: Axes, rows: Sequence[PodRow], marks: DataMarks, first_message: str | None) -> None:
    """The pods panel of a trial's timeline (rows from :func:`pod_rows`, at most MAX_ROWS of them)."""
    shown = list(rows[:MAX_ROWS])
    kinds: set[str] = set()
    for y, row in enumerate(shown):
        colour = class_colour(row.workload or "")
        if row.created is not None and row.pending_end is not None:
            marks.tag(ax.broken_barh([(row.created, max(row.pending_end - row.created, 0.0))], (y - 0.2, 0.4),
                                     facecolor="none", edgecolor=colour, hatch="xxxx", linewidth=0.6))
        first_ready = row.ready[0][0] if row.ready else None
        if row.scheduled is not None:
            if first_ready is not None:
                marks.tag(ax.plot([row.scheduled, first_ready], [y, y], color=colour, linewidth=1.2, alpha=0.6)[0])
            ax.annotate(f"on {row.node}" if row.node else "scheduled", xy=(row.scheduled, y), xytext=(3, 4),
                        textcoords="offset points", fontsize=7.5, va="bottom", color=colour)
        if row.ready:
            marks.tag(ax.broken_barh(row.ready, (y - 0.2, 0.4), color=colour, alpha=0.22, linewidth=0))
        for kind, times in sorted(row.marks.items()):
            kinds.add(kind)
            marks.tag(ax.plot(times, [y] * len(times), linestyle="none", **_MARKS[kind][1])[0])
    ax.set_yticks(range(len(shown)), [r.label for r in shown], fontsize=7.5)
    for tick, row in zip(ax.get_yticklabels(), shown, strict=True):
        tick.set_color(class_colour(row.workload or ""))
    ax.set_ylim(len(shown) - 0.4, -0.7)
    ax.grid(axis="y", visible=False)
    handles = [Patch(facecolor="none", edgecolor="#777777", hatch="xxxx"),
               ax.plot([], [], color="#777777", linewidth=1.2)[0], Patch(color="#777777", alpha=0.22)]
    labels = ["Pending (not scheduled)", "scheduled → Ready", "Ready"]
    for kind in (k for k in _MARKS if k in kinds):
        label, style = _MARKS[kind]
        if kind == "failed_scheduling" and first_message:
            reasons = scheduling_reasons(first_message)
            label += ", first:\n" + textwrap.fill(reasons[0], LEGEND_WIDTH) if reasons else ""
        handles.append(ax.plot([], [], linestyle="none", **style)[0])
        labels.append(label)
    ax.legend(handles, labels, **_RIGHT)
    ax.set_title("pods: what the cluster did (row = pod, coloured by class)", loc="left")


def caption(rows: Sequence[PodRow], events: Sequence[PodEvent]) -> str:
    """What the pods panel shows, for the figure's caption."""
    failed = sum(e.count for e in events if e.kind == "failed_scheduling")
    text = (f" The top panel shows each of the trial's {len(rows)} workload pods as the cluster reported it, "
            "at the cluster's own times (whole seconds for a pod's own transitions): hatched while Pending, "
            "then from scheduled to Ready, then Ready.")
    if failed:
        text += f" The scheduler refused {failed} attempt(s); first: \"{first_reason(events)}\"."
    if len(rows) > MAX_ROWS:
        text += f" The first {MAX_ROWS} pods are drawn, {len(rows) - MAX_ROWS} more are in summary.json."
    return text
