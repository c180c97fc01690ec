"""Plots against offered load: latency per class, LLM streaming times, normalised throughput, fairness.

Every point is a figure over repeats from the typed summary (``Summary.arms``: mean and 95% CI; a ratio to the control
has its geometric mean and asymmetric interval [lo, hi], drawn as unequal bars); every line is an
arm, in the arm's colour and marker (figures.py); in a search, a line per load mix of the arm (a ray,
or a class alone), its points in order of load. A percentile point that rests on too few samples to be
bounded in some repeat (report.basis) is drawn hollow, and the legend says so; with one repeat its bars
are that run's order-statistic interval. Offered load is the class's own rate at each stage,
so each class has its own x axis. Latency axes are logarithmic: a P95 of 15 ms and an SLO of 2 s must
both be readable on one plot, and saturation shows as a steep rise either way. Points of different
arms at the same load are nudged sideways a little so their error bars do not hide each other.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from bench_plugin.analysis.intervals import samples_needed
from bench_plugin.analysis.summary import is_searched
from bench_plugin.report.basis import FIGURES as PERCENTILES
from bench_plugin.report.basis import Bases
from bench_plugin.report.comparison import compared, error_bars
from bench_plugin.report.figures import (
    SLO_COLOUR,
    SLO_STYLE,
    ArmStyle,
    DataMarks,
    Layout,
    Plot,
    class_colour,
    figure_svg,
    grid,
    log_y,
    new_figure,
    plain_y,
    style,
)
from bench_plugin.results.summary import ArmClassFigures, ArmStageFigures, Comparison, Spread, StageComparison, Summary
from bench_plugin.results.words import BoundaryStatus

_DODGE = 0.02
"""Sideways nudge between arms, as a share of the x range."""

LAYOUT = Layout(left=0.8, right=0.3, top=0.35, bottom=1.0, wgap=1.0)
"""Panels side by side; the bottom margin holds the x labels and the arm legend."""
HEIGHT_IN = 3.7

class MetricLabel(NamedTuple):
    """How a figure drawn against load is named: its name, its unit and the SLO key that bounds it."""

    name: str
    unit: str
    slo_key: str | None


METRIC_LABELS: dict[str, MetricLabel] = {
    "latency_p50_ms": MetricLabel("P50 latency", "ms", None),
    "latency_p95_ms": MetricLabel("P95 latency", "ms", "p95_ms"),
    "ttft_p95_ms": MetricLabel("TTFT P95", "ms", "ttft_p95_ms"),
    "tpot_p95_ms": MetricLabel("TPOT P95", "ms per token", "tpot_p95_ms"),
    "itl_p95_ms": MetricLabel("ITL P95", "ms per chunk", None),
}
"""A class's figure over repeats (ArmClassFigures) -> how it is named."""

FIGURES: dict[str, Callable[[ArmClassFigures], Spread | None]] = {
    "latency_p50_ms": lambda f: f.latency_p50_ms,
    "latency_p95_ms": lambda f: f.latency_p95_ms,
    "ttft_p95_ms": lambda f: f.ttft_p95_ms,
    "tpot_p95_ms": lambda f: f.tpot_p95_ms,
    "itl_p95_ms": lambda f: f.itl_p95_ms,
    "normalised_throughput": lambda f: f.normalised_throughput,
}
"""The figures drawn against offered load, by name."""


def _arrival(summary: Summary, cls: str) -> str | None:
    for trial in summary.trials:
        for stage in trial.stages:
            if cls in stage.arrival:
                return stage.arrival[cls]
    return None


def load_label(summary: Summary, cls: str) -> str:
    """The x-axis label of a class's offered load, with its unit."""
    if _arrival(summary, cls) == "closed":
        return f"{cls} offered load (users, closed loop)"
    return f"{cls} offered load (req/s, realised)"


def _load(stage: ArmStageFigures) -> dict[str, float]:
    """A stage's load per class as plotted: the realised rate (where none was counted: the nominal one)."""
    return dict(stage.realised or stage.offered)


