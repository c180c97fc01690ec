"""Where the added latency goes: per sharing arm, each class's latency growth against the control, split into the
server's queue, its compute, the client's own wait and the rest (analysis/queueing.py), in three forms:

- a sentence for the answer (``growth_text``): the class the arm slows the most where its answer rests;
- a table per arm (``section``): per stage and class, the growth of each part, mean
  over paired repeats with its 95% interval, around the P95 where the replies said their split, else on average;
- a picture per arm (``split_plot``): the same growths as stacked bars, one bar per stage and class.

A queue that grows calls for more replicas or batching; compute that grows calls for another sharing mode or a
bigger slice. Everything comes from ``comparison.arms.<arm>.stages[].classes.<class>.latency_split``.
"""

from __future__ import annotations

from bench_plugin.report.figures import DataMarks, Plot, figure_svg, new_figure, style
from bench_plugin.report.page import Block, Figure, Heading, Section, table
from bench_plugin.results.server_figures import LatencyGrowth, LatencySplit, PartsGrowth
from bench_plugin.results.spread import Spread
from bench_plugin.results.summary import Summary

PARTS: tuple[tuple[str, str, str], ...] = (
    ("queue_ms", "server queue", "#d62728"),
    ("compute_ms", "server compute", "#1f77b4"),
    ("client_ms", "client", "#7f7f7f"),
    ("other_ms", "the rest", "#bcbd22"),
)
"""Each part: its field in PartsGrowth, its name in the report, its colour in the picture."""

BASIS = {"replies": "each reply's own split", "metrics": "the server's metrics over the stage"}
COLUMNS = ("stage", "class", "split", "control", "growth", "server queue", "server compute", "client", "the rest")


def _ms(value: float | None, unit: str = " ms") -> str:
    """``+31 ms``, ``+2.4 ms``: tenths below 10 ms, whole milliseconds above (``unit``: what follows the number)."""
    if value is None:
        return "-"
    return (f"{value:+.1f}" if abs(value) < 10 else f"{value:+.0f}") + unit


def _part(growth: PartsGrowth, field: str) -> Spread | None:
    figure = getattr(growth, field)
    return figure if isinstance(figure, Spread) else None


def _cell(figure: Spread | None) -> str:
    if figure is None or figure.mean is None:
        return "-"
    if figure.lo is not None and figure.hi is not None and figure.n > 1:
        return f"{_ms(figure.mean)} ({_ms(figure.lo, '')} to {_ms(figure.hi, '')})"
    return _ms(figure.mean)


def chosen(split: LatencySplit) -> tuple[PartsGrowth, str]:
    """The growth the report shows (around the P95 where the replies said it, else on average) and its words."""
    if split.p95 is not None:
        return split.p95, "around the P95"
    return split.mean, "on average"


def growth_text(growth: LatencyGrowth, stage_name: str | None = None) -> str:
    """One sentence: where the latency the arm adds to the class it slows the most goes."""
    parts, where = chosen(growth.split)
    said = [(name, figure.mean) for field, name, _ in PARTS
            if (figure := _part(parts, field)) is not None and figure.mean is not None]
    said.sort(key=lambda item: -abs(item[1]))
    slower = f" P95 {growth.slowdown_p95:.2f}x the control's" if growth.slowdown_p95 is not None else ""
    stage = f"stage {growth.stage}" + (f" ({stage_name})" if stage_name else "")
    total = parts.total_ms.mean
    return (f"Where it goes: at {stage}, {growth.workload}{slower}; {where} {_ms(total)}: "
            + ", ".join(f"{name} {_ms(value)}" for name, value in said)
            + f" (from {BASIS[growth.split.split_from]}).")


def stage_names(summary: Summary) -> dict[int, str]:
    """Stage index -> its name, from the first trial that ran it."""
    names: dict[int, str] = {}
    for trial in summary.trials:
        for stage in trial.stages:
            if stage.name:
                names.setdefault(stage.index, stage.name)
    return names


