"""A disk that fills up mid-campaign, or has no room to start: the campaign stops cleanly and keeps what it committed.

Real processes and a real full disk: the ``locust`` command (manual backend, the synthetic server) writing its
results onto a small tmpfs of its own, which the test fills to the last byte once the first stage has
ended. The campaign must stop on its own (before, it hung until Ctrl-C) with status ``failed``, exit 2 and one
line naming the file and the error; results.sqlite alone (without its -wal file) must hold the first stage's
every sample; summary.json must be written. A disk without room for the store's reserve refuses the
campaign before it starts, in one line. Mounting a tmpfs needs root: elsewhere these tests are skipped.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness import run_locust, scenario_variant, start_locust, stop_process, synthetic_server

pytestmark = pytest.mark.slow

EMBEDDING = {"model": "bench-synthetic", "requests": {"count": 4, "batch_size": 2, "input_tokens": 8, "seed": 2},
             "slo": {"p95_ms": 1000}}


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 64 MiB tmpfs mounted under tmp_path, unmounted after the test."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(disk)], capture_output=True,
                             text=True, check=False)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (root only): {mounted.stderr.strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def fill(disk: Path) -> Path:
    """Write a file on ``disk`` until it has no byte left; the file."""
    filler = disk / "filler"
    chunk = b"\0" * (1 << 20)
    with open(filler, "wb", buffering=0) as fh:
        try:
            while True:
                fh.write(chunk)
        except OSError:
            pass
        try:  # the last few KB
            while True:
                fh.write(b"\0" * 4096)
        except OSError:
            pass
    return filler


def stage_statuses(store: Path) -> list[str]:
    try:
        with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as db:
            return [row[0] for row in db.execute("SELECT status FROM stages ORDER BY stage")]
    except sqlite3.OperationalError:
        return []


def test_a_disk_that_fills_mid_campaign_stops_it_keeping_what_was_committed(tmp_path: Path, small_disk: Path) -> None:
    scenario = scenario_variant(tmp_path, "calibration", classes={"embedding": EMBEDDING}, readiness_timeout_s=20,
                                stages=[{"duration_s": 3, "load": {"embedding": 8}},
                                        {"duration_s": 20, "load": {"embedding": 8}}])
    results, log = small_disk / "results", tmp_path / "locust.log"
    with synthetic_server(tmp_path / "server.log", "--latency-ms", "5") as url:
        proc = start_locust(["-f", "locustfiles/mixed.py", "--scenario", str(scenario), "--results-dir", str(results),
                             "--host", url, "--arm", "synthetic"], log)
        try:
            deadline = time.time() + 60
            while stage_statuses(results / "results.sqlite")[:1] != ["completed"] and time.time() < deadline:
                assert proc.poll() is None, log.read_text()
                time.sleep(0.1)
            filler = fill(small_disk)
            code = proc.wait(timeout=60)  # it stops on its own, well before stage 1's 20 s are over
        finally:
            stop_process(proc)
    output = log.read_text()
    assert code == 2, output
    assert "Traceback" not in output, output
    assert f"bench_plugin: error: campaign failed: writing {results / 'results.sqlite'} failed: " in output, output
    assert "the campaign stopped there (what was committed is kept)" in output
    summary = json.loads((results / "summary.json").read_text())
    assert summary["status"]["status"] == "failed"
    filler.unlink()
    alone = tmp_path / "alone.sqlite"  # results.sqlite without its -wal: what the file itself holds
    shutil.copyfile(results / "results.sqlite", alone)
    with sqlite3.connect(alone) as db:
        stages = dict(db.execute("SELECT stage, status FROM stages").fetchall())
        first = db.execute("SELECT count(*) FROM samples WHERE stage=0").fetchone()[0]
    assert stages[0] == "completed" and stages[1] == "interrupted", stages
    assert first == 24, first  # 8 req/s x 3 s: every sample of the stage that ended before the disk filled
    assert not (results / "results.sqlite.reserve").exists()


def test_a_disk_without_room_refuses_the_campaign_in_one_line(tmp_path: Path, small_disk: Path) -> None:
    filler = fill(small_disk)
    os.truncate(filler, filler.stat().st_size - (4 << 20))  # 4 MiB left: less than the store's reserve
    refused(tmp_path, small_disk / "results", f"bench_plugin: error: {small_disk / 'results'}: cannot keep 16 MiB "
            "free for the results (No space left on device): free some space, or write them elsewhere (--results-dir)")


def test_a_results_dir_that_cannot_be_written_is_refused_in_one_line(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    refused(tmp_path, blocker / "results", f"bench_plugin: error: --results-dir {blocker / 'results'}: cannot write "
            f"there ({blocker} is not a directory)")


def refused(tmp_path: Path, results: Path, line: str) -> None:
    """A campaign with its results at ``results`` is refused before it starts: exit 2 and ``line``, no traceback."""
    scenario = scenario_variant(tmp_path, "calibration", classes={"embedding": EMBEDDING},
                                stages=[{"duration_s": 1, "load": {"embedding": 2}}])
    done = run_locust(["-f", "locustfiles/mixed.py", "--scenario", str(scenario), "--results-dir", str(results),
                       "--host", "http://127.0.0.1:9", "--arm", "synthetic"], timeout=60)
    assert done.returncode == 2, done.stdout
    assert "Traceback" not in done.stdout, done.stdout
    assert line in done.stdout, done.stdout