def _stages(summary: Summary) -> list[ArmStageFigures]:
    """Every arm's stages."""
    return [stage for figures in summary.arms.values() for stage in figures.stages]


def classes_of(summary: Summary) -> list[str]:
    """The workload classes that have figures, in summary order."""
    seen: list[str] = []
    for stage in _stages(summary):
        for name in stage.classes:
            if name not in seen:
                seen.append(name)
    order = summary.classes or []
    return sorted(seen, key=lambda n: order.index(n) if n in order else len(order))


Series = tuple[list[float], list[float], list[float], list[float]]
"""x (offered load), mean, and how far the 95% CI reaches below and above the mean."""


def _series(summary: Summary, arm: str, cls: str, key: str, bases: Bases | None = None,
            lows: list[bool] | None = None, mixes: list[Mix] | None = None) -> Series:
    """One figure over an arm's stages: x, mean and the CI's reach below and above it (0 without one).

    With ``bases``, a percentile over a single run takes that run's order-statistic interval as its
    bars, and ``lows`` (when given) gets, per point, whether it rests on too few samples to be bounded;
    ``mixes`` (when given), per point, the load mix of its stage (:func:`_mix`).
    """
    xs, means, below, above = [], [], [], []
    figures = summary.arms.get(arm)
    for position, stage in enumerate(figures.stages if figures else []):
        of_class = stage.classes.get(cls)
        fig = FIGURES[key](of_class) if of_class is not None else None
        load = _load(stage).get(cls)
        if fig is None or fig.mean is None or load is None:
            continue
        basis = bases.get(arm, position, cls, key) if bases is not None and key in PERCENTILES else None
        if mixes is not None:
            mixes.append(_mix(stage))
        xs.append(float(load))
        means.append(fig.mean)
        down, up = error_bars(fig)
        ends = basis.interval() if basis is not None and (down, up) == (0.0, 0.0) else None
        if ends is not None:  # one run: its own order-statistic interval (no top where it is not bounded)
            down = max(0.0, fig.mean - ends[0]) if ends[0] is not None else 0.0
            up = max(0.0, ends[1] - fig.mean) if ends[1] is not None else 0.0
        below.append(down)
        above.append(up)
        if lows is not None:
            lows.append(basis is not None and basis.low)
    return xs, means, below, above


Mix = tuple[tuple[str, float], ...]
"""A stage's load mix as a direction: each class's share of the total offered (rounded), by class."""


def _mix(stage: ArmStageFigures) -> Mix:
    loads = {c: float(r) for c, r in stage.offered.items() if r > 0}
    total = sum(loads.values()) or 1.0
    return tuple(sorted((c, round(r / total, 9)) for c, r in loads.items()))


def _lines(xs: list[float], mixes: list[Mix] | None) -> list[list[int]]:
    """The points of one arm's line, as runs of indices into ``xs``: one run in a sweep; searched, one per
    load mix (a ray, or a class alone), each from its lowest load up. Joining a searched arm's points in
    order of load alone would zigzag between the rays' mixes."""
    if mixes is None:
        return [list(range(len(xs)))] if xs else []
    runs: dict[Mix, list[int]] = {}
    for i, mix in enumerate(mixes):
        runs.setdefault(mix, []).append(i)
    return [sorted(run, key=lambda i: xs[i]) for run in runs.values()]


def _dodge(xs: list[float], rank: int, n_arms: int, span: float) -> list[float]:
    return [x + (rank - (n_arms - 1) / 2) * _DODGE * span for x in xs]


def _x_span(summary: Summary, cls: str) -> float:
    loads = [float(_load(s)[cls]) for s in _stages(summary) if cls in _load(s)]
    if not loads:
        return 1.0
    return (max(loads) - min(loads)) or max(abs(max(loads)), 1.0)


