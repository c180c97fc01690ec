"""Every percentile the report shows comes with its sample count, and one from too few samples looks different."""

from __future__ import annotations

import re
from pathlib import Path

from bench_plugin.report.basis import FIGURES, LOW_MARK, Bases, low_rule, markdown_text, value_text
from bench_plugin.report.html import render_html
from bench_plugin.report.markdown import render_report
from bench_plugin.results.reasons import reason
from bench_plugin.results.store import open_store
from bench_plugin.results.summary import Summary, load_summary

PERCENTILE_HEADERS = ("P50 ms", "P95 ms", "TTFT P95 ms", "TPOT P95 ms")


def bounded(summary: Summary, arm: str, stage: int, cls: str) -> None:
    """Make every run of ``arm``'s ``cls`` at ``stage`` a P95 the summary calls bounded (as 72+ samples would)."""
    for trial in summary.trials:
        if trial.arm != arm or stage >= len(trial.stages) or cls not in trial.stages[stage].classes:
            continue
        stats = trial.stages[stage].classes[cls]
        ci = stats.latency_ci_ms["p95"]
        stats.latency_ci_ms["p95"] = ci.model_copy(update={"n": 80, "bounded": True, "hi": (ci.estimate or 0) + 5})
        stats.p95_note = None


def section(text: str, sid: str) -> str:
    return text.split(f'<section id="{sid}">')[1].split("</section>")[0]


def md_section(text: str, title: str) -> str:
    """report.md's section ``title``, up to the next section."""
    return text.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def cells_of(table_html: str, headers: tuple[str, ...]) -> list[str]:
    """The cells of ``table_html`` under any of ``headers``."""
    head = re.findall(r"<th>(.*?)</th>", table_html.split("</thead>")[0])
    columns = [i for i, h in enumerate(head) if h in headers]
    out = []
    for row in re.findall(r"<tr>(.*?)</tr>", table_html.split("<tbody>")[1], re.S):
        tds = re.findall(r"<td>(.*?)</td>", row, re.S)
        out += [tds[i] for i in columns]
    return out


def test_every_percentile_cell_of_the_html_shows_its_count_and_a_weak_one_looks_different(
        default_results: Path) -> None:
    summary = load_summary(default_results / "summary.json")
    bounded(summary, "exclusive", 2, "embedding")
    with open_store(default_results / "results.sqlite") as db:
        text = render_html(summary, db)
    stages = section(text, "stages")
    tables = re.findall(r'<table class="stages">.*?</table>', stages, re.S)
    assert len(tables) == 3
    cells = [c for t in tables for c in cells_of(t, PERCENTILE_HEADERS) if c != "-"]
    assert len(cells) == 3 * 6 + 3 * 6 + 3 * 2 * 2  # P50 and P95 per arm and class; TTFT and TPOT for the llm
    assert all('data-pct="' in c and re.search(r'<span class="n">n=\d+(/\d+)*</span>', c) for c in cells), cells
    # 4 embedding samples per repeat at stage 0: a P95 of 4 is not bounded, and looks it, with the rule as its title
    weak = next(c for c in cells_of(tables[0], ("P95 ms",)) if "n=4/4" in c)
    assert 'class="pct low"' in weak and f'<span class="mark">{LOW_MARK}</span>' in weak
    assert "needs 72 in a run to be bounded" in weak and "not bounded" in weak
    # the exclusive embedding P95 at stage 2, bounded in both repeats, reads as a plain figure with its count
    peak = [c for c in cells_of(tables[2], ("P95 ms",))]
    strong = peak[1]
    assert 'class="pct"' in strong and "n=80/80" in strong and LOW_MARK not in strong
    assert stages.count('<p class="low-rule">') == 3 and ".pct.low {" in text
    # the verdict's P95 slowdowns name the arm's counts, then the control's
    verdict = section(text, "verdict")
    assert '<span class="n">n=8/8 vs 8/8</span>' in verdict
    # every run's P95 in the measurement checks, too
    checks = section(text, "checks")
    assert all("n=" in c for c in cells_of(checks, ("P95 ms [95% interval] (n)",)) if c != "-")


