"""report.md's writer of the document tree (report/page.py): a section as lines of markdown.

A section is its ``##`` heading, its "how to read this" (report.guide), then each block followed by a blank
line: a paragraph as its line, bullets as ``-`` lines (nested ones indented), a table as a pipe table whose
cells have their pipes escaped and their bullets as ``•``/``◦`` lines joined by ``<br>``, a heading one level
down. Figures are report.html's only: report.md has no pictures, and leaves them out.
"""

from __future__ import annotations

from bench_plugin.report import guide
from bench_plugin.report.basis import markdown_text
from bench_plugin.report.page import (
    Badge,
    Block,
    Bullets,
    Cell,
    Code,
    Figure,
    Heading,
    Inline,
    Paragraph,
    Pct,
    Section,
    Strong,
    Table,
    Text,
)


def inline(piece: Inline) -> str:
    """One piece of text as markdown."""
    if isinstance(piece, Strong | Badge):
        return f"**{piece.text}**"
    if isinstance(piece, Code):
        return f"`{piece.text}`"
    if isinstance(piece, Pct):
        return markdown_text(piece.text, piece.basis)
    return piece


def line(pieces: Text) -> str:
    """A line of text as markdown."""
    return "".join(inline(p) for p in pieces)


def _bullet_lines(bullets: Bullets, depth: int = 0) -> list[str]:
    out = []
    for item in bullets.items:
        out.append(f"{'  ' * depth}- {line(item.text)}".replace("\n", " "))
        if item.sub is not None:
            out += _bullet_lines(item.sub, depth + 1)
    return out


def cell(value: Cell) -> str:
    """A table cell: pipes escaped, one line (bullets as ``• a<br>• b``, nested ones as ``◦``)."""
    if isinstance(value, Bullets):
        parts = []
        for item in value.items:
            parts.append(f"• {line(item.text)}" + (":" if item.sub is not None else ""))
            parts += [f"&nbsp;&nbsp;◦ {line(sub.text)}" for sub in (item.sub.items if item.sub else ())]
        text = "<br>".join(parts) or "-"
    else:
        text = line(value)
    return text.replace("|", "\\|").replace("\n", " ")


def table_lines(table: Table) -> list[str]:
    """A pipe table."""
    return ["| " + " | ".join(table.header) + " |", "|" + "---|" * len(table.header),
            *("| " + " | ".join(cell(c) for c in row) + " |" for row in table.rows)]


def block(value: Block, level: int) -> list[str]:
    """One block's lines, without the blank line after it (none for a figure)."""
    if isinstance(value, Paragraph):
        return [line(value.text)]
    if isinstance(value, Bullets):
        return _bullet_lines(value)
    if isinstance(value, Table):
        return table_lines(value)
    if isinstance(value, Heading):
        return [f"{'#' * (level + 1)} {value.text}"]
    assert isinstance(value, Figure)
    return []


def section(value: Section | None, level: int = 2) -> list[str]:
    """A section's lines: heading, how to read it, its blocks, each followed by a blank line ([] for None)."""
    if value is None:
        return []
    lines = [f"{'#' * level} {value.title}", "", *guide.markdown(value.id)]
    for piece in value.blocks:
        written = block(piece, level)
        if written:
            lines += [*written, ""]
    return lines