def _load_ticks(ax: Axes, summary: Summary, cls: str) -> None:
    """Ticks at the offered loads themselves in a sweep: stages are discrete steps, not a continuum. A search's
    loads fall wherever its brackets led, often close together: there the axis keeps matplotlib's own ticks."""
    if is_searched(summary.trials):
        return
    loads = sorted({float(_load(s)[cls]) for s in _stages(summary) if cls in _load(s)})
    if 0 < len(loads) <= 12:
        ax.set_xticks(loads, [f"{v:g}" for v in loads])


def _log_y(ax: Axes, low: float, high: float) -> None:
    log_y(ax)
    ax.set_ylim(low, high)


def _slo_line(ax: Axes, value: float, label: str, colour: str = SLO_COLOUR) -> None:
    ax.axhline(value, color=colour, **SLO_STYLE)
    ax.annotate(label, xy=(1.0, value), xycoords=("axes fraction", "data"), xytext=(-4, 3),
                textcoords="offset points", ha="right", va="bottom", color=colour, fontsize=8.5)


def _boundaries(ax: Axes, cls: str, comparison: Comparison, styles: dict[str, ArmStyle]) -> list[str]:
    """Dotted vertical lines at each arm's boundary load for this class; the arms that have one."""
    marked: list[str] = []
    if not compared(comparison):
        return marked
    for arm, comp in comparison.arms.items():
        b = comp.boundary
        if b.status != BoundaryStatus.REACHED or cls not in b.offered or arm not in styles:
            continue
        ax.axvline(b.offered[cls], color=styles[arm].colour, linestyle=":", linewidth=1.6)
        ax.annotate(f"boundary {arm}", xy=(b.offered[cls], 1.0), xycoords=("data", "axes fraction"),
                    xytext=(3, -3), textcoords="offset points", rotation=90, ha="left", va="top",
                    color=styles[arm].colour, fontsize=8)
        marked.append(arm)
    return marked


def _metric_panel(ax: Axes, summary: Summary, cls: str, key: str, styles: dict[str, ArmStyle],
                  marks: DataMarks, comparison: Comparison, bases: Bases) -> bool | None:
    """Draw one figure vs load, one line per arm, on a log y axis.

    False when there is nothing to draw; else whether some point was drawn hollow (too few samples).
    """
    name, unit, slo_key = METRIC_LABELS[key]
    span = _x_span(summary, cls)
    lows, highs = [], []
    hollow = False
    mixes: list[Mix] | None = [] if is_searched(summary.trials) else None
    for rank, (arm, st) in enumerate(styles.items()):
        weak: list[bool] = []
        if mixes is not None:
            mixes.clear()
        xs, means, below, above = _series(summary, arm, cls, key, bases, weak, mixes)
        if not xs:
            continue
        mean = np.asarray(means)
        down, up = np.asarray(below), np.asarray(above)
        positive = mean[mean > 0]
        if positive.size:
            lows.append(float(positive.min()))
        highs.append(float((mean + up).max()))
        # Log axes cannot show a lower bound at or below zero: such a bar runs to the bottom edge,
        # which reads as "the interval reaches down to nothing", as it does.
        lower = np.where(mean - down > 0, down, mean * 0.999)
        at = _dodge(xs, rank, len(styles), span)
        for n, run in enumerate(_lines(xs, mixes)):
            container = ax.errorbar([at[i] for i in run], [means[i] for i in run],
                                    yerr=[[lower[i] for i in run], [up[i] for i in run]], color=st.colour,
                                    marker=st.marker, markersize=5, linewidth=1.6, capsize=3,
                                    label=arm if n == 0 else None, markevery=[not weak[i] for i in run])
            marks.tag(container)
        if any(weak):  # too few samples to bound it: the same marker, hollow
            marks.tag(ax.plot([x for x, w in zip(at, weak, strict=True) if w],
                              [m for m, w in zip(means, weak, strict=True) if w], linestyle="none",
                              marker=st.marker, markersize=6, markerfacecolor="white", markeredgecolor=st.colour,
                              markeredgewidth=1.4))
            hollow = True
    if not lows:
        ax.text(0.5, 0.5, "no data", transform=ax.transAxes, ha="center", va="center", color="#888888")
        return False
    slo = (summary.slo.get(cls) or {}).get(slo_key) if slo_key else None
    top = max([*highs, slo or 0.0])
    _log_y(ax, min(lows) / 1.6, top * 1.8)
    if slo:
        _slo_line(ax, float(slo), f"SLO {slo:g} ms", class_colour(cls))
    _boundaries(ax, cls, comparison, styles)
    _load_ticks(ax, summary, cls)
    ax.set_ylabel(f"{name} ({unit}), log scale")
    ax.set_xlabel(load_label(summary, cls))
    ax.set_title(f"{cls}: {name}", color=class_colour(cls))
    return hollow


