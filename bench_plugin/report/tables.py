"""report.html's escaping and tables, and a time on the campaign's own clock.

:class:`Raw` marks text that is already HTML; :func:`esc` escapes everything else; :func:`table` writes an HTML
table of such cells (report/page_html.py writes the document tree's tables with it).
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable, Sequence
from typing import Any

from bench_plugin.report.clock import campaign_clock
from bench_plugin.results.summary import Summary


class Raw(str):
    """Text that is already HTML (a table cell that must not be escaped again)."""

    __slots__ = ()


def esc(value: Any) -> str:
    """HTML-escaped text of any value (``-`` for None; JSON for lists and dicts)."""
    if isinstance(value, Raw):
        return str(value)
    if value is None:
        return "-"
    if isinstance(value, dict | list):
        return html.escape(json.dumps(value, sort_keys=True))
    return html.escape(str(value))


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], css: str = "") -> str:
    """An HTML table; cells are escaped unless given as :class:`Raw`."""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "\n".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>" for row in rows)
    cls = f' class="{css}"' if css else ""
    return f"<table{cls}><thead><tr>{head}</tr></thead>\n<tbody>\n{body}\n</tbody></table>"


def when(summary: Summary, epoch_s: float | None) -> str:
    """An epoch time on the clock of the host that ran the campaign, with its UTC offset (``-`` for None)."""
    return "-" if epoch_s is None else campaign_clock(summary, epoch_s)
