"""The report reads the typed summary and store only: what it cannot read, it refuses in one line.

summary.json is read through results.summary.load_summary (schemas "bench_plugin.summary/2", "/3" and "/4" only) and
results.sqlite through results.store (known store versions only). report.html raises their one-line
errors; ``python -m bench_plugin.report DIR`` turns them into ``bench_plugin: error: <line>`` and exit 2.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from bench_plugin.report.html import write_report
from bench_plugin.results.store import StoreError
from bench_plugin.results.summary import SummaryError, load_summary, parse_summary

MakeCampaign = Callable[..., Path]  # the make_campaign fixture of this folder's conftest.py


def _set_schema(results: Path, schema: str) -> None:
    data = json.loads((results / "summary.json").read_text(encoding="utf-8"))
    data["schema"] = schema
    (results / "summary.json").write_text(json.dumps(data), encoding="utf-8")


def _set_store_version(results: Path, version: int) -> None:
    db = sqlite3.connect(results / "results.sqlite")
    db.execute("UPDATE meta SET value=? WHERE key='store_version'", (json.dumps(version),))
    db.commit()
    db.close()


def _report_cli(results: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bench_plugin.report", str(results)], capture_output=True,
                          text=True, timeout=300, check=False)


def test_summary_json_as_written_reads_back_to_the_same_summary(make_campaign: MakeCampaign) -> None:
    results = make_campaign(comparison="analysis")
    text = (results / "summary.json").read_text(encoding="utf-8")
    assert load_summary(results / "summary.json").to_json() == text
    assert parse_summary(json.loads(text)).to_json() == text


def test_report_html_refuses_a_summary_of_an_unknown_schema_in_one_line(make_campaign: MakeCampaign) -> None:
    results = make_campaign()
    _set_schema(results, "bench_plugin.summary/99")
    with pytest.raises(SummaryError, match=r"schema 'bench_plugin\.summary/99'") as caught:
        write_report(results)
    assert "\n" not in str(caught.value)
    assert not (results / "report.html").exists()


def test_a_summary_given_is_reported_without_reading_summary_json(make_campaign: MakeCampaign) -> None:
    results = make_campaign()
    summary = load_summary(results / "summary.json")
    summary.scenario.name = "given"
    (results / "summary.json").unlink()
    text = write_report(results, summary).read_text(encoding="utf-8")
    assert "<title>GPU sharing report: given</title>" in text
    assert (results / "report.md").read_text(encoding="utf-8").startswith("# GPU sharing report: given")


def test_report_html_refuses_a_store_of_an_unknown_version(make_campaign: MakeCampaign) -> None:
    results = make_campaign()
    _set_store_version(results, 99)
    with pytest.raises(StoreError, match="store version 99"):
        write_report(results)


@pytest.mark.parametrize("broken", ["schema", "store_version", "no summary", "no store"])
def test_command_line_says_what_it_cannot_read_in_one_line_and_exits_2(make_campaign: MakeCampaign,
                                                                       broken: str) -> None:
    results = make_campaign()
    if broken == "schema":
        _set_schema(results, "bench_plugin.summary/1")
        expected = "schema 'bench_plugin.summary/1'"
    elif broken == "store_version":
        _set_store_version(results, 99)
        expected = "store version 99"
    elif broken == "no summary":
        (results / "summary.json").unlink()
        expected = "no summary.json"
    else:
        (results / "results.sqlite").unlink()
        expected = "no results store"
    done = _report_cli(results)
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("bench_plugin: error: ") and expected in lines[0], lines[0]
    assert "Traceback" not in done.stderr
