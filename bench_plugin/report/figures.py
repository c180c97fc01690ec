"""Figures: one look for every plot in report.html, and the one way a figure becomes inline SVG.

Every plot uses the same colour for a workload class and the same colour and marker for an arm, so a
reader who learned "llm is blue, the control is black" on the first plot can rely on it on the last.
Figures are built from ``matplotlib.figure.Figure`` directly, never through pyplot: no global figure
registry, no interactive backend to pick, nothing left behind between reports (the matplotlib
documentation's advice for figures made inside a server). Settings are applied with
``matplotlib.rc_context`` around each build and save, so importing this module changes nothing.

Several SVGs live in one HTML document, so every id of a figure is prefixed with the plot's name
(matplotlib numbers its groups ``axes_1``, ``line2d_1``... in every figure alike), and the hashed
ids are salted with it too (matplotlib's default salt is random: the file would differ at every
render). Data artists are tagged with ids starting ``data-`` so a browser test can count the marks
that carry data (not axes, ticks or text).
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import matplotlib
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.container import Container
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator

from bench_plugin.results.words import StageStatus

if TYPE_CHECKING:
    from matplotlib.typing import RcKeyType

CLASS_COLOURS: dict[str, str] = {"llm": "#1f77b4", "embedding": "#2ca02c", "asr": "#9467bd"}
"""One colour per workload class, the same in every plot (blue, green, purple: none is an arm colour)."""

OTHER_CLASS_COLOUR = "#7f7f7f"

CONTROL_COLOUR = "#222222"
ARM_COLOURS: tuple[str, ...] = ("#ff7f0e", "#d62728", "#17becf", "#8c564b", "#e377c2", "#bcbd22")
"""Colours of the non-control arms in summary.json order; warm and cyan tones, distinct from the classes."""
ARM_MARKERS: tuple[str, ...] = ("o", "s", "^", "D", "v", "P", "X")
"""Markers double the arm colours, for readers who cannot tell the colours apart and for grey print."""

STAGE_STATUS_COLOURS: dict[str, str] = {
    StageStatus.COMPLETED: "#cfe8cf",
    StageStatus.ABORTED: "#f4a6a6",
    StageStatus.INTERRUPTED: "#ffd59e",
    StageStatus.INVALID: "#c9b3e6",
    StageStatus.RUNNING: "#dddddd",
    StageStatus.SKIPPED: "#eeeeee",
}
STAGE_STATUS_LABELS: dict[str, str] = {
    StageStatus.COMPLETED: "completed",
    StageStatus.ABORTED: "aborted (rolled back)",
    StageStatus.INTERRUPTED: "interrupted",
    StageStatus.INVALID: "invalid (load not as stated)",
    StageStatus.RUNNING: "never closed",
    StageStatus.SKIPPED: "skipped",
}

SLO_STYLE: dict[str, Any] = {"linestyle": "--", "linewidth": 1.2}
"""SLO lines are always dashed; their colour is the class's (or dark red on one-class plots)."""
SLO_COLOUR = "#b22222"

WIDTH_IN = 11.0
"""Every figure is as wide as the page column, so text has one size throughout the report."""

RC: dict[RcKeyType, Any] = {
    "font.size": 9.5,
    "axes.titlesize": 10.5,
    "axes.titleweight": "bold",
    "axes.titley": 1.0,  # placed, not measured: matplotlib otherwise sizes every tick of every panel per title
    "axes.labelsize": 9.5,
    "axes.grid": True,
    "grid.color": "#e3e3e3",
    "grid.linewidth": 0.6,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "legend.fontsize": 8.5,
    "legend.framealpha": 0.9,
    "figure.dpi": 72,
    # Text stays text: smaller files, selectable and searchable labels; the font list ends in a generic
    # family so a machine without DejaVu still shows every label.
    "svg.fonttype": "none",
}


def plain_y(ax: Axes) -> None:
    """Tick labels of a linear y axis as the numbers themselves: no offset ("+2.999"), no scientific notation.

    matplotlib's default formatter writes 2.999 and 3.000 as "0.000" and "+0.001" above an offset when
    the axis spans little, which reads as a collapse; every linear axis of the report uses this instead.
    """
    ax.ticklabel_format(axis="y", style="plain", useOffset=False)


def log_y(ax: Axes) -> None:
    """A log y axis ticked at 1, 2 and 5 of each decade, labelled as plain numbers, without minor ticks.

    Three labelled ticks a decade already read as a scale; matplotlib's eight minor ticks a decade on top
    were unlabelled marks that cost about a third of all the tick objects a report draws.
    """
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_locator(NullLocator())


def class_colour(name: str) -> str:
    """The colour of a workload class (grey for a class this report does not know)."""
    return CLASS_COLOURS.get(name, OTHER_CLASS_COLOUR)