def arm_rows(summary: Summary, arm: str) -> list[list[str]]:
    """The arm's table rows (COLUMNS), one per stage and class with a split."""
    names = stage_names(summary)
    out = []
    for stage in summary.comparison.arms[arm].stages:
        for name, c in stage.classes.items():
            if c.latency_split is None:
                continue
            parts, where = chosen(c.latency_split)
            label = f"{stage.index} {names.get(stage.index, '')}".strip()
            basis = f"{where}, {BASIS[c.latency_split.split_from]}"
            out.append([label, name, basis, _ms(parts.control_total_ms.mean).lstrip("+"), _cell(parts.total_ms),
                        *(_cell(_part(parts, field)) for field, _, _ in PARTS)])
    return out


def split_arms(summary: Summary) -> list[str]:
    """The sharing arms with at least one split, in summary order."""
    return [arm for arm, comp in summary.comparison.arms.items() if not comp.is_control
            and any(c.latency_split is not None for s in comp.stages for c in s.classes.values())]


def section(summary: Summary, figures: bool = True) -> Section | None:
    """The section (None where no arm has a split): per arm its picture (``figures``: drawn; report.md has no
    pictures, so its page skips drawing them) and its table."""
    arms = split_arms(summary)
    if not arms:
        return None
    blocks: list[Block] = []
    for arm in arms:
        blocks.append(Heading(arm))
        if figures and (plot := split_plot(summary, arm)) is not None:
            blocks.append(Figure.of(plot, titled=False))
        blocks.append(table(COLUMNS, arm_rows(summary, arm), f"split-{arm}"))
    return Section("where-it-goes", "Where the added latency goes", tuple(blocks))


def split_plot(summary: Summary, arm: str) -> Plot | None:
    """Per stage and class, the growth of each part as a stacked horizontal bar (negative parts to the left)."""
    names = stage_names(summary)
    bars: list[tuple[str, PartsGrowth]] = []
    for stage in summary.comparison.arms[arm].stages:
        for name, c in stage.classes.items():
            if c.latency_split is not None:
                label = f"stage {stage.index} {names.get(stage.index, '')}".strip()
                bars.append((f"{label}: {name}", chosen(c.latency_split)[0]))
    if not bars:
        return None
    plot_id = f"split-{arm}"
    marks = DataMarks(plot_id)
    with style():
        height = max(2.4, 0.42 * len(bars) + 1.4)
        fig = new_figure(height)
        ax = fig.add_axes((0.22, 0.95 / height, 0.74, 1 - 1.45 / height))
        drawn: set[str] = set()
        for row, (_, growth) in enumerate(reversed(bars)):
            right = left = 0.0
            for field, label, colour in PARTS:
                figure = _part(growth, field)
                if figure is None or figure.mean is None:
                    continue
                start = right if figure.mean >= 0 else left - abs(figure.mean)
                marks.tag(ax.barh([row], [abs(figure.mean)], left=[start], color=colour, height=0.6,
                                  edgecolor="white", linewidth=0.6,
                                  label=label if label not in drawn else None))
                drawn.add(label)
                if figure.mean >= 0:
                    right += figure.mean
                else:
                    left -= abs(figure.mean)
            total = growth.total_ms.mean
            if total is not None:
                marks.tag(ax.plot([total], [row], marker="|", markersize=14, color="#222222", linestyle="none",
                                  label="total growth" if "total" not in drawn else None))
                drawn.add("total")
        ax.axvline(0.0, color="#222222", linewidth=0.8)
        ax.set_yticks(range(len(bars)), [label for label, _ in reversed(bars)])
        ax.set_ylim(-0.7, len(bars) - 0.3)
        ax.set_xlabel(f"latency added by {arm} against the control at the same stage (ms)")
        ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=5, frameon=False, fontsize=8.5)
        svg = figure_svg(fig, plot_id)
    caption = (f"Per stage and class, how much latency {arm} adds against the control at the same stage (the bar's "
               "tick: the whole growth) and where it goes: waiting in the server's queue, the server computing, the "
               "client's own wait, the rest (network, reading the reply). Around the P95 where the replies said "
               "their split, else on average from the server's metrics; means over paired repeats. A growing queue "
               "calls for more replicas or batching; growing compute for another sharing mode or a bigger slice.")
    return Plot(plot_id, f"Where {arm}'s added latency goes", svg, caption)
