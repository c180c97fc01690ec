"""The "Scheduling" section of the report and summary.md: per arm its Pending time, per trial a table of its pods.

Read from the typed summary only (TrialSummary.pods, ArmFigures.pods; analysis/pods.py computes them);
a campaign without pod events (the local and manual backends) has no section. No matplotlib here:
bench_plugin.report.outputs writes summary.md on every run.
"""

from __future__ import annotations

from bench_plugin.report.comparison import spread_text
from bench_plugin.report.page import Block, Heading, Paragraph, Section, Strong, Table, bullets, table
from bench_plugin.results.summary import PodSummary, Summary, TrialSummary


def _pending(pod: PodSummary) -> str:
    if pod.pending_s is None:
        return "-"
    text = f"{pod.pending_s:.1f}"
    return text if pod.pending_until in (None, "scheduled") else f"{text} (never scheduled: until {pod.pending_until})"


def _reasons(pod: PodSummary) -> str:
    return "; ".join(f"{reason} ({n})" for reason, n in pod.failed_scheduling.items()) or "-"


def _then(pod: PodSummary) -> str:
    parts = [f"preempted by {pod.preempted_by}" if pod.preempted_s is not None else "",
             f"evicted ({pod.evicted})" if pod.evicted_s is not None else "",
             *pod.preempting]
    return "; ".join(p for p in parts if p) or "-"


HEADERS = ("pod", "class", "node", "pending s", "FailedScheduling reasons", "preempted / evicted")

INTRO = ("What the cluster did to the workload pods (Kubernetes backend). Pending time is scheduled - created, "
         "good to a second; a pod never scheduled counts until its deletion or the trial end.")


def trial_table(trial: TrialSummary) -> Table:
    """The "Scheduling" table of one trial: pod, class, node, pending s, reasons, what happened next."""
    return table(HEADERS, ([pod.pod, pod.workload or "-", pod.node or "-", _pending(pod), _reasons(pod), _then(pod)]
                           for pod in trial.pods or []), "pods")


def section(summary: Summary) -> Section | None:
    """The section: per arm its Pending time and reasons, then a table per trial; None without pod events."""
    watched = [t for t in summary.trials if t.pods is not None]
    if not watched:
        return None
    arms = []
    for arm, figures in summary.arms.items():
        pods = figures.pods
        if pods is None:
            continue
        reasons = ", ".join(f"{r} ({n})" for r, n in pods.reasons.items()) or "none"
        longest = f"{pods.pending.max_s:.1f} s" if pods.pending.max_s is not None else "-"
        arms.append((Strong(arm), f": longest Pending {longest}, per repeat {spread_text(pods.pending.spread)} s over "
                     f"{pods.trials} repeat(s); FailedScheduling reasons: {reasons}; preempted {pods.preempted}, "
                     f"evicted {pods.evicted}, other work preempted {pods.preempting}"))
    blocks: list[Block] = [Paragraph((INTRO,)), bullets(arms)]
    for trial in watched:
        blocks += [Heading(f"Trial {trial.id}: arm {trial.arm}, repeat {trial.repeat}"), trial_table(trial)]
    return Section("scheduling", "Scheduling", tuple(blocks))