@dataclass(frozen=True)
class ArmStyle:
    """How one arm is drawn everywhere."""

    colour: str
    marker: str
    is_control: bool


def arm_styles(arms: Iterable[str], control: str | None) -> dict[str, ArmStyle]:
    """A fixed style per arm: the control in black with circles, the others in summary.json order."""
    styles: dict[str, ArmStyle] = {}
    others = 0
    for name in arms:
        if name == control:
            styles[name] = ArmStyle(CONTROL_COLOUR, "o", True)
        else:
            styles[name] = ArmStyle(ARM_COLOURS[others % len(ARM_COLOURS)],
                                    ARM_MARKERS[(others + 1) % len(ARM_MARKERS)], False)
            others += 1
    return styles


@dataclass(frozen=True)
class Plot:
    """One plot of the report: an anchor id, a title, the inline SVG and what to read in it."""

    id: str
    title: str
    svg: str
    caption: str


class DataMarks:
    """Tags a figure's data artists with unique ``data-<plot>-<n>`` ids (kept as SVG group ids)."""

    def __init__(self, plot_id: str) -> None:
        self.plot_id = plot_id
        self.count = 0

    def tag(self, *items: Artist | Container | Iterable[Artist] | None) -> None:
        """Tag artists, containers (errorbar) or lists of artists as data."""
        for item in items:
            if item is None:
                continue
            if isinstance(item, Artist):
                item.set_gid(f"data-{self.plot_id}-{self.count}")
                self.count += 1
            elif isinstance(item, Container):
                self.tag(*[child for child in item.get_children() if isinstance(child, Artist)])
            else:
                self.tag(*item)


@contextmanager
def style() -> Iterator[None]:
    """The report's matplotlib settings, for building a figure (restored afterwards)."""
    with matplotlib.rc_context(RC):
        yield


def new_figure(height_in: float) -> Figure:
    """A page-wide figure (call inside ``style()``); lay its axes out with :func:`grid`."""
    return Figure(figsize=(WIDTH_IN, height_in))


@dataclass(frozen=True)
class Layout:
    """Fixed margins and gaps between panels, in inches.

    Fixed, not computed by matplotlib's constrained layout: that layout took half of the render time
    (it measures every tick label, repeatedly), and fixed margins put the x axis of every trial's
    timeline at the same place on the page, so trials compare by scrolling.
    """

    left: float
    right: float
    top: float
    bottom: float
    hgap: float = 0.0
    wgap: float = 0.0


def grid(fig: Figure, nrows: int, ncols: int, layout: Layout, height_ratios: list[float] | None = None,
         sharex: bool = False) -> list[Axes]:
    """The figure's axes, row by row, placed by ``layout``."""
    width, height = fig.get_size_inches()
    cell_w = (width - layout.left - layout.right - layout.wgap * (ncols - 1)) / ncols
    cell_h = (height - layout.top - layout.bottom - layout.hgap * (nrows - 1)) / nrows
    spec = fig.add_gridspec(
        nrows, ncols, left=layout.left / width, right=1 - layout.right / width, top=1 - layout.top / height,
        bottom=layout.bottom / height, wspace=layout.wgap / cell_w, hspace=layout.hgap / cell_h,
        height_ratios=height_ratios,
    )
    axes: list[Axes] = []
    for row in range(nrows):
        for col in range(ncols):
            share = axes[0] if sharex and axes else None
            axes.append(fig.add_subplot(spec[row, col], sharex=share))
    if sharex:
        for ax in axes[:-ncols]:
            ax.tick_params(labelbottom=False)
    return axes


_PROLOG = re.compile(r"^.*?(?=<svg)", re.S)
_ID = re.compile(r'\bid="(?!data-)([^"]+)"')
_REF = re.compile(r'(url\(#|href="#)(?!data-)([^)"]+)')
_SIZE = re.compile(r'<svg([^>]*?) width="([\d.]+)pt" height="([\d.]+)pt"')


def figure_svg(fig: Figure, salt: str) -> str:
    """The figure as an ``<svg>`` element ready to inline in HTML (no XML prolog, scales to the page)."""
    buf = io.StringIO()
    settings: dict[RcKeyType, Any] = {**RC, "svg.hashsalt": salt}
    with matplotlib.rc_context(settings):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    text = _PROLOG.sub("", buf.getvalue(), count=1)
    text = _ID.sub(lambda m: f'id="{salt}-{m.group(1)}"', text)
    text = _REF.sub(lambda m: f"{m.group(1)}{salt}-{m.group(2)}", text)

    def _responsive(match: re.Match[str]) -> str:
        # Keep the drawn size as the most it grows to, and let it shrink with the window.
        return f'<svg{match.group(1)} style="width:100%;height:auto;max-width:{match.group(2)}pt" role="img"'

    return _SIZE.sub(_responsive, text, count=1)
