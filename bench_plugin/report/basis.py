"""What a percentile in the report rests on: its sample count per repeat, its intervals, and whether it is bounded.

A P95 over 6 requests and one over 600 print as the same kind of number; this module gives every
percentile the report shows (P50, P95, TTFT and TPOT P95, per arm and stage over repeats, or per
trial) the facts the summary already stores beside it: each run's sample count and distribution-free
order-statistic 95% interval (``ClassStats.latency_ci_ms``, ``ttft_ci_ms``, ``tpot_ci_ms``), and
whether that interval exists (``Interval.bounded``; for the latency P95 also ``ClassStats.p95_note``).
A figure is **low** when some run it rests on has too few samples for its interval to be bounded:
the report then shows it muted, in italics and marked :data:`LOW_MARK`, with :func:`low_rule` as its
explanation, and the plots draw it hollow. Nothing is recomputed from samples here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bench_plugin.analysis.intervals import CONFIDENCE, samples_needed
from bench_plugin.analysis.statistics import fixed
from bench_plugin.analysis.summary import arm_stage_runs
from bench_plugin.report.comparison import spread_text
from bench_plugin.report.tables import Raw, esc
from bench_plugin.results.summary import ClassStats, Interval, Spread, Summary

LOW_MARK = "†"
"""The mark after a figure that rests on too few samples to be bounded (text, so it survives markdown and print)."""

FIGURES: dict[str, tuple[str, float, str]] = {
    "latency_p50_ms": ("latency_ci_ms", 0.5, "P50"),
    "latency_p95_ms": ("latency_ci_ms", 0.95, "P95"),
    "ttft_p95_ms": ("ttft_ci_ms", 0.95, "TTFT P95"),
    "tpot_p95_ms": ("tpot_ci_ms", 0.95, "TPOT P95"),
    "itl_p95_ms": ("itl_ci_ms", 0.95, "ITL P95"),
}
"""A figure's name (ArmClassFigures) -> the ClassStats field of its intervals, its quantile and its label."""


def _key(q: float) -> str:
    return f"p{round(q * 100):d}"


def low_rule(q: float | None = None) -> str:
    """Why a percentile is shown as weak, in one sentence: for the q-quantile, or for every one the report shows."""
    needs = (f"a {_key(q).upper()} needs at least {samples_needed(q)} samples in a run" if q is not None else
             "a P50 needs at least " + str(samples_needed(0.5)) + " samples in a run and a P95 "
             + str(samples_needed(0.95)))
    return (f"{LOW_MARK} too few samples: {needs} for its distribution-free {CONFIDENCE * 100:g}% order-statistic "
            "interval to exist; with fewer it is not bounded, so the figure is weaker than it looks")


@dataclass(frozen=True)
class Basis:
    """The runs one percentile figure rests on: per run its label, sample count and interval."""

    label: str
    q: float
    runs: tuple[tuple[str, Interval], ...]
    notes: tuple[str, ...] = ()
    against: tuple[tuple[str, Interval], ...] = ()
    """For a ratio to the control's figure: the control's runs (shown after ``vs``)."""

    @property
    def counts(self) -> list[int]:
        """The sample count of each run, in run order."""
        return [ci.n for _, ci in self.runs]

    @property
    def low(self) -> bool:
        """Whether some run has too few samples for its interval to be bounded (or the summary notes so)."""
        return bool(self.notes) or any(not ci.bounded for _, ci in (*self.runs, *self.against))

    def n_text(self) -> str:
        """``n=31`` for one run, ``n=31/29/33`` for up to four, ``n=29-33 (10 runs)`` for more; ``vs`` the control's."""
        text = "n=" + _counts([ci.n for _, ci in self.runs])
        return text + " vs " + _counts([ci.n for _, ci in self.against]) if self.against else text

    def interval(self) -> tuple[float | None, float | None] | None:
        """The order-statistic interval of the one run a figure rests on (None with several runs, or none)."""
        if len(self.runs) != 1:
            return None
        ci = self.runs[0][1]
        return (ci.lo, ci.hi) if ci.lo is not None or ci.hi is not None else None

    def detail(self) -> str:
        """Each run's percentile with its interval and count, and the rule where the figure is low (a tooltip)."""
        parts = [f"{label}: {self.label} {_ms(ci.estimate)} [{_ms(ci.lo)}, {_top(ci.hi)}]"
                 f" ({ci.n} samples{'' if ci.bounded else ', not bounded'})" for label, ci in self.runs]
        text = f"{self.label} per run, with its {CONFIDENCE * 100:g}% order-statistic interval: " + "; ".join(parts)
        if self.against:
            text += "; against the control's: " + "; ".join(
                f"{label}: {self.label} {_ms(ci.estimate)} ({ci.n} samples{'' if ci.bounded else ', not bounded'})"
                for label, ci in self.against)
        if self.low:
            text += (f". {LOW_MARK} too few samples: a {_key(self.q).upper()} needs {samples_needed(self.q)} in a run "
                     "to be bounded")
        return text


