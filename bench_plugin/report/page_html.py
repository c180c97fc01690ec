"""report.html's writer of the document tree (report/page.py, report/document.py): the page as one HTML file.

The page is self-contained: CSS in a ``<style>``, plots as inline SVG, no script, font, image or stylesheet from
anywhere else, so it can be mailed, archived with the results and opened years later without a network. Its
header holds the title, the facts and a link to each section; each section is a ``<section>`` with its ``<h2>``,
its "how to read this" (report.guide) and its blocks, one per line: a paragraph as ``<p>`` (with its class),
bullets as ``<ul>``, a table as report.tables.table writes it, a figure with its SVG inline and its caption, a
heading as ``<h3>``, named values as a two-column table, a part as a ``<details>``. Every piece of text is
escaped here; a percentile is a report.basis cell, a call a badge.
"""

from __future__ import annotations

from bench_plugin.report import guide
from bench_plugin.report.basis import html_cell
from bench_plugin.report.css import CSS
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
from bench_plugin.report.tables import Raw, esc
from bench_plugin.report.tables import table as html_table


def inline(piece: Inline) -> str:
    """One piece of text as HTML."""
    if isinstance(piece, Strong):
        return f"<b>{esc(piece.text)}</b>"
    if isinstance(piece, Em):
        return f"<i>{esc(piece.text)}</i>"
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
    if isinstance(value, Bullets):
        return Raw(bullets(value))
    if isinstance(value, Lines):
        return Raw(f"<div{_class(value.css)}>{'<br>'.join(line(piece) for piece in value.lines)}</div>")
    return Raw(line(value))


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
    if isinstance(value, Facts):
        return html_table(("", ""), ([Raw(f"<b>{esc(name)}</b>"), cell(text)] for name, text in value.pairs), "kv")
    if isinstance(value, Part):
        opened = " open" if value.open else ""
        return "\n".join([f"<details{opened}{_class(value.css)}><summary>{esc(value.title)}</summary>",
                          *(block(b) for b in value.blocks), "</details>"])
    assert isinstance(value, Figure)
    title = f"<h3>{esc(value.title)}</h3>\n" if value.titled else ""
    return (f'<figure class="plot" id="{esc(value.id)}" data-plot="{esc(value.id)}">\n{title}{value.svg}\n'
            f"<figcaption>{esc(value.caption)}</figcaption>\n</figure>")


BADGE_CSS = ".badge.unsure { background: #dde6f6; color: #1c3f73; border: 1px dashed #5a7bb0; }"
"""The colour of an inconclusive verdict: neither good nor bad, and dashed, for "not decided yet"."""


def body(value: Section) -> str:
    """A section's blocks, one per line (what goes under its heading and its "how to read this")."""
    return "\n".join(block(b) for b in value.blocks)



def section(value: Section) -> str:
    """A whole ``<section>``: its heading, how to read it, its blocks."""
    return (f'<section id="{esc(value.id)}">\n<h2>{esc(value.title)}</h2>\n{guide.html(value.id)}{body(value)}\n'
            "</section>")


def page(value: Page) -> str:
    """The whole of report.html."""
    facts = "".join(f"<div><dt>{esc(k)}</dt><dd>{esc(v)}</dd></div>" for k, v in value.facts)
    nav = " · ".join(f'<a href="#{esc(s.id)}">{esc(s.short or s.title)}</a>' for s in value.sections)
    sections = "\n".join(section(s) for s in value.sections)
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{esc(value.title)}</title>
<style>{CSS}{BADGE_CSS}
</style>
</head>
<body>
<main>
<header>
<h1>{esc(value.title)}</h1>
<dl class="facts status-{esc(value.state)}">{facts}</dl>
<nav>{nav}</nav>
</header>
{sections}
<footer>Written by bench_plugin.report from results.sqlite and summary.json ({esc(value.schema)}).
{esc(value.footer)}</footer>
</main>
</body>
</html>
"""
