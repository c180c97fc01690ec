"""One document tree, three writers: every block and mark of report/page.py written as report.md, report.html and
terminal text."""

from __future__ import annotations

import typing

from bench_plugin.report import page_html, page_markdown, page_text
from bench_plugin.report.basis import LOW_MARK, Basis
from bench_plugin.report.page import (
    Badge,
    Block,
    Bullets,
    Code,
    Em,
    Facts,
    Figure,
    Heading,
    Inline,
    Item,
    Lines,
    Page,
    Paragraph,
    Part,
    Pct,
    Section,
    Strong,
    bullets,
    table,
)
from bench_plugin.results.summary import Interval

LOW = Basis("P95", 0.95, (("r1", Interval(q=0.95, n=31, estimate=40.0, lo=30.0, hi=None, bounded=False,
                                            confidence=0.95)),))
SOUND = Basis("P95", 0.95, (("r1", Interval(q=0.95, n=90, estimate=40.0, lo=30.0, hi=50.0, bounded=True,
                                              confidence=0.95)),))

SECTION = Section("checks", "Measurement checks", (
    Paragraph(("Read ", Strong("this"), " with ", Code("a|b"), " & <care>.")),
    Heading("Trial 1: mps r1"),
    table(("class", "P95 ms", "verdict", "reasons"), [
        ["llm", Pct("40.0", LOW), Badge("worth it", "good"),
         Bullets((Item(("fails",), bullets(["llm P95", "asr P95"])), Item(("x|y",))))],
        ["asr", Pct("40.0", SOUND), "-", bullets([])],
    ], "checks"),
    Figure("p1", "A plot", "<svg/>", "what to read"),
    Figure("p2", "Untitled", "<svg/>", "caption", titled=False),
    bullets(["a note\non two lines"], "notes"),
    Paragraph(("No series.",), "note"),
    Facts((("driver", ("550",)), ("mig mode", (Code('{"cuda:0": "disabled"}'),)))),
    table(("P95 slowdown",), [[Lines(((Pct("llm 2.00x", SOUND),), ("asr 1.50x",)), "slowdown")]]),
    Part("mps (worth it)", (Paragraph(("Why.",)), Heading("inside")), "arm"),
    Part("3 server processes", (Paragraph(("x",)),), "servers", open=False),
))


def test_report_md_writes_every_block_and_leaves_figures_out() -> None:
    lines = page_markdown.section(SECTION)
    assert lines[:3] == ["## Measurement checks", "", lines[2]] and lines[2].startswith("*How to read this: ")
    assert lines[4:] == [
        "Read **this** with `a|b` & <care>.", "",
        "### Trial 1: mps r1", "",
        "| class | P95 ms | verdict | reasons |", "|---|---|---|---|",
        f"| llm | *40.0* (n=31) {LOW_MARK} | **worth it** | • fails:<br>&nbsp;&nbsp;◦ llm P95<br>&nbsp;&nbsp;◦ asr P95"
        "<br>• x\\|y |",
        "| asr | 40.0 (n=90) | - | - |", "",
        "- a note on two lines", "",
        "No series.", "",
        "- **driver**: 550", '- **mig mode**: `{"cuda:0": "disabled"}`', "",
        "| P95 slowdown |", "|---|", "| llm 2.00x (n=90)<br>asr 1.50x |", "",
        "### mps (worth it)", "", "Why.", "", "#### inside", "",
        "### 3 server processes", "", "x", "",
    ]
    assert page_markdown.section(None) == []


