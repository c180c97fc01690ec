"""Both stored forms say their version, and a version this code does not know is refused in one line."""

from __future__ import annotations

import json
import math
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from stored_scenario import resolved

from bench_plugin.report.outputs import summarise
from bench_plugin.results.archive import unpack_store
from bench_plugin.results.placement import ClassPlacement, Placement
from bench_plugin.results.recorder import Recorder
from bench_plugin.results.samples import Sample
from bench_plugin.results.server_rows import ServerPoint
from bench_plugin.results.store import STORE_VERSION, StoreError, open_store, store_version
from bench_plugin.results.summary import SCHEMA, SummaryError, load_summary, parse_summary
from bench_plugin.scenario import Arm

ROOT = Path(__file__).resolve().parents[2]
H200 = ROOT / "docs" / "results" / "h200-day19"


# summary.json holds the analysis' floats as Python writes them (json.dumps: the shortest repr, no rounding),
# and their last digit is the CPU's as much as the code's: numpy's exp and log take an AVX-512 path where the
# CPU has one and another where it has none, and the two differ in the last bit. The committed campaign's
# normalised-throughput "hi" (exp(mean log + half-width)) reads 0.799932745829833 on an AVX-512 host and
# 0.7999327458298331 without (NPY_DISABLE_CPU_FEATURES=X86_V4 shows it on one machine): 1.4e-16 relative.
# So summary.json is compared as what it means: the same keys, lists, strings, booleans, integers and nulls
# exactly, and floats within FLOAT_REL (relative) or FLOAT_ABS (absolute). 1e-9 relative is ten million times
# the ~1e-16 that a different kernel leaves after the few operations behind each figure, and far finer than
# anything the summary reports (summary.md, report.md and report.html print 3-4 significant digits). The
# absolute bound is for figures near zero that come out of a cancellation, 1 - ratio (a complement) or a
# difference of two close means, where a last-bit error of the operands is large relative to the result;
# 1e-9 of a share, a ms or a req/s means nothing either. The markdown and HTML files are compared byte for
# byte: they hold the code's own rounding of these floats (a last-bit difference moves a printed digit only
# if the value sits on a rounding boundary).
T = 1_800_000_000.0
"""A campaign's clock in the stores built here (epoch seconds)."""
FLOAT_REL = 1e-9
FLOAT_ABS = 1e-9


def json_difference(fresh: Any, committed: Any, path: str = "") -> str | None:
    """Where two parsed JSON documents first differ in meaning (floats within FLOAT_REL/FLOAT_ABS), or None."""
    where = path or "(top level)"
    if isinstance(fresh, float) and isinstance(committed, float):
        if math.isnan(fresh) and math.isnan(committed):
            return None
        if math.isclose(fresh, committed, rel_tol=FLOAT_REL, abs_tol=FLOAT_ABS):
            return None
        return f"{where}: {fresh!r} here, {committed!r} committed (beyond {FLOAT_REL:g} relative, " \
               f"{FLOAT_ABS:g} absolute)"
    if type(fresh) is not type(committed):  # bool is an int and 1 == 1.0: the JSON types must match too
        return f"{where}: {fresh!r} here, {committed!r} committed (a {type(fresh).__name__} for a " \
               f"{type(committed).__name__})"
    if isinstance(fresh, dict):  # an object's keys as a set: their order means nothing
        if fresh.keys() != committed.keys():
            added, lost = sorted(fresh.keys() - committed.keys()), sorted(committed.keys() - fresh.keys())
            return f"{where}: keys new here {added or 'none'}, keys gone {lost or 'none'}"
        for key in committed:
            found = json_difference(fresh[key], committed[key], f"{path}.{key}" if path else key)
            if found:
                return found
        return None
    if isinstance(fresh, list):
        for i, (a, b) in enumerate(zip(fresh, committed, strict=False)):
            found = json_difference(a, b, f"{path}[{i}]")
            if found:
                return found
        if len(fresh) != len(committed):
            return f"{where}: {len(fresh)} items here, {len(committed)} committed"
        return None
    return None if fresh == committed else f"{where}: {fresh!r} here, {committed!r} committed"