def test_every_percentile_cell_of_the_markdown_shows_its_count_and_a_weak_one_is_marked(
        default_results: Path) -> None:
    summary = load_summary(default_results / "summary.json")
    bounded(summary, "exclusive", 2, "embedding")
    text = render_report(summary)
    figures = md_section(text, "Per-stage figures")
    rows = [line for line in figures.splitlines() if line.startswith("| exclusive |") or line.startswith("| shared |")]
    assert len(rows) == 18
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert len(cells) == 10, row  # the table stays valid
        for cell in cells[3:7]:
            assert cell == "-" or re.search(r"\(n=\d+(/\d+)*\)", cell), (row, cell)
    assert "| exclusive | asr | 1.00 ± 0.00 | *19.0 ± 4.4* (n=4/4) † | *27.2 ± 37.8* (n=4/4) † |" in figures
    strong = next(r for r in rows if r.startswith("| exclusive | embedding | 16.00"))
    assert "(n=80/80) |" in strong and "*" not in strong.split("|")[5]
    assert figures.count(low_rule() + ".") == 3
    # with one repeat (the shared arm's stage 2), a percentile shows its run's order-statistic interval
    assert re.search(r"\| shared \| llm \| 7\.67 \| 182\.6 \[[\d.]+, [\d.]+\] \(n=32\) "
                     r"\| \*275\.5 \[[\d.]+, unbounded\]\* \(n=32\) † \|", figures)


def test_the_rule_goes_only_under_a_table_that_shows_its_mark(default_results: Path) -> None:
    """A figure with nothing to show (an idle class's, "-") may rest on a weak basis: no mark, so no rule either."""
    summary = load_summary(default_results / "summary.json")
    bases = Bases(summary)
    for arm, figures in summary.arms.items():  # the first stage shows nothing where its basis is weak
        for name, fig in figures.stages[0].classes.items():
            for key in FIGURES:
                basis = bases.get(arm, 0, name, key)
                if basis is not None and basis.low:
                    setattr(fig, key, None)
    markdown = render_report(summary)
    figures = md_section(markdown, "Per-stage figures")
    tables = figures.split("\n### ")[1:]
    assert len(tables) == 3
    assert [LOW_MARK in t.split("\n\n")[1] for t in tables] == [False, True, True]  # stage 0 lost its marks
    assert [low_rule() + "." in t for t in tables] == [False, True, True]
    with open_store(default_results / "results.sqlite") as db:
        stages = section(render_html(summary, db), "stages")
    after = stages.split('<table class="stages">')[1:]
    assert [f'<span class="mark">{LOW_MARK}</span>' in t.split("</table>")[0] for t in after] == [False, True, True]
    assert ['<p class="low-rule">' in t for t in after] == [False, True, True]


def test_a_percentile_without_intervals_in_the_summary_is_shown_as_before(default_results: Path) -> None:
    summary = load_summary(default_results / "summary.json")
    for trial in summary.trials:
        for stage in trial.stages:
            for stats in stage.classes.values():
                stats.latency_ci_ms = {}
    bases = Bases(summary)
    basis = bases.get("shared", 0, "llm", "latency_p95_ms")
    assert basis is None
    fig = summary.arms["shared"].stages[0].classes["llm"].latency_p95_ms
    text = value_text(fig, basis)
    assert markdown_text(text, basis) == markdown_text(text, None) == text and "n=" not in text


def test_reasons_cells_are_bullets_in_html_and_in_a_valid_markdown_table(default_results: Path) -> None:
    summary = load_summary(default_results / "summary.json")
    summary.comparison.arms["shared"].stages[2].reasons = [
        reason("the load generator fell behind", ["a repeat 1: lag 12 ms", "b repeat 2: lag 13 ms"]),
        reason("rerun with | more")]
    with open_store(default_results / "results.sqlite") as db:
        verdict = section(render_html(summary, db), "verdict")
    assert ('<ul class="reasons"><li>llm P95 1.9x the control</li><li>errors 2% &gt; budget 1%</li></ul>'
            in verdict)
    assert ('<ul class="reasons"><li>the load generator fell behind:<ul><li>a repeat 1: lag 12 ms</li>'
            "<li>b repeat 2: lag 13 ms</li></ul></li><li>rerun with | more</li></ul>") in verdict
    text = render_report(summary)
    row = next(line for line in text.splitlines() if line.startswith("| 2 peak |"))
    assert row.endswith("| • the load generator fell behind:<br>&nbsp;&nbsp;◦ a repeat 1: lag 12 ms<br>"
                        "&nbsp;&nbsp;◦ b repeat 2: lag 13 ms<br>• rerun with \\| more |")
    assert len(re.split(r"(?<!\\)\|", row.strip())) - 2 == 8  # as many cells as the header


def test_every_section_says_how_to_read_it(default_report: Path) -> None:
    text = default_report.read_text(encoding="utf-8")
    sections = re.findall(r'<section id="([^"]+)">\n<h2>[^<]*</h2>\n(<p class="how">)?', text)
    assert sections and all(how for _, how in sections), [sid for sid, how in sections if not how]
    md = (default_report.parent / "report.md").read_text(encoding="utf-8")
    headings = [line for line in md.splitlines() if line.startswith("## ")]
    for heading in headings:
        after = md.split(heading + "\n\n", 1)[1]
        assert after.startswith("*How to read this: "), heading