HOLLOW_LABEL = "hollow: too few samples to bound it (per run: P50 < {p50}, P95 < {p95})"
"""The legend entry of a hollow point (the counts are samples_needed(0.5) and samples_needed(0.95))."""


def _legend(fig: Figure, axes: list[Axes], extra: Sequence[tuple[Line2D, str]] = ()) -> None:
    handles, labels = [], []
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    texts = [f"arm: {lab}" for lab in labels]
    for handle, text in extra:
        handles.append(handle)
        texts.append(text)
    if handles:
        fig.legend(handles, texts, loc="lower center", bbox_to_anchor=(0.5, 0.01), ncols=min(len(texts), 6))


def _hollow_handle() -> tuple[Line2D, str]:
    """A legend entry for hollow points: a grey hollow circle."""
    handle = Line2D([], [], linestyle="none", marker="o", markersize=6, markerfacecolor="white",
                    markeredgecolor="#555555", markeredgewidth=1.4)
    return handle, HOLLOW_LABEL.format(p50=samples_needed(0.5), p95=samples_needed(0.95))


def latency_plot(summary: Summary, cls: str, styles: dict[str, ArmStyle], comparison: Comparison,
                 keys: tuple[str, str] = ("latency_p50_ms", "latency_p95_ms"), plot_id: str | None = None,
                 title: str | None = None, bases: Bases | None = None) -> Plot:
    """Two figures of one class against offered load, side by side (P50 and P95 by default); ``bases``: the
    summary's figure bases where the caller has them already."""
    plot_id = plot_id or f"latency-{cls}"
    svg, hollow = _latency_svg(summary, cls, styles, comparison, keys, plot_id, bases or Bases(summary))
    has_boundary = compared(comparison) and any(
        a.boundary.status == BoundaryStatus.REACHED and cls in a.boundary.offered for a in comparison.arms.values())
    caption = (f"How {cls} latency grows with its offered load, per arm (mean over repeats; bars: 95% CI over "
               "repeats, or with one repeat its order-statistic interval). Read the P95 panel against the dashed "
               "SLO line: the arm whose line crosses it first degrades first.")
    caption += _hollow_caption(hollow)
    if has_boundary:
        caption += " Dotted vertical lines mark each arm's operating boundary."
    return Plot(plot_id, title or f"{cls}: latency vs offered load", svg, caption)


def _latency_svg(summary: Summary, cls: str, styles: dict[str, ArmStyle], comparison: Comparison,
                 keys: tuple[str, str], plot_id: str, bases: Bases) -> tuple[str, bool]:
    """The two panels' SVG, and whether some point was drawn hollow."""
    marks = DataMarks(plot_id)
    with style():
        fig = new_figure(HEIGHT_IN)
        axes = grid(fig, 1, 2, LAYOUT)
        hollow = False
        for ax, key in zip(axes, keys, strict=True):
            hollow = bool(_metric_panel(ax, summary, cls, key, styles, marks, comparison, bases)) or hollow
        _legend(fig, axes, [_hollow_handle()] if hollow else [])
        return figure_svg(fig, plot_id), hollow