def test_summary_json_is_compared_by_meaning_and_the_first_difference_is_named() -> None:
    committed = {"trials": [{"arm": "a", "n": 3, "ok": True, "hi": 0.799932745829833, "lo": 0.0, "note": None}]}
    same = json.loads(json.dumps(committed))
    same["trials"][0]["hi"], same["trials"][0]["lo"] = 0.7999327458298331, -2.220446049250313e-16
    assert json_difference(same, committed) is None  # last-bit differences, and a cancellation's residue
    changed = json.loads(json.dumps(committed))
    changed["trials"][0]["hi"] = 0.7999335
    assert json_difference(changed, committed) == (
        "trials[0].hi: 0.7999335 here, 0.799932745829833 committed (beyond 1e-09 relative, 1e-09 absolute)")
    for key, value, why in (("n", 3.0, "(a float for a int)"), ("ok", 1, "(a int for a bool)"),
                            ("note", "x", "(a str for a NoneType)"), ("arm", "b", "committed")):
        other = json.loads(json.dumps(committed))
        other["trials"][0][key] = value
        found = json_difference(other, committed)
        assert found is not None and found.startswith(f"trials[0].{key}: ") and found.endswith(why), found
    assert json_difference({"trials": []}, committed) == "trials: 0 items here, 1 committed"
    assert json_difference({"x": 1, "trials": []}, committed) == "(top level): keys new here ['x'], keys gone none"
    assert json_difference({"x": 1}, committed) == "(top level): keys new here ['x'], keys gone ['trials']"
    reordered = {"trials": [dict(reversed(committed["trials"][0].items()))]}
    assert json_difference(reordered, committed) is None


def small_store(path: Path) -> None:
    rec = Recorder(path)
    rec.set_meta("scenario", {"name": "s", "resolved": resolved([{"name": "a", "control": True}],
                                                                {"llm": {"slo": {"p95_ms": 1000.0}}})})
    rec.add_trial(1, 0, Arm(name="a"), 1)
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
    with pytest.raises(StoreError,
                       match=r"store version 99 is not one this bench-plugin reads \(1, 2, 3, 4, 5, 6, 7\)"):
        summarise(tmp_path)
    with pytest.raises(StoreError, match="store version 99"):
        Recorder(tmp_path / "results.sqlite")  # nor written into
    done = subprocess.run([sys.executable, "-m", "bench_plugin.cli", "report", str(tmp_path)], capture_output=True,
                          text=True, check=False)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        f"bench-plugin: error: {tmp_path / 'results.sqlite'}: store version 99 is not one this bench-plugin reads "
        "(1, 2, 3, 4, 5, 6, 7): read it with the bench-plugin that wrote it"]
    assert not (tmp_path / "summary.json").exists()  # nothing written before refusing


def as_version_6(path: Path) -> None:
    """The store as version 6 wrote it: no server series, samples without the server's split of their time."""
    db = sqlite3.connect(path)
    for table in ("samples", "superseded_samples"):
        for column in ("server_queue_s", "server_compute_s"):
            db.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
    db.execute("DROP TABLE server_series")
    db.execute("DROP TABLE superseded_server_series")
    db.execute("UPDATE meta SET value='6' WHERE key='store_version'")
    db.commit()
    db.close()


def store_with_samples(path: Path) -> None:
    """One trial of one stage of five llm requests."""
    rec = Recorder(path)
    rec.set_meta("scenario", {"name": "s", "resolved": resolved([{"name": "a", "control": True}],
                                                                {"llm": {"slo": {"p95_ms": 1000.0}}})})
    rec.add_trial(1, 0, Arm(name="a"), 1)
    rec.trial_started(1)
    rec.segment_applied(1, 0, ["llm"], Placement({"llm": ClassPlacement(url="http://127.0.0.1:1", device="cpu")}))
    rec.stage_started(1, 0, 0, "s0", {"llm": 5.0}, {"llm": "poisson"}, T, planned_s=1.0, arrivals={"llm": 5})
    rec.add_samples([Sample("llm", 1, 0, 0, i, i, T + i / 5, T + i / 5, T + i / 5 + 0.1 * (i + 1), True)
                     for i in range(5)])
    rec.stage_ended(1, 0, 0, T + 1.0, "completed")
    rec.segment_released(1, 0)
    rec.trial_ended(1, "completed")
    rec.set_meta("status", {"status": "completed", "reason": None})
    rec.close()


