"""The words and numbers the reports show for summary.json's figures and its "comparison" section.

(And the campaign's status: how it ended and, resumed, when and what ran again: :func:`status_text`,
:func:`resume_rows`.)

The section itself (each arm against the control: per-stage contention figures, the operating
boundary and the verdict) is typed in bench_plugin.results.summary (``Comparison``, ``ArmComparison``,
``StageComparison``, ``Boundary``) and read from there; this module only says how it reads on a page.
A summary always has the section, but a campaign without a control arm (or without arms) has nothing
to compare: :func:`compared` is then False and the reports say :data:`NO_COMPARISON`.

A figure is a :class:`~bench_plugin.results.summary.Spread` over repeats; a paired figure against the
control is a :class:`~bench_plugin.results.summary.Judged`, which adds its call ("higher", "lower",
"no significant difference"). Its ``kind`` says how it was summarised: a ``value`` or ``difference``
by its arithmetic mean and a 95% half-width ``ci95`` (shown ``1.60 ± 0.05``), a ``ratio`` by its
geometric mean and an asymmetric 95% interval [``lo``, ``hi``] with no half-width (shown
``1.71x [0.90, 3.20]``), a ``complement`` (1 - a ratio) by 1 - that mean and [``lo``, ``hi``].
A missing figure (None, or no mean) is shown as "-".
"""

from __future__ import annotations

from bench_plugin.analysis.boundary import format_offered
from bench_plugin.analysis.statistics import fixed
from bench_plugin.analysis.verdict import is_inconclusive
from bench_plugin.report.clock import campaign_clock
from bench_plugin.results.limits import limits_text
from bench_plugin.results.summary import Boundary, Comparison, Judged, Spread, Summary
from bench_plugin.results.words import BoundaryStatus, Call, SearchStatus

NO_COMPARISON = ("The comparison with the control (verdict, operating boundary, fairness) is not available: "
                 "the \"comparison\" section of summary.json names no control arm, or no arm to compare with it.")
"""What a report says in place of the verdict when there is nothing to compare with a control."""


RATIO_UNIT = "x"
"""The unit shown after a ratio's mean: ``1.71x [0.90, 3.20]``."""


def compared(comparison: Comparison) -> bool:
    """Whether the comparison has a control and arms to show (else the reports say NO_COMPARISON)."""
    return comparison.control is not None and bool(comparison.arms)


def interval(fig: Spread | None) -> tuple[float, float] | None:
    """A figure's 95% interval [lo, hi]: its own ends, else mean ± ci95; None without one."""
    if fig is None or fig.mean is None:
        return None
    if fig.lo is not None and fig.hi is not None:
        return fig.lo, fig.hi
    if fig.ci95 is not None:
        return fig.mean - fig.ci95, fig.mean + fig.ci95
    return None


def error_bars(fig: Spread | None) -> tuple[float, float]:
    """How far a figure's interval reaches below and above its mean (0, 0 without one): a ratio's differ."""
    ends = interval(fig)
    if fig is None or fig.mean is None or ends is None:
        return 0.0, 0.0
    return max(0.0, fig.mean - ends[0]), max(0.0, ends[1] - fig.mean)


def spread_text(fig: Spread | None, digits: int = 1, suffix: str = "") -> str:
    """``mean ± ci95`` for a value, ``1.71x [lo, hi]`` for a ratio; the mean alone with one repeat; ``-`` if missing.

    A ratio's interval is asymmetric (it is symmetric on the log scale), so it is given by its ends;
    ``suffix`` follows the mean there (``1.71x [0.90, 3.20]``) and the half-width elsewhere (``2.1 ± 0.3 ms``).
    """
    if fig is None or fig.mean is None:
        return "-"
    text = fixed(fig.mean, digits)
    if fig.ci95 is not None:
        return f"{text} ± {fixed(fig.ci95, digits)}{suffix}"
    ends = interval(fig)
    if ends is not None:
        return f"{text}{suffix} [{fixed(ends[0], digits)}, {fixed(ends[1], digits)}]"
    return text + suffix


def ratio_text(fig: Spread | None, digits: int = 2) -> str:
    """A ratio with its unit and interval: ``1.71x [0.90, 3.20]``."""
    return spread_text(fig, digits, RATIO_UNIT)


