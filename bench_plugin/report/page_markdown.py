"""report.md's writer of the document tree (report/page.py, report/document.py): the page as markdown.

The page is its title, its facts as ``- name: value`` lines, its sections, and what its footer says. A section
is its ``##`` heading, its "how to read this" (report.guide), then each block followed by a blank
line: a paragraph as its line, bullets as ``-`` lines (nested ones indented), a table as a pipe table whose
cells have their pipes escaped and their bullets (``•``/``◦``) or lines joined by ``<br>``, a heading one level
down, named values as ``- **name**: value`` lines, a part as a heading one level down and its blocks. Figures
are report.html's only: report.md has no pictures, and leaves them out (and a section of figures alone).
"""

from __future__ import annotations

from collections.abc import Iterable

from bench_plugin.report import guide
from bench_plugin.report.basis import markdown_text
from bench_plugin.report.page import (
    Badge,
    Block,
    Bullets,
    Cell,
    Code,
    Em,
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
    Strong,
    Table,
    Text,
)


def inline(piece: Inline) -> str:
    """One piece of text as markdown."""
    if isinstance(piece, Strong | Badge):
        return f"**{piece.text}**"
    if isinstance(piece, Em):
        return f"*{piece.text}*"
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
    elif isinstance(value, Lines):
        text = "<br>".join(line(piece) for piece in value.lines)
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
    if isinstance(value, Facts):
        return [f"- **{name}**: {line(text)}".replace("\n", " ") for name, text in value.pairs]
    if isinstance(value, Part):
        inner = blocks(value.blocks, level + 1)
        return [f"{'#' * (level + 1)} {value.title}", *(["", *inner[:-1]] if inner else [])]
    assert isinstance(value, Figure)
    return []


def blocks(values: Iterable[Block], level: int) -> list[str]:
    """Blocks' lines, each followed by a blank line (a heading among them one level below ``level``)."""
    lines: list[str] = []
    for piece in values:
        written = block(piece, level)
        if written:
            lines += [*written, ""]
    return lines


def section(value: Section | None, level: int = 2, *, guided: bool = True) -> list[str]:
    """A section's lines: heading, how to read it (``guided``: summary.md, the figures alone, has none), its
    blocks, each followed by a blank line ([] for None)."""
    if value is None:
        return []
    return [f"{'#' * level} {value.title}", "", *(guide.markdown(value.id) if guided else []),
            *blocks(value.blocks, level)]


def page(value: Page) -> str:
    """The whole of report.md."""
    lines = [f"# {value.title}", "", *(f"- {name}: {text}" for name, text in value.facts), ""]
    for found in value.sections:
        if any(not isinstance(b, Figure) for b in found.blocks):
            lines += section(found)
    return "\n".join([*lines, value.footer, ""])