def test_a_version_6_store_reads_as_it_is_and_a_resume_upgrades_it_in_place(tmp_path: Path) -> None:
    path = tmp_path / "results.sqlite"
    store_with_samples(path)
    as_version_6(path)
    before = summarise(tmp_path)
    with open_store(path) as db:
        assert store_version(db) == 6
    with pytest.raises(StoreError, match="a store of an older version"):
        Recorder(path)  # a new campaign never writes into it
    rec = Recorder(path, upgrade=True)  # a resume does, once it is this version's
    rec.add_server_points(1, 0, -1, [ServerPoint(T + 50, "llm", "queue_depth", 3.0)])  # after the stage
    rec.close()
    with open_store(path) as db:
        assert store_version(db) == STORE_VERSION == 7
        columns = {row[1] for row in db.execute("PRAGMA table_info(samples)")}
        assert {"server_queue_s", "server_compute_s"} <= columns
        assert {row[1] for row in db.execute("PRAGMA table_info(superseded_samples)")} >= columns
        rows = db.execute("SELECT workload, quantity, value FROM server_series").fetchall()
        assert [tuple(row) for row in rows] == [("llm", "queue_depth", 3.0)]
    after = summarise(tmp_path)
    assert after.trials == before.trials  # every row already there reads as before
    assert after.trials[0].stages[0].classes["llm"].requests == 5


def test_a_file_that_is_no_store_is_refused(tmp_path: Path) -> None:
    sqlite3.connect(tmp_path / "results.sqlite").execute("CREATE TABLE other (x)").connection.close()
    with pytest.raises(StoreError, match="not a results store"):
        summarise(tmp_path)


def test_a_summary_of_another_schema_is_refused_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "summary.json"
    path.write_text(json.dumps({"schema": "bench_plugin.summary/1", "trials": []}))
    with pytest.raises(SummaryError, match=r"schema 'bench_plugin.summary/1' is not one this bench-plugin reads "
                                           r"\('bench_plugin.summary/2', 'bench_plugin.summary/3', "
                                           r"'bench_plugin.summary/4'\).*"
                                           r"regenerate it with `bench-plugin report DIR`"):
        load_summary(path)
    path.write_text(json.dumps({"schema": "bench_plugin.summary/5", "trials": []}))  # newer: no advice to regenerate
    with pytest.raises(SummaryError, match=r"schema 'bench_plugin.summary/5' is not one this bench-plugin reads "
                                           r"\([^)]*\)$"):
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
    shutil.copytree(H200, target, ignore=shutil.ignore_patterns("results.sqlite"))  # as a clone has it: packed
    assert unpack_store(target) == target / "results.tar.xz"
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
    # `bench-plugin report docs/results/h200-day19` and check the README's figures against it. summary.json
    # is compared by meaning (json_difference: its floats' last bit is the CPU's); the rest byte for byte.
    # The plots' SVG is matplotlib's to write (another release draws the same figure in other bytes), so
    # report.html is compared without it.
    stale = "docs/results/h200-day19/{} is stale: regenerate it (bench-plugin report)"
    fresh_json, committed_json = (json.loads((d / "summary.json").read_text(encoding="utf-8")) for d in (target, H200))
    found = json_difference(fresh_json, committed_json)
    assert found is None, f"{stale.format('summary.json')}: first difference at {found}"
    for name in ("summary.md", "report.md", "report.html"):
        fresh, committed = ((d / name).read_text(encoding="utf-8") for d in (target, H200))
        if name == "report.html":
            fresh, committed = (re.sub(r"<svg\b.*?</svg>", "<svg/>", text, flags=re.S) for text in (fresh, committed))
        assert fresh == committed, stale.format(name)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["h100-queueing", "h100-disruption"])
def test_a_committed_h100_campaign_reports_as_committed(tmp_path: Path, name: str) -> None:
    """docs/results/h100-queueing (a version 7 store, its servers' metrics per stage) and h100-disruption (a
    resumed campaign whose stages were disrupted, one step each): `bench-plugin report` on each writes the
    committed summary.json (by meaning) and summary.md and report.md (byte for byte). Their report.html is not
    committed (their READMEs say why), so it is written and not compared."""
    source = ROOT / "docs" / "results" / name
    target = tmp_path / name
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("results.sqlite", "report.html"))
    assert unpack_store(target) == target / "results.tar.xz"
    done = subprocess.run([sys.executable, "-m", "bench_plugin.cli", "report", str(target)], capture_output=True,
                          text=True, check=False, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    stale = f"docs/results/{name}/{{}} is stale: regenerate it (bench-plugin report)"
    found = json_difference(*(json.loads((d / "summary.json").read_text(encoding="utf-8")) for d in (target, source)))
    assert found is None, f"{stale.format('summary.json')}: first difference at {found}"
    for page in ("summary.md", "report.md"):
        assert (target / page).read_text(encoding="utf-8") == (source / page).read_text(encoding="utf-8"), \
            stale.format(page)
    assert (target / "report.html").stat().st_size > 0
