"""report.html from a synthetic results folder: contents, self-containment, robustness and speed."""

from __future__ import annotations

import html
import json
import re
import sqlite3
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from stored_scenario import resolved

from bench_plugin.report import page_text
from bench_plugin.report.answer import sentence
from bench_plugin.report.clock import campaign_clock
from bench_plugin.report.comparison import NO_COMPARISON
from bench_plugin.report.document import FOOTER, build
from bench_plugin.report.html import stored, write_report
from bench_plugin.report.markdown import render_report
from bench_plugin.report.outputs import write_summaries
from bench_plugin.results.recorder import Recorder
from bench_plugin.results.store import (
    CampaignReader,
    count_requests,
    even_indices,
    open_store,
    read_requests,
    read_samples,
)
from bench_plugin.results.summary import load_summary, save_summary
from bench_plugin.scenario import Arm

MakeCampaign = Callable[..., Path]  # the make_campaign fixture of this folder's conftest.py
ROOT = Path(__file__).resolve().parents[2]

LOAD_PLOTS = ["latency-llm", "latency-embedding", "latency-asr", "llm-streaming", "throughput"]
TIMELINES = [f"timeline-trial-{i}" for i in (1, 2, 3, 4)]


class Page(HTMLParser):
    """Collects what decides whether a page is self-contained, and its plots."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.links: list[str] = []
        self.ids: list[str] = []
        self.figures: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        values = dict(attrs)
        for name in ("src", "href", "xlink:href", "srcset", "data", "action", "poster"):
            if values.get(name):
                self.links.append(str(values[name]))
        if values.get("id"):
            self.ids.append(str(values["id"]))
        if tag == "figure" and "plot" in (values.get("class") or ""):
            self.figures.append(str(values.get("id")))


def parse(path: Path) -> tuple[str, Page]:
    text = path.read_text(encoding="utf-8")
    page = Page()
    page.feed(text)
    return text, page


def figure_html(text: str, plot_id: str) -> str:
    match = re.search(rf'<figure class="plot" id="{plot_id}".*?</figure>', text, re.S)
    assert match, plot_id
    return match.group(0)


def test_writes_report_html_and_md_and_returns_the_html_path(default_results: Path, default_report: Path) -> None:
    results, path = default_results, default_report
    assert path == results / "report.html"
    assert path.read_text(encoding="utf-8").startswith("<!doctype html>")
    summary = load_summary(results / "summary.json")
    title = f"# GPU sharing report: {summary.scenario.name}"
    assert (results / "report.md").read_text(encoding="utf-8").startswith(title)


def test_page_is_self_contained(default_report: Path) -> None:
    text, page = parse(default_report)
    assert not {"script", "link", "img", "iframe", "object", "embed", "video", "audio", "source"} & set(page.tags)
    assert all(link.startswith("#") for link in page.links), [v for v in page.links if not v.startswith("#")]
    # CSS may only point inside the document (SVG clip paths): no @import, no url() to a file or host.
    assert "@import" not in text
    assert set(re.findall(r"url\(([^)]*)\)", text)) <= {m for m in re.findall(r"url\((#[^)]*)\)", text)}
    assert "<?xml" not in text and "<!DOCTYPE svg" not in text  # SVG prologs are invalid inside HTML


def test_every_plot_is_there_in_order_with_data_marks(default_report: Path) -> None:
    text, page = parse(default_report)
    assert page.figures == [*LOAD_PLOTS, "fairness", *TIMELINES]
    for plot_id in page.figures:
        html = figure_html(text, plot_id)
        assert html.count("<svg") == 1, plot_id
        assert re.search(rf'id="data-{plot_id}-\d+"', html), f"{plot_id} draws no data"
        assert "<figcaption>" in html, plot_id
    sections = re.findall(r'<section id="([^"]+)"', text)
    assert sections == ["verdict", "load", "sharing", "stages", "timelines", "checks", "errors", "conditions"]


def test_ids_are_unique_across_all_inline_svgs(default_report: Path) -> None:
    _, page = parse(default_report)
    duplicates = {i for i in page.ids if page.ids.count(i) > 1}
    assert not duplicates


def test_the_same_results_give_the_same_bytes(make_campaign: MakeCampaign, default_report: Path) -> None:
    again = write_report(make_campaign())  # written afresh in another folder, from the same inputs
    assert again.read_bytes() == default_report.read_bytes()


def test_verdict_per_arm_and_boundaries_when_the_comparison_is_there(default_report: Path) -> None:
    text, _ = parse(default_report)
    verdict = text.split('<section id="verdict">')[1].split("</section>")[0]
    assert '<span class="badge good">worth it</span>' in verdict
    assert "up to stage 0 (low): llm P95 passes its SLO above it" in verdict
    assert '<span class="badge mixed">trade-off</span>' in verdict and '<span class="badge bad">loss</span>' in verdict
    assert "errors 2% &gt; budget 1%" in verdict
    assert "<dt>verdict</dt><dd>shared: worth it up to stage 0 low</dd>" in text
    assert "boundary shared" in figure_html(text, "latency-llm")
    assert "Jain" in figure_html(text, "fairness")
    assert "<td>1.60x [1.52, 1.68] (higher)</td>" in verdict  # goodput per device: a ratio's asymmetric interval
    assert "llm 2.50x [2.38, 2.62] (higher)" in verdict  # P95 slowdown


def test_an_inconclusive_verdict_has_its_own_badge_and_colour(make_campaign: MakeCampaign) -> None:
    results = make_campaign()
    summary = load_summary(results / "summary.json")
    shared = summary.comparison.arms["shared"]
    assert shared.verdict is not None
    shared.verdict = shared.verdict.model_copy(update={"call": "inconclusive (1 repeat)", "worth_it_up_to_stage": None})
    shared.stages[0].verdict = "inconclusive (1 repeat)"
    save_summary(summary, results / "summary.json")
    text, _ = parse(write_report(results))
    verdict = text.split('<section id="verdict">')[1].split("</section>")[0]
    assert verdict.count('<span class="badge unsure">inconclusive (1 repeat)</span>') == 2  # the arm and stage 0
    assert ".badge.unsure {" in text and "<dt>verdict</dt><dd>shared: inconclusive (1 repeat)</dd>" in text
    assert "<summary>shared (inconclusive (1 repeat))</summary>" in verdict


def test_renders_the_comparison_the_analysis_writes(make_campaign: MakeCampaign) -> None:
    results = make_campaign(comparison="analysis")
    summary = load_summary(results / "summary.json")
    shared = summary.comparison.arms["shared"]
    assert shared.verdict is not None, "bench_plugin.analysis no longer writes a verdict for a sharing arm"
    text, page = parse(write_report(results))
    verdict = text.split('<section id="verdict">')[1].split("</section>")[0]
    assert f'">{shared.verdict.call}</span>' in verdict
    boundary = shared.boundary.text
    assert boundary.split("(")[0].lower() in verdict.lower()  # quoted in the verdict, or on its own
    assert page.figures == ["answer-picture", *LOAD_PLOTS, "fairness", *TIMELINES]
    # the page opens with the answer: the headline, a sentence per arm with its next step, the picture, the table
    assert text.index('<section id="answer">') < text.index('<section id="verdict">')
    answer = text.split('<section id="answer">')[1].split("</section>")[0]
    assert shared.answer is not None and html.escape(sentence("shared", shared, shared.answer, "exclusive")) in answer
    assert f"Next: {html.escape(shared.answer.next_step)}" in answer and "exclusive is the control" in answer
    assert '<table class="answer">' in answer
    report_md = (results / "report.md").read_text(encoding="utf-8")
    assert report_md.index("## The answer") < report_md.index("## Verdict")


def test_says_plainly_when_there_is_no_comparison(make_campaign: MakeCampaign) -> None:
    text, page = parse(write_report(make_campaign(comparison=None)))
    assert NO_COMPARISON.replace('"', "&quot;") in text
    assert "fairness" not in page.figures
    assert page.figures == [*LOAD_PLOTS, *TIMELINES]


def test_timeline_shows_placement_readiness_stages_failures_and_telemetry(default_report: Path) -> None:
    text, _ = parse(default_report)
    shared = figure_html(text, "timeline-trial-4")
    for words in ("placement and readiness", "llm on bench-host / gpu0", "ready +2.5 s", "arm applied (segment 0)",
                  "stages (offered load steps)", "aborted (rolled back)", "+1 skipped", "failed requests",
                  "llm: 2 failed", "latency of each successful request", "llm P95 SLO 2000 ms",
                  "GPU utilisation (%)", "VRAM used (MiB)", "cuda:0 (whole device)", "llm (pid 1040)",
                  "asr (pid 1042)", "capacity", "seconds from the trial start", "warm-up (unmeasured)"):
        assert words in shared, words
    assert "power (W)" not in shared and "1980" not in shared  # not recorded / recorded but not drawn
    exclusive = figure_html(text, "timeline-trial-1")
    assert "arm applied (segment 2)" in exclusive and "no failed requests in this trial" in exclusive


@pytest.mark.parametrize("table", ["empty", "absent"])
def test_no_telemetry_means_no_telemetry_panel_and_a_note(make_campaign: MakeCampaign, table: str) -> None:
    results = make_campaign(telemetry=False)
    if table == "absent":  # a store written before the recorder had the table
        db = sqlite3.connect(results / "results.sqlite")
        db.execute("DROP TABLE IF EXISTS telemetry")
        db.commit()
        db.close()
    text, _ = parse(write_report(results))
    timeline = figure_html(text, "timeline-trial-2")
    assert "GPU utilisation" not in timeline and "VRAM" not in timeline
    assert "No GPU telemetry was recorded for this trial" in timeline


def test_errors_table_lists_failures_by_kind_and_stages_that_did_not_complete(default_results: Path,
                                                                             default_report: Path) -> None:
    results = default_results
    text, _ = parse(default_report)
    errors = text.split('<section id="errors">')[1].split("</section>")[0]
    with open_store(results / "results.sqlite") as db:
        expected = Counter((s.trial, s.stage, s.workload) for s in read_samples(db) if not s.ok)
    assert expected
    for (trial, _, workload), count in expected.items():
        assert re.search(rf"<td>{trial}</td>.*?<td>{workload}</td><td>timeout</td><td>{count}</td>", errors), \
            (trial, workload, count)
    assert "<td>aborted</td>" in errors and "<td>skipped</td>" in errors and "stage 1 was rolled back" in errors
    assert "no answer within 5 s" in errors


def test_conditions_hold_everything_needed_to_rerun(default_report: Path) -> None:
    text, _ = parse(default_report)
    conditions = text.split('<section id="conditions">')[1].split("</section>")[0]
    for words in ("scenarios/synthetic.yaml", "ab" * 32, "stage_duration", "1" * 64, "generated(seed=1)",
                  "bench-host", "Linux-test", "3.11.7", "0123456789abcdef0123456789abcdef01234567",
                  "locust --headless --scenario scenarios/synthetic.yaml", "550.54.15", "NVIDIA H200",
                  "locust</td><td>2.47.0", "time-slicing", "python -m bench_plugin.servers llm --device cuda:0"):
        assert words in conditions, words


def test_an_interrupted_campaign_still_reports_and_says_so(make_campaign: MakeCampaign) -> None:
    results = make_campaign(interrupted=True)
    text, _ = parse(write_report(results))
    summary = load_summary(results / "summary.json")
    assert summary.status.ended_s is not None
    assert f"<dd>interrupted at {campaign_clock(summary, summary.status.ended_s)}</dd>" in text  # status and when
    assert "Trial 4: arm shared, repeat 2 (interrupted)" in text
    cut_section = text.split('<section id="cut-short">')[1].split("</section>")[0]  # what the cut stage measured
    assert "<td>4</td><td>shared</td><td>2</td>" in cut_section and "<td>interrupted" in cut_section
    drawn = figure_html(text, "timeline-trial-4").split("<svg", 1)[1]
    assert "interrupted" in drawn  # the stage's label and the legend in the picture itself
    summary = load_summary(results / "summary.json")
    [cut] = [s for s in summary.trials[3].stages if s.status == "interrupted"]
    assert cut.classes["llm"].requests > 0  # the cut-short stage keeps its samples in its trial's figures
    over_repeats = summary.arms["shared"].stages[cut.index].classes["llm"]
    assert over_repeats.throughput_rps.n == 1  # the arm's figures over repeats are over the stage that ran whole


def test_a_campaign_that_failed_before_any_stage_still_reports(tmp_path: Path) -> None:
    rec = Recorder(tmp_path / "results.sqlite")
    rec.set_meta("scenario", {"name": "broken", "path": "s.yaml", "sha256": "0" * 64,
                              "resolved": resolved([{"name": "exclusive", "control": True}],
                                                   {"llm": {"slo": {"p95_ms": 1000.0}}})})
    rec.add_trial(1, 0, Arm(name="exclusive"), 1)
    rec.trial_started(1)
    rec.trial_ended(1, "failed", "llm never answered within 120 s")
    rec.set_meta("status", {"status": "failed", "reason": "trial 1: llm never answered", "ended_s": 1.0})
    rec.close()
    write_summaries(tmp_path)
    text, page = parse(write_report(tmp_path))
    assert "failed at 1970-01-01 00:00:01 +00:00: trial 1: llm never answered" in text  # UTC: no offset recorded
    assert page.figures == ["timeline-trial-1"]
    assert "llm never answered within 120 s" in figure_html(text, "timeline-trial-1")


def test_even_indices_spread_over_the_whole_range() -> None:
    assert list(even_indices(5, 10)) == [0, 1, 2, 3, 4]
    picked = even_indices(1_000_000, 5000)
    assert len(picked) == 5000 and picked[0] == 0 and picked[-1] == 999_999
    assert np.ptp(np.diff(picked)) <= 1  # evenly spaced


def test_requests_are_thinned_to_the_budget_but_every_failure_is_kept(default_results: Path) -> None:
    results = default_results
    with open_store(results / "results.sqlite") as db:
        counts = count_requests(db)
        requests = read_requests(db, 4, counts, max_points=20)
        failed = Counter(s.workload for s in CampaignReader(db).samples(4) if not s.ok)
        whole = read_requests(db, 4)
    assert sum(len(r.ok_t) for r in requests.values()) <= 20 + len(requests)
    for name, req in requests.items():
        assert len(req.failed_t) == failed.get(name, 0)
        assert req.ok_total == whole[name].ok_total == len(whole[name].ok_t)
        assert np.all(np.diff(req.ok_t) >= 0), "thinned points stay in time order"
        span = whole[name].ok_t[-1] - whole[name].ok_t[0]
        assert req.ok_t[-1] - req.ok_t[0] >= 0.8 * span, "thinning keeps the whole time range"


def test_the_scale_benchmark_still_runs(tmp_path: Path) -> None:
    """benchmarks/analysis_scale.py writes its store through the recorder's own API, which moves: a small run of it
    here keeps the figures in docs/benchmarks.md rerunnable (how long it takes is the benchmark's, not this test's)."""
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "analysis_scale.py"), "--samples", "3000",
                           "--dir", str(tmp_path / "scale")], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    assert figures["samples"] == 3000 and figures["report_html_bytes"] > 0
    summary = load_summary(tmp_path / "scale" / "summary.json")
    assert len(summary.trials) == 9 and (tmp_path / "scale" / "report.md").is_file()


def test_a_large_campaign_renders_each_timeline_thinned(make_campaign: MakeCampaign) -> None:
    # 100,000 samples, 25,000 a trial: five times what a timeline's scatter keeps. How long a million take
    # is a benchmark (benchmarks/analysis_scale.py, figures in docs/benchmarks.md), not a test on a noisy host.
    results = make_campaign()
    db = sqlite3.connect(results / "results.sqlite")
    rng = np.random.default_rng(3)
    trials = db.execute("SELECT id, started_s, ended_s FROM trials").fetchall()
    per = 100_000 // len(trials)
    for trial, start, end in trials:
        t = np.sort(rng.uniform(start, end, per))
        end_s = t + rng.lognormal(np.log(0.05), 0.5, per)
        ok = rng.random(per) > 0.01
        names = rng.choice(["llm", "embedding", "asr"], per)
        db.executemany(
            "INSERT INTO samples (workload, trial, segment, stage, seq, item, intended_s, sent_s, end_s, ok, error) "
            "VALUES (?, ?, 0, 0, ?, 0, ?, ?, ?, ?, ?)",
            ((str(names[i]), trial, i, float(t[i]), float(t[i]), float(end_s[i]), int(ok[i]),
              None if ok[i] else "timeout") for i in range(per)))
    db.commit()
    db.close()
    text = write_report(results).read_text(encoding="utf-8")
    for plot_id in TIMELINES:
        dots = len(re.findall(r"<use ", figure_html(text, plot_id)))
        assert 4000 <= dots <= 5000 + 200, (plot_id, dots)  # the thinned scatter, plus markers of the other panels
    assert len(text) < 5_000_000


def test_both_pages_are_one_page_in_one_order(default_report: Path) -> None:
    """report.html and report.md are one page written twice: the same sections under the same titles in the same
    order; report.md leaves out only the sections that hold pictures alone."""
    page = default_report.read_text(encoding="utf-8")
    sections = re.findall(r'<section id="([^"]+)">\n<h2>([^<]*)</h2>\n(.*?)\n</section>', page, re.S)
    pictures = {sid for sid, _, body in sections
                if not re.sub(r'<p class="how">.*?</p>|<figure .*?</figure>', "", body, flags=re.S).strip()}
    assert {"load", "timelines"} <= pictures  # the default campaign's plots
    md = (default_report.parent / "report.md").read_text(encoding="utf-8")
    titles = [line.removeprefix("## ") for line in md.splitlines() if line.startswith("## ")]
    assert titles == [html.unescape(title) for sid, title, _ in sections if sid not in pictures]
    assert titles == ["Verdict", "Per-stage figures", "Measurement checks", "Errors",
                      "Conditions (everything needed to run it again)"], titles


def test_markdown_written_beside_matches_render_report(default_results: Path, default_report: Path) -> None:
    results = default_results
    summary = load_summary(results / "summary.json")
    with open_store(results / "results.sqlite") as db:
        kept = stored(summary, db)
    expected = render_report(summary, kept)  # the same page, without its pictures
    md = (results / "report.md").read_text(encoding="utf-8")
    assert md == expected
    # the terminal's writer writes the same page: the same sections under the same titles, in the same order
    text = page_text.page(build(summary, kept)).splitlines()
    titles = [text[i + 1] for i, line in enumerate(text[:-1]) if line == "" and text[i + 1][:1] not in " "]
    assert titles == [line.removeprefix("## ") for line in md.splitlines() if line.startswith("## ")] + [FOOTER]


def test_a_folder_without_summary_json_is_refused_with_the_reason(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"no summary\.json"):
        write_report(tmp_path)


def test_command_line_rewrites_the_report(make_campaign: MakeCampaign) -> None:
    results = make_campaign()
    done = subprocess.run([sys.executable, "-m", "bench_plugin.report", str(results)], capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(str(results / "report.html"))
    assert (results / "report.md").is_file()
    missing = subprocess.run([sys.executable, "-m", "bench_plugin.report", str(results / "nowhere")],
                             capture_output=True, text=True, timeout=300, check=False)
    assert missing.returncode == 2 and "no summary.json" in missing.stderr


def test_measurement_checks_show_realised_rates_intervals_and_flags(make_campaign: MakeCampaign) -> None:
    results = make_campaign("analysis")
    summary = json.loads((results / "summary.json").read_text())
    stage = summary["trials"][0]["stages"][0]
    stage["generator_limited"] = "send lag P99 42.0 ms for llm (limit 10 ms)"
    stage["host_busy"] = "other processes used 1.6 of 2 cores (more than 0.5)"
    (results / "summary.json").write_text(json.dumps(summary))
    text = write_report(results).read_text()
    checks = text.split('<section id="checks">')[1].split("</section>")[0]
    assert "realised" in checks and "generator-limited: send lag P99 42.0 ms" in checks
    assert "busy host: other processes used 1.6 of 2 cores" in checks
    assert '<span class="n">n=8</span>' in checks  # each run's P95 with its sample count
    md = (results / "report.md").read_text()
    assert "## Measurement checks" in md and "generator-limited: send lag P99 42.0 ms" in md