def test_report_html_writes_every_block_escaped() -> None:
    parts = page_html.body(SECTION).split("\n")
    assert parts[0] == "<p>Read <b>this</b> with <code>a|b</code> &amp; &lt;care&gt;.</p>"
    assert parts[1] == "<h3>Trial 1: mps r1</h3>"
    assert parts[2] == '<table class="checks"><thead><tr><th>class</th><th>P95 ms</th><th>verdict</th>' \
                       "<th>reasons</th></tr></thead>"
    llm, asr = parts[4], parts[5]
    assert llm.startswith('<tr><td>llm</td><td><span class="pct low" data-pct="P95" data-n="31" ')
    assert f'<span class="mark">{LOW_MARK}</span>' in llm
    assert '<td><span class="badge good">worth it</span></td>' in llm
    assert llm.endswith("<td><ul><li>fails:<ul><li>llm P95</li><li>asr P95</li></ul></li><li>x|y</li></ul></td></tr>")
    assert '<span class="pct" data-pct="P95" data-n="90" ' in asr
    assert "<td>-</td>" in asr and "<td><ul></ul></td>" in asr
    figures = page_html.body(SECTION).split("</tbody></table>\n")[1]
    assert figures.startswith('<figure class="plot" id="p1" data-plot="p1">\n<h3>A plot</h3>\n<svg/>\n'
                              "<figcaption>what to read</figcaption>\n</figure>\n"
                              '<figure class="plot" id="p2" data-plot="p2">\n<svg/>\n<figcaption>caption</figcaption>\n'
                              "</figure>\n")
    body = page_html.body(SECTION)
    assert '<ul class="notes"><li>a note\non two lines</li></ul>\n<p class="note">No series.</p>\n' in body
    rest = body.split('<p class="note">No series.</p>\n')[1].split("\n")
    assert rest[:4] == ['<table class="kv"><thead><tr><th></th><th></th></tr></thead>', "<tbody>",
                        "<tr><td><b>driver</b></td><td>550</td></tr>",
                        "<tr><td><b>mig mode</b></td><td><code>{&quot;cuda:0&quot;: &quot;disabled&quot;}</code></td>"
                        "</tr>"]
    lines = next(r for r in rest if r.startswith('<tr><td><div class="slowdown"><span class="pct" data-pct="P95"'))
    assert lines.endswith('<span class="n">n=90</span></span><br>asr 1.50x</div></td></tr>')
    assert body.endswith('<details open class="arm"><summary>mps (worth it)</summary>\n<p>Why.</p>\n'
                         '<h3>inside</h3>\n</details>\n<details class="servers"><summary>3 server processes</summary>\n'
                         "<p>x</p>\n</details>")


def test_terminal_text_writes_every_block_plainly_and_leaves_figures_out() -> None:
    """No markup: marks are their text, a percentile keeps its count and low mark as in report.md; bullets nest by
    indentation; a table's columns line up under a rule; a part's blocks sit one level in."""
    assert page_text.section(SECTION) == [
        "", "Measurement checks",
        "  Read this with a|b & <care>.",
        "  Trial 1: mps r1",
        "  class  P95 ms         verdict   reasons",
        "  -----  -------------  --------  -----------------------------",
        f"  llm    40.0 (n=31) {LOW_MARK}  worth it  fails (llm P95; asr P95); x|y",
        "  asr    40.0 (n=90)    -         -",
        "  a note on two lines",
        "  No series.",
        "  driver: 550",
        '  mig mode: {"cuda:0": "disabled"}',
        "  P95 slowdown",
        "  ---------------------------",
        "  llm 2.00x (n=90); asr 1.50x",
        "  mps (worth it)",
        "    Why.",
        "    inside",
        "  3 server processes",
        "    x",
    ]
    nested = Bullets((Item(("arm",), Bullets((Item(("stage 0",), bullets(["disrupted"])),))),))
    assert page_text.page(Page("head", (("status", "completed"),), (Section("a", "", (nested,)),), "", "completed",
                               "1")) == "head\n  status: completed\n  arm\n    stage 0\n      disrupted\n"


def test_both_writers_know_every_block_and_every_mark() -> None:
    """A new kind of block or mark is written by every writer, or this fails: none falls through to another's."""
    blocks: tuple[Block, ...] = (Paragraph(("p",)), bullets(["b"]), table(("h",), [["c"]]),
                                 Facts((("k", ("v",)),)), Figure("f", "t", "<svg/>", "c"), Heading("h"),
                                 Part("p", (Paragraph(("q",)),)))
    assert {type(b) for b in blocks} == set(typing.get_args(Block))
    for b in blocks:
        page_html.block(b)
        page_markdown.block(b, 2)
        page_text.block(b)
    marks: tuple[Inline, ...] = ("s", Strong("s"), Em("e"), Code("c"), Pct("1.0", None), Badge("b", "good"))
    assert {type(m) for m in marks} == set(typing.get_args(Inline))
    assert [page_markdown.inline(m) for m in marks] == ["s", "**s**", "*e*", "`c`", "1.0", "**b**"]
    assert [page_text.inline(m) for m in marks] == ["s", "s", "e", "c", "1.0", "b"]
    assert [page_html.inline(m) for m in marks] == ["s", "<b>s</b>", "<i>e</i>", "<code>c</code>", "1.0",
                                                    '<span class="badge good">b</span>']
