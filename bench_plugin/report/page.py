"""The report as a document tree: sections of paragraphs, bullets, tables and figures, built once from the summary.

A section module builds its :class:`Section` from the typed summary (or returns None where it has nothing to
show); report/page_markdown.py and report/page_html.py write that one tree as report.md and report.html, so
the two pages say the same thing in the same words. Text is plain: a writer escapes it for its format. Inline
marks are types, not markup: :class:`Strong`, :class:`Code`, :class:`Pct` (a percentile with what it rests on,
report.basis) and :class:`Badge` (a verdict's call).

Nothing here imports matplotlib: a :class:`Figure` carries its SVG already drawn (report.figures.Plot's fields).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bench_plugin.report.basis import Basis
    from bench_plugin.report.figures import Plot


@dataclass(frozen=True)
class Strong:
    """Text that stands out: bold in both pages."""

    text: str


@dataclass(frozen=True)
class Code:
    """A command, a path or a hash: monospace."""

    text: str


@dataclass(frozen=True)
class Pct:
    """A percentile's text with what it rests on (report.basis): its count after it, muted and marked where low."""

    text: str
    basis: Basis | None


@dataclass(frozen=True)
class Badge:
    """A verdict's call as a badge (``css``: report.html's colour class); bold in report.md."""

    text: str
    css: str


Inline = str | Strong | Code | Pct | Badge
"""One piece of a line of text."""

Text = tuple[Inline, ...]
"""A line of text: its pieces in order."""


def text(*parts: Inline) -> Text:
    """A line of text from its pieces."""
    return parts


@dataclass(frozen=True)
class Paragraph:
    """A paragraph; ``css`` (report.html's class, e.g. ``note``) changes only its look."""

    text: Text
    css: str = ""


@dataclass(frozen=True)
class Item:
    """One bullet, and the bullets nested under it."""

    text: Text
    sub: Bullets | None = None


@dataclass(frozen=True)
class Bullets:
    """A bulleted list (``css``: report.html's class)."""

    items: tuple[Item, ...]
    css: str = ""


def bullets(lines: Iterable[str | Text], css: str = "") -> Bullets:
    """Bullets of plain lines (or lines of pieces), none nested."""
    return Bullets(tuple(Item((line,) if isinstance(line, str) else line) for line in lines), css)


Cell = Text | Bullets
"""A table cell: a line of text, or bullets."""


@dataclass(frozen=True)
class Table:
    """A table: its header, and its rows of cells (``css``: report.html's class)."""

    header: tuple[str, ...]
    rows: tuple[tuple[Cell, ...], ...]
    css: str = ""


def table(header: Iterable[str], rows: Iterable[Iterable[Inline | Text | Bullets]], css: str = "") -> Table:
    """A table whose cells may be given as single pieces (a string, a :class:`Pct`...): each becomes a line."""
    return Table(tuple(header), tuple(tuple(_cell(c) for c in row) for row in rows), css)


def _cell(cell: Inline | Text | Bullets) -> Cell:
    return cell if isinstance(cell, tuple | Bullets) else (cell,)


@dataclass(frozen=True)
class Figure:
    """A plot, drawn: its anchor, title, inline SVG and caption. report.md has no pictures and leaves it out;
    ``titled``: report.html shows its title above it."""

    id: str
    title: str
    svg: str
    caption: str
    titled: bool = True

    @classmethod
    def of(cls, plot: Plot, titled: bool = True) -> Figure:
        """The figure of a drawn plot (report.figures.Plot)."""
        return cls(plot.id, plot.title, plot.svg, plot.caption, titled)


@dataclass(frozen=True)
class Heading:
    """A heading inside a section (one level below the section's)."""

    text: str


Block = Paragraph | Bullets | Table | Figure | Heading
"""What a section is made of."""


@dataclass(frozen=True)
class Section:
    """One section of the report: its anchor (also the key of its "how to read this", report.guide), title and
    blocks."""

    id: str
    title: str
    blocks: tuple[Block, ...]
