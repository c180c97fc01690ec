"""report.html's writer of the document tree (report/page.py): a section's body as HTML.

The body is the section's blocks, one per line (report.html puts its ``<h2>`` and its "how to read this" above
it): a paragraph as ``<p>`` (with its class), bullets as ``<ul>``, a table as report.tables.table writes it, a
figure with its SVG inline and its caption, a heading as ``<h3>``. Every piece of text is escaped here; a
percentile is a report.basis cell, a call a badge.
"""

from __future__ import annotations

from bench_plugin.report.basis import html_cell
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
from bench_plugin.report.tables import Raw, esc
from bench_plugin.report.tables import table as html_table


def inline(piece: Inline) -> str:
    """One piece of text as HTML."""
    if isinstance(piece, Strong):
        return f"<b>{esc(piece.text)}</b>"
    if isinstance(piece, Code):
        return f"<code>{esc(piece.text)}</code>"
    if isinstance(piece, Pct):
        return str(html_cell(piece.text, piece.basis))
    if isinstance(piece, Badge):
        return f'<span class="badge {esc(piece.css)}">{esc(piece.text)}</span>'
    return esc(piece)


def line(pieces: Text) -> str:
    """A line of text as HTML."""
    return "".join(inline(p) for p in pieces)


def _class(css: str) -> str:
    return f' class="{esc(css)}"' if css else ""


def bullets(value: Bullets) -> str:
    """A ``<ul>``, nested lists inside their items."""
    items = "".join(f"<li>{line(item.text)}{':' if item.sub is not None else ''}"
                    f"{bullets(item.sub) if item.sub is not None else ''}</li>" for item in value.items)
    return f"<ul{_class(value.css)}>{items}</ul>"


def cell(value: Cell) -> Raw:
    """A table cell's HTML."""
    return Raw(bullets(value) if isinstance(value, Bullets) else line(value))


def block(value: Block) -> str:
    """One block's HTML."""
    if isinstance(value, Paragraph):
        return f"<p{_class(value.css)}>{line(value.text)}</p>"
    if isinstance(value, Bullets):
        return bullets(value)
    if isinstance(value, Table):
        return html_table(value.header, ([cell(c) for c in row] for row in value.rows), value.css)
    if isinstance(value, Heading):
        return f"<h3>{esc(value.text)}</h3>"
    assert isinstance(value, Figure)
    title = f"<h3>{esc(value.title)}</h3>\n" if value.titled else ""
    return (f'<figure class="plot" id="{esc(value.id)}" data-plot="{esc(value.id)}">\n{title}{value.svg}\n'
            f"<figcaption>{esc(value.caption)}</figcaption>\n</figure>")


def body(value: Section) -> str:
    """A section's blocks, one per line (what goes under its heading and its "how to read this")."""
    return "\n".join(block(b) for b in value.blocks)