def _counts(counts: list[int]) -> str:
    if not counts:
        return "0"
    if len(counts) <= 4:
        return "/".join(map(str, counts))
    low, high = min(counts), max(counts)
    return f"{low} ({len(counts)} runs)" if low == high else f"{low}-{high} ({len(counts)} runs)"


def _ms(value: float | None) -> str:
    return "-" if value is None else fixed(value, 1)


def _top(value: float | None) -> str:
    return "unbounded" if value is None else fixed(value, 1)


def of_stats(stats: ClassStats, figure: str, label: str = "run") -> Basis | None:
    """The basis of one trial's percentile (a ``FIGURES`` name); None where the summary stores no interval."""
    field, q, name = FIGURES[figure]
    intervals: dict[str, Interval] | None = getattr(stats, field)
    ci = (intervals or {}).get(_key(q))
    if ci is None:
        return None
    notes = (stats.p95_note,) if figure == "latency_p95_ms" and stats.p95_note else ()
    return Basis(name, q, ((label, ci),), notes)


def _merge(bases: Sequence[Basis]) -> Basis | None:
    if not bases:
        return None
    return Basis(bases[0].label, bases[0].q, tuple(r for b in bases for r in b.runs),
                 tuple(n for b in bases for n in b.notes))


class Bases:
    """Every arm figure's basis of one summary, looked up by arm, stage position, class and figure."""

    def __init__(self, summary: Summary) -> None:
        self._runs = {arm: arm_stage_runs(summary.trials, arm) for arm in summary.arms}

    def get(self, arm: str, position: int, cls: str, figure: str) -> Basis | None:
        """The basis of ``summary.arms[arm].stages[position].classes[cls]``'s ``figure``; None without one."""
        runs = self._runs.get(arm) or []
        if position >= len(runs):
            return None
        found = []
        for trial, stage in runs[position]:
            stats = stage.classes.get(cls)
            basis = of_stats(stats, figure, f"repeat {trial.repeat}") if stats is not None else None
            if basis is not None:
                found.append(basis)
        return _merge(found)


def value_text(fig: Spread | None, basis: Basis | None, digits: int = 1) -> str:
    """A percentile over repeats as a table shows it, without its count: ``mean ± ci95``; with one run, the
    run's order-statistic interval instead (``1558.7 [1500.2, 1610.0]``, ``unbounded`` where it has no top)."""
    text = spread_text(fig, digits)
    if fig is None or fig.mean is None or fig.ci95 is not None or basis is None:
        return text
    ends = basis.interval()
    if ends is None:
        return text
    lo, hi = ends
    return f"{text} [{_ms(lo)}, {_top(hi)}]"


def markdown_text(text: str, basis: Basis | None) -> str:
    """A percentile's text as report.md shows it: with its count; a low one in italics and marked ``†``."""
    if text == "-" or basis is None:
        return text
    if basis.low:
        return f"*{text}* ({basis.n_text()}) {LOW_MARK}"
    return f"{text} ({basis.n_text()})"


def html_cell(text: str, basis: Basis | None) -> Raw:
    """A percentile in report.html: the figure, then its count; a low one muted, in italics, marked, explained.

    Each is a ``<span class="pct">`` with ``data-pct`` (which percentile) and ``data-n`` (the count per
    run), so a reader's tooltip and a browser test find every one; its title names each run's interval.
    """
    if text == "-" or basis is None:
        return Raw(esc(text))
    low = " low" if basis.low else ""
    mark = f' <span class="mark">{LOW_MARK}</span>' if basis.low else ""
    return Raw(f'<span class="pct{low}" data-pct="{esc(basis.label)}" data-n="{",".join(map(str, basis.counts))}" '
               f'title="{esc(basis.detail())}">{esc(text)} <span class="n">{esc(basis.n_text())}</span>{mark}</span>')


def any_low(bases: Sequence[Basis | None]) -> bool:
    """Whether any of these figures is low (a table then gets the rule under it)."""
    return any(b is not None and b.low for b in bases)
