"""The report as a document tree: a page of sections of paragraphs, bullets, tables and figures.

A section module builds its :class:`Section` from the typed summary (or returns None where it has nothing to
show); report/document.py puts the sections in one :class:`Page`, and report/page_markdown.py and
report/page_html.py write that one tree as report.md and report.html, so the two pages say the same thing in
the same words. Text is plain: a writer escapes it for its format. Inline
marks are types, not markup: :class:`Strong`, :class:`Em`, :class:`Code`, :class:`Pct` (a percentile with what
it rests on, report.basis) and :class:`Badge` (a verdict's call).

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
class Em:
    """Text set apart: italic in both pages."""

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


Inline = str | Strong | Em | Code | Pct | Badge
"""One piece of a line of text."""

Text = tuple[Inline, ...]
"""A line of text: its pieces in order."""


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


@dataclass(frozen=True)
class Lines:
    """Several lines in one table cell (``css``: report.html's class of the cell's block)."""

    lines: tuple[Text, ...]
    css: str = ""


Cell = Text | Bullets | Lines
"""A table cell: a line of text, bullets, or lines."""


@dataclass(frozen=True)
class Table:
    """A table: its header, and its rows of cells (``css``: report.html's class)."""

    header: tuple[str, ...]
    rows: tuple[tuple[Cell, ...], ...]
    css: str = ""


def table(header: Iterable[str], rows: Iterable[Iterable[Inline | Cell]], css: str = "") -> Table:
    """A table whose cells may be given as single pieces (a string, a :class:`Pct`...): each becomes a line."""
    return Table(tuple(header), tuple(tuple(_cell(c) for c in row) for row in rows), css)


def _cell(cell: Inline | Cell) -> Cell:
    return cell if isinstance(cell, tuple | Bullets | Lines) else (cell,)


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


@dataclass(frozen=True)
class Facts:
    """Named values, one per line: report.html's two-column table (the names in bold), report.md's bullets."""

    pairs: tuple[tuple[str, Text], ...]


@dataclass(frozen=True)
class Part:
    """A part of a section with a title of its own (one level below the section's): report.html shows it as a
    disclosure, open (``css``: its class); report.md as a heading and its blocks."""

    title: str
    blocks: tuple[Block, ...]
    css: str = ""
    open: bool = True
    """Whether report.html shows it open (a long one folds away)."""


Block = Paragraph | Bullets | Table | Facts | Figure | Heading | Part
"""What a section is made of."""


@dataclass(frozen=True)
class Section:
    """One section of the report: its anchor (also the key of its "how to read this", report.guide), title and
    blocks."""

    id: str
    title: str
    blocks: tuple[Block, ...]
    short: str = ""
    """Its name in report.html's contents line where the title is long (``Conditions``); "": the title."""


@dataclass(frozen=True)
class Page:
    """The whole report: its title, the facts under it, its sections in order and what its footer says."""

    title: str
    facts: tuple[tuple[str, str], ...]
    sections: tuple[Section, ...]
    footer: str
    state: str
    """The campaign's state (``completed``, ``interrupted``...): how report.html colours the facts."""
    schema: str
    """The summary's schema version, named in the footer."""
