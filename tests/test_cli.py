"""The bench-plugin command: validate scenarios, regenerate reports, compare two campaigns or refuse."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from harness import ROOT, Campaign

CLI = [sys.executable, "-m", "bench_plugin.cli"]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, cwd=ROOT, timeout=300, check=False)


def test_validate_ok_and_bad(tmp_path: Path) -> None:
    done = cli("validate", "scenarios/day19.yaml")
    assert done.returncode == 0 and "day19: 2 arms x 3 repeats, 3 stages, classes llm, embedding, asr" in done.stdout
    done = cli("validate", "scenarios/search-calibration.yaml")  # a search has no fixed stages; one arm is "1 arm"
    outline = ("search-calibration: 1 arm x 2 repeats, an adaptive search from scale 1 up to 32 of {embedding 10} "
               "req/s in 3-s stages, to 15%, classes embedding")
    assert done.returncode == 0 and outline in done.stdout
    sized = tmp_path / "sized.yaml"
    sized.write_text((ROOT / "scenarios" / "search-calibration.yaml").read_text().replace(
        "stage_duration_s: 3", "stage_duration_s: 3\n  stage_requests: 90"))
    done = cli("validate", str(sized))  # probes sized by requests: from the floor to the hold
    assert done.returncode == 0 and "in 3-9-s stages of 90 requests of the least loaded class, to 15%" in done.stdout
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nrepeats: 0\n")
    done = cli("validate", str(bad))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"{bad}: repeats" in done.stderr and f"{bad}: classes: required key is missing" in done.stderr


SHORT_AND_LONG = """\
name: short-and-long
classes:
  llm: {model: m, slo: {p95_ms: 100}}
  embedding: {model: e, arrival: closed, slo: {p95_ms: 100}}
arms: [{name: a, control: true}]
stages:
  - {name: low, duration_s: 12, load: {llm: 1, embedding: 2}}
  - {name: long, duration_s: 80, load: {llm: 1, embedding: 2}}
"""


def test_validate_warns_of_a_stage_too_short_to_bound_a_p95(tmp_path: Path) -> None:
    path = tmp_path / "short.yaml"
    path.write_text(SHORT_AND_LONG)
    done = cli("validate", str(path))
    assert done.returncode == 0 and f"{path}: ok" in done.stdout, done.stderr
    assert done.stderr.splitlines() == [
        f"bench-plugin: warning: {path}: stage 0 'low' llm: 1 req/s x 12 s gives 12 samples; a P95 needs 72 to be "
        "bounded (95% order-statistic interval): run it >= 72 s"
    ]  # none for the 80 s stage, nor for the closed-loop class


def test_report_refuses_a_directory_without_results(tmp_path: Path) -> None:
    done = cli("report", str(tmp_path))
    assert done.returncode == 2 and f"{tmp_path}: not a results directory" in done.stderr


@pytest.fixture(scope="module")
def two_campaigns(short_campaign: Campaign, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    a = short_campaign.results  # read only
    b = tmp_path_factory.mktemp("cmp") / "b"
    shutil.copytree(a, b)
    for name in ("report.html", "report.md", "summary.json", "summary.md"):
        (b / name).unlink(missing_ok=True)
    return a, b


@pytest.mark.slow
def test_regenerate_writes_every_report(two_campaigns: tuple[Path, Path]) -> None:
    _, b = two_campaigns
    done = cli("report", str(b))
    assert done.returncode == 0, done.stderr
    for name in ("summary.json", "summary.md", "report.html", "report.md"):
        assert (b / name).is_file(), name


@pytest.mark.slow
def test_same_experiment_is_compared_side_by_side(two_campaigns: tuple[Path, Path], tmp_path: Path) -> None:
    a, b = two_campaigns
    out = tmp_path / "cmp.md"
    done = cli("report", str(a), str(b), "--out", str(out))
    assert done.returncode == 0, done.stderr
    text = out.read_text()
    assert "same recorded conditions" in text
    assert "| shared | 0 | llm |" in text and "| 1.00x |" in text


@pytest.mark.slow
def test_different_request_set_is_refused_naming_it(two_campaigns: tuple[Path, Path], tmp_path: Path) -> None:
    a, b = two_campaigns
    c = tmp_path / "c"
    shutil.copytree(b, c)
    db = sqlite3.connect(c / "results.sqlite")
    sets = json.loads(db.execute("SELECT value FROM meta WHERE key='request_sets'").fetchone()[0])
    sets["llm"]["sha256"] = "0" * 64
    db.execute("UPDATE meta SET value=? WHERE key='request_sets'", (json.dumps(sets),))
    db.commit()
    db.close()
    for name in ("report.html", "report.md", "summary.json", "summary.md"):
        (c / name).unlink(missing_ok=True)
    before = {p.name: p.stat().st_mtime_ns for p in a.iterdir()}
    done = cli("report", str(a), str(c))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    (line,) = [line for line in done.stderr.splitlines() if "not the same experiment" in line]
    real = json.loads((a / "summary.json").read_text())["request_sets"]["llm"]["sha256"]
    assert line == f"bench-plugin: error: not the same experiment: request_sets.llm.sha256: {real} vs {'0' * 64}"
    assert {p.name: p.stat().st_mtime_ns for p in a.iterdir()} == before, "a refused comparison wrote into A"
    assert not any((c / name).exists() for name in ("summary.json", "report.html")), "a refused comparison wrote into B"