def _hollow_caption(hollow: bool) -> str:
    if not hollow:
        return ""
    return (f" A hollow marker is a percentile that rests on too few samples in some repeat for its 95% interval "
            f"to be bounded (a P95 needs {samples_needed(0.95)}): read it as rough; the per-stage table gives each "
            "point's sample count.")


def streaming_plot(summary: Summary, styles: dict[str, ArmStyle], comparison: Comparison,
                   bases: Bases | None = None) -> Plot:
    """LLM time to first token and time per output token (P95) against offered load."""
    svg, hollow = _latency_svg(summary, "llm", styles, comparison, ("ttft_p95_ms", "tpot_p95_ms"), "llm-streaming",
                               bases or Bases(summary))
    caption = ("TTFT (time to first token, from the intended send time) shows queueing before the model starts; "
               "TPOT (time per output token) shows how fast it streams once started. A sharing arm that raises "
               "TTFT but not TPOT is queueing, not computing slower. Dashed lines: the SLOs.")
    caption += _hollow_caption(hollow)
    return Plot("llm-streaming", "llm: TTFT P95 and TPOT P95 vs offered load", svg, caption)


def throughput_plot(summary: Summary, styles: dict[str, ArmStyle]) -> Plot | None:
    """Each class's throughput divided by the control's at the same stage, one panel per class."""
    classes = classes_of(summary)
    sharing = {arm: st for arm, st in styles.items() if not st.is_control}
    if not classes or not sharing:
        return None
    marks = DataMarks("throughput")
    searched = is_searched(summary.trials)
    with style():
        fig = new_figure(HEIGHT_IN)
        axes = grid(fig, 1, len(classes), LAYOUT)
        for ax, cls in zip(axes, classes, strict=True):
            span = _x_span(summary, cls)
            ax.axhline(1.0, color="#222222", linestyle="--", linewidth=1.0)
            ax.annotate(f"control ({summary.control}) = 1", xy=(1.0, 1.0), xycoords=("axes fraction", "data"),
                        xytext=(-4, 3), textcoords="offset points", ha="right", va="bottom", fontsize=8.5)
            values = [1.0]
            for rank, (arm, st) in enumerate(sharing.items()):
                mixes: list[Mix] | None = [] if searched else None
                xs, means, below, above = _series(summary, arm, cls, "normalised_throughput", mixes=mixes)
                if not xs:
                    continue
                values += [m + u for m, u in zip(means, above, strict=True)]
                values += [m - d for m, d in zip(means, below, strict=True)]
                at = _dodge(xs, rank, len(sharing), span)
                for n, run in enumerate(_lines(xs, mixes)):
                    marks.tag(ax.errorbar([at[i] for i in run], [means[i] for i in run],
                                          yerr=[[below[i] for i in run], [above[i] for i in run]], color=st.colour,
                                          marker=st.marker, markersize=5, linewidth=1.6, capsize=3,
                                          label=arm if n == 0 else None))
            low, high = min(values), max(values)
            pad = max(0.1, (high - low) * 0.15)
            ax.set_ylim(max(0.0, low - pad), high + pad)
            plain_y(ax)
            _load_ticks(ax, summary, cls)
            ax.set_title(f"{cls}: throughput vs control", color=class_colour(cls))
            ax.set_xlabel(load_label(summary, cls))
            ax.set_ylabel("throughput / control (same stage)")
        _legend(fig, axes)
        svg = figure_svg(fig, "throughput")
    caption = ("Successful requests per second of each sharing arm divided by the control's at the same stage "
               "and repeat (1 = the same as running alone): the geometric mean over repeats, with its 95% CI "
               "from the log scale, so the bars are not even. Below 1, the class loses throughput to sharing.")
    return Plot("throughput", "Normalised throughput per class vs offered load", svg, caption)


StageFigure = Callable[[StageComparison], Spread | None]

