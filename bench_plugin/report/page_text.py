"""The terminal's writer of the document tree (report/page.py): a page, or blocks, as plain indented lines.

What a headless campaign prints at its end (report/terminal.py) and what `bench-plugin plan` prints
(report/plan.py) are trees of the same blocks as report.html and report.md, written here for a terminal: no
markup, no pictures. A page is its title, its facts as ``name: value`` lines, its sections and its footer; a
section with a title has a blank line and its title before it, and its blocks are indented two spaces. A
paragraph is its line; bullets are lines without a mark, each one's nested bullets two spaces further in; a
table is its columns aligned, under its header and a rule; named values are ``name: value`` lines; a heading
is its line; a part is its title and its blocks two spaces further in. A figure is left out, as report.md
leaves it out (and a section of figures alone). A percentile carries its count as in report.md, and its low mark.
"""

from __future__ import annotations

from collections.abc import Iterable

from bench_plugin.report.basis import LOW_MARK
from bench_plugin.report.page import (
    Block,
    Bullets,
    Cell,
    Facts,
    Figure,
    Heading,
    Inline,
    Lines,
    Page,
    Paragraph,
    Part,
    Pct,
    Section,
    Table,
    Text,
)

INDENT = "  "
"""One level of indentation."""


def inline(piece: Inline) -> str:
    """One piece of text as plain text: marks dropped, a percentile with its count."""
    if isinstance(piece, str):
        return piece
    if isinstance(piece, Pct):
        if piece.text == "-" or piece.basis is None:
            return piece.text
        return f"{piece.text} ({piece.basis.n_text()})" + (f" {LOW_MARK}" if piece.basis.low else "")
    return piece.text


def line(pieces: Text) -> str:
    """A line of text, on one line."""
    return "".join(inline(p) for p in pieces).replace("\n", " ")


def cell(value: Cell) -> str:
    """A table cell on one line: bullets as ``a; b (c; d)``, lines joined by ``; ``."""
    if isinstance(value, Bullets):
        return "; ".join(line(item.text) + (f" ({cell(item.sub)})" if item.sub is not None else "")
                         for item in value.items) or "-"
    if isinstance(value, Lines):
        return "; ".join(line(piece) for piece in value.lines)
    return line(value)


def _bullets(value: Bullets, depth: int) -> list[str]:
    out = []
    for item in value.items:
        out.append(INDENT * depth + line(item.text))
        if item.sub is not None:
            out += _bullets(item.sub, depth + 1)
    return out


def _table(value: Table, depth: int) -> list[str]:
    rows = [list(value.header), *([cell(c) for c in row] for row in value.rows)]
    widths = [max(len(row[i]) for row in rows if i < len(row)) for i in range(len(value.header))]
    rows.insert(1, ["-" * w for w in widths])
    return [(INDENT * depth + "  ".join(text.ljust(w) for text, w in zip(row, widths, strict=False))).rstrip()
            for row in rows]


def block(value: Block, depth: int = 0) -> list[str]:
    """One block's lines, ``depth`` levels in ([] for a figure)."""
    pad = INDENT * depth
    if isinstance(value, Paragraph):
        return [pad + line(value.text)]
    if isinstance(value, Bullets):
        return _bullets(value, depth)
    if isinstance(value, Table):
        return _table(value, depth)
    if isinstance(value, Heading):
        return [pad + value.text]
    if isinstance(value, Facts):
        return [f"{pad}{name}: {line(text)}" for name, text in value.pairs]
    if isinstance(value, Part):
        return [pad + value.title, *blocks(value.blocks, depth + 1)]
    assert isinstance(value, Figure)
    return []


def blocks(values: Iterable[Block], depth: int = 0) -> list[str]:
    """Blocks' lines, one after another, ``depth`` levels in."""
    return [text for value in values for text in block(value, depth)]


def section(value: Section) -> list[str]:
    """A section's lines: a blank line and its title where it has one, then its blocks one level in."""
    return [*(["", value.title] if value.title else []), *blocks(value.blocks, 1)]


def page(value: Page) -> str:
    """The whole page as text (ending in a newline)."""
    lines = [value.title, *(f"{INDENT}{name}: {text}" for name, text in value.facts)]
    for found in value.sections:
        if any(not isinstance(b, Figure) for b in found.blocks):
            lines += section(found)
    if value.footer:
        lines += ["", value.footer]
    return "\n".join(lines) + "\n"