def significance_text(fig: Judged | None, digits: int = 2, suffix: str = "") -> str:
    """A figure with its call against the control, e.g. ``0.82x [0.77, 0.88] (lower)``."""
    text = spread_text(fig, digits, suffix)
    if fig is not None and fig.call:
        text += f" ({fig.call})"
    return text


def call_kind(call: str | None) -> str | None:
    """A verdict call without its count of repeats: ``inconclusive`` for ``inconclusive (1 repeat)``."""
    return Call.INCONCLUSIVE if is_inconclusive(call) else call


offered_text = format_offered
"""``llm 2 req/s, embedding 4 req/s`` (``users`` for a closed-loop class): the analysis's own wording."""


def boundary_text(boundary: Boundary) -> str:
    """An arm's boundary in full: the analysis's sentence, or its status and offered load."""
    return boundary.text or boundary_short(boundary)


def boundary_short(boundary: Boundary, limited: bool = True) -> str:
    """An arm's boundary in a table cell: where it is and (with ``limited``) what limits it."""
    limit = f"; limited by {limits_text(boundary.limiting)}" if boundary.limiting and limited else ""
    if boundary.status == BoundaryStatus.REACHED and boundary.offered:
        about = ", ".join(f"{name} {load:.3g}" for name, load in boundary.offered.items())
        return f"reached at about {about}{limit}"
    if boundary.status == BoundaryStatus.NOT_REACHED:
        return "not reached: above the highest load measured"
    if boundary.status == BoundaryStatus.BELOW_LOWEST:
        return f"below the lowest stage measured{limit}"
    if boundary.status in (SearchStatus.FOUND, SearchStatus.ABOVE_MAXIMUM) and boundary.offered:  # searched
        about = ", ".join(f"{name} {load:.3g}" for name, load in boundary.offered.items())
        scale = spread_text(boundary.stage_position, 1)
        if boundary.status == SearchStatus.FOUND:
            return f"found at about {about} (scale {scale}){limit}"
        return f"above the highest load searched: every SLO kept at {about} (scale {scale}){limit}"
    if boundary.status == SearchStatus.BELOW_MINIMUM:
        return f"below the lowest load searched{limit}"
    if boundary.status == SearchStatus.GENERATOR_LIMITED and boundary.offered:
        about = ", ".join(f"{name} {load:.3g}" for name, load in boundary.offered.items())
        return (f"not found: the load generator fell behind first; every SLO kept at about {about} "
                f"(scale {spread_text(boundary.stage_position, 1)}){limit}")
    return boundary.status + limit


def status_text(summary: Summary, reason: str = " ({})") -> str:
    """How the campaign ended and when (on the clock of its host), with its reason (placed by ``reason``) and,
    resumed, when and what ran again."""
    status = summary.status
    at = f" at {campaign_clock(summary, status.ended_s)}" if status.ended_s is not None else ""
    text = f"{status.status}{at}" + (reason.format(status.reason) if status.reason else "")
    if status.resumed:
        n = len(status.resumed)
        times = ", ".join(campaign_clock(summary, r.at_s, seconds=False) for r in status.resumed)
        rerun = sum(len(r.rerun) for r in status.resumed)
        again = f"{rerun} unfinished segment{'s' if rerun != 1 else ''} run again"
        text += f"; resumed {n} time{'s' if n > 1 else ''} ({times}; {again})"
    return text


RESUME_COLUMNS = ("resume", "at", "after", "kept", "ran again from its start", "superseded rows", "host")
"""The columns of :func:`resume_rows`."""


def resume_rows(summary: Summary) -> list[list[str]]:
    """One row per resume of the campaign (none for a campaign run in one process), in RESUME_COLUMNS."""
    def segments(pairs: list[tuple[int, int]]) -> str:
        return ", ".join(f"trial {t} segment {s}" for t, s in pairs) or "none"

    return [[str(r.number), campaign_clock(summary, r.at_s),
             r.previous_status or "-", segments(r.kept), segments(r.rerun),
             ", ".join(f"{table} {n}" for table, n in sorted(r.superseded.items())) or "none", r.host or "-"]
            for r in summary.status.resumed]