_FAIRNESS_PANELS: tuple[tuple[str, StageFigure, str, str, str], ...] = (
    ("fairness", lambda s: s.fairness, "fairness", "Jain's index over classes", "1 = equal shares"),
    ("consolidation_gain", lambda s: s.consolidation_gain, "consolidation gain", "sum of normalised throughputs",
     "{n} = each as fast as alone"),
    ("goodput_per_device_ratio", lambda s: s.goodput_per_device_ratio, "goodput per device", "arm / control",
     "control = 1"),
)


def fairness_figure(comparison: Comparison, styles: dict[str, ArmStyle], stage_names: list[str]) -> Figure | None:
    """The figure of :func:`fairness_plot` (call inside ``style()``); None when there is nothing to draw.

    Every panel's y axis starts at 0 and reaches above its reference line (1, or the number of classes
    for the consolidation gain), with plain tick labels: a gain of 2.999 next to 3.000 must look equal,
    not like a collapse on an axis magnified to a thousandth.
    """
    if not compared(comparison):
        return None
    arms = {name: comp for name, comp in comparison.arms.items() if not comp.is_control and name in styles}
    panels = [p for p in _FAIRNESS_PANELS
              if any(p[1](s) is not None for comp in arms.values() for s in comp.stages)]
    if not panels:
        return None
    n_classes = max((len(s.classes) or len(s.offered) for c in arms.values() for s in c.stages), default=1)
    marks = DataMarks("fairness")
    fig = new_figure(HEIGHT_IN)
    axes = grid(fig, 1, len(panels), LAYOUT)
    for ax, (key, figure, title, label, ref_label) in zip(axes, panels, strict=True):
        ref = float(n_classes) if key == "consolidation_gain" else 1.0
        ax.axhline(ref, color="#222222", linestyle="--", linewidth=1.0)
        ax.annotate(ref_label.format(n=n_classes), xy=(1.0, ref), xycoords=("axes fraction", "data"),
                    xytext=(-4, 3), textcoords="offset points", ha="right", va="bottom", fontsize=8.5)
        for rank, (arm, comp) in enumerate(arms.items()):
            pts = [(s.index, f.mean, f) for s in comp.stages if (f := figure(s)) is not None and f.mean is not None]
            if not pts:
                continue
            xs = [i + (rank - (len(arms) - 1) / 2) * 0.04 for i, _, _ in pts]
            st = styles[arm]
            bars = [error_bars(f) for _, _, f in pts]
            yerr = [[d for d, _ in bars], [u for _, u in bars]]
            marks.tag(ax.errorbar(xs, [mean for _, mean, _ in pts], yerr=yerr, color=st.colour, marker=st.marker,
                                  markersize=5, linewidth=1.6, capsize=3, label=arm))
        if key == "fairness":
            ax.set_ylim(0.0, 1.1)
        else:  # from 0, with room above the reference line for its label
            high = max(ax.get_ylim()[1], ref)
            ax.set_ylim(0.0, high * 1.12)
        plain_y(ax)
        ax.set_xticks(range(len(stage_names)), stage_names)
        ax.set_xlabel("stage (offered load rises to the right)")
        ax.set_ylabel(label)
        ax.set_title(title)
    _legend(fig, axes)
    return fig


def fairness_plot(comparison: Comparison, styles: dict[str, ArmStyle], stage_names: list[str]) -> Plot | None:
    """Fairness, consolidation gain and goodput per device of each sharing arm, per stage."""
    with style():
        fig = fairness_figure(comparison, styles, stage_names)
        if fig is None:
            return None
        svg = figure_svg(fig, "fairness")
    caption = ("Per stage, for each sharing arm: Jain's index over the classes' normalised throughputs "
               "(1 = every class keeps the same share), the consolidation gain (the dashed line is every class as fast "
               "as alone, on one device instead of several) and goodput per device (requests meeting their SLO per "
               "second per device) against the control: sharing is worth it where that ratio is above 1.")
    return Plot("fairness", "Fairness and consolidation per arm", svg, caption)
