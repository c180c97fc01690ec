"""Both stored forms say their version, and a version this code does not know is refused in one line."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from bench_plugin.outputs import summarise
from bench_plugin.results.recorder import Recorder
from bench_plugin.results.store import STORE_VERSION, StoreError, open_store, store_version
from bench_plugin.results.summary import SCHEMA, SummaryError, load_summary, parse_summary

ROOT = Path(__file__).resolve().parents[2]
H200 = ROOT / "docs" / "results" / "h200-day19"


def small_store(path: Path) -> None:
    rec = Recorder(path)
    rec.set_meta("scenario", {"name": "s", "resolved": {"arms": [{"name": "a", "control": True}]}})
    rec.add_trial(1, 0, "a", 1, {"name": "a"})
    rec.trial_started(1)
    rec.trial_ended(1, "completed")
    rec.set_meta("status", {"status": "completed", "reason": None})
    rec.close()


def test_a_new_store_says_its_version_and_reads_back(tmp_path: Path) -> None:
    small_store(tmp_path / "results.sqlite")
    with open_store(tmp_path / "results.sqlite") as db:
        assert store_version(db) == STORE_VERSION
    summary = summarise(tmp_path)
    assert summary.schema_ == SCHEMA and [t.arm for t in summary.trials] == ["a"]


def test_a_store_of_an_unknown_version_is_refused_in_one_line(tmp_path: Path) -> None:
    small_store(tmp_path / "results.sqlite")
    db = sqlite3.connect(tmp_path / "results.sqlite")
    db.execute("UPDATE meta SET value='99' WHERE key='store_version'")
    db.commit()
    db.close()
    with pytest.raises(StoreError, match=r"store version 99 is not one this bench-plugin reads \(1, 2, 3, 4\)"):
        summarise(tmp_path)
    with pytest.raises(StoreError, match="store version 99"):
        Recorder(tmp_path / "results.sqlite")  # nor written into
    done = subprocess.run([sys.executable, "-m", "bench_plugin.cli", "report", str(tmp_path)], capture_output=True,
                          text=True, check=False)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        f"bench-plugin: error: {tmp_path / 'results.sqlite'}: store version 99 is not one this bench-plugin reads "
        "(1, 2, 3, 4): read it with the bench-plugin that wrote it"]
    assert not (tmp_path / "summary.json").exists()  # nothing written before refusing


def test_a_file_that_is_no_store_is_refused(tmp_path: Path) -> None:
    sqlite3.connect(tmp_path / "results.sqlite").execute("CREATE TABLE other (x)").connection.close()
    with pytest.raises(StoreError, match="not a results store"):
        summarise(tmp_path)


def test_a_summary_of_another_schema_is_refused_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "summary.json"
    path.write_text(json.dumps({"schema": "bench_plugin.summary/1", "trials": []}))
    with pytest.raises(SummaryError, match=r"schema 'bench_plugin.summary/1' is not 'bench_plugin.summary/2'.*"
                                           r"regenerate it with `bench-plugin report DIR`"):
        load_summary(path)
    with pytest.raises(SummaryError, match="schema 'something/9'"):
        parse_summary({"schema": "something/9"})
    with pytest.raises(SummaryError, match="not a summary"):
        parse_summary([1, 2])
    path.write_text(json.dumps({"schema": SCHEMA, "scenario": {}}))
    with pytest.raises(SummaryError, match=r"summary.json: scenario.name: Field required \(\d+ problem"):
        load_summary(path)


def test_a_summary_reads_back_equal_to_what_was_written(tmp_path: Path) -> None:
    small_store(tmp_path / "results.sqlite")
    summary = summarise(tmp_path)
    (tmp_path / "summary.json").write_text(summary.to_json())
    assert load_summary(tmp_path / "summary.json") == summary


@pytest.mark.slow
def test_the_committed_h200_campaign_a_version_1_store_still_reports(tmp_path: Path) -> None:
    target = tmp_path / "h200-day19"
    shutil.copytree(H200, target)
    with open_store(target / "results.sqlite") as db:
        assert store_version(db) == 1  # written before the store said its version
    done = subprocess.run([sys.executable, "-m", "bench_plugin.cli", "report", str(target)], capture_output=True,
                          text=True, check=False, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    summary = load_summary(target / "summary.json")
    assert [t.arm for t in summary.trials][:4] == [t["arm"] for t in json.loads(
        (H200 / "summary.json").read_text())["trials"]][:4]
    stage = summary.trials[0].stages[0]
    assert stage.planned_s == stage.duration_s and stage.arrivals  # counts from the samples where none was kept
    assert all(stage.realised[n] == pytest.approx(stage.arrivals[n] / stage.planned_s) for n in stage.arrivals)
    assert "<section id=\"checks\">" in (target / "report.html").read_text()
    # What is committed is what the code writes: after a change to the analysis or the report, run
    # `bench-plugin report docs/results/h200-day19` and check the README's figures against it. The plots'
    # SVG is matplotlib's to write (another release draws the same figure in other bytes), so report.html
    # is compared without it.
    for name in ("summary.json", "summary.md", "report.md", "report.html"):
        fresh, committed = ((d / name).read_text(encoding="utf-8") for d in (target, H200))
        if name == "report.html":
            fresh, committed = (re.sub(r"<svg\b.*?</svg>", "<svg/>", text, flags=re.S) for text in (fresh, committed))
        assert fresh == committed, f"docs/results/h200-day19/{name} is stale: regenerate it (bench-plugin report)"
