"""What a resume needs of the store: commits survive a SIGKILL, an ended segment is in the file itself, one
writer at a time, and an unfinished attempt moves aside whole (the analysis no longer sees it)."""

from __future__ import annotations

import json
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

import pytest
from stored_scenario import resolved

from bench_plugin.report.outputs import summarise
from bench_plugin.results.placement import ClassPlacement, Placement
from bench_plugin.results.pod_events import PodEvent
from bench_plugin.results.recorder import Recorder
from bench_plugin.results.samples import Sample
from bench_plugin.results.server_rows import ServerPoint
from bench_plugin.results.store import (
    SUPERSEDABLE,
    StoreError,
    open_campaign,
    open_store,
    read_samples,
    store_version,
)
from bench_plugin.results.telemetry_rows import TelemetryRow
from bench_plugin.results.timeline import ArmApplied, StageEnd
from bench_plugin.scenario import Arm

T = 1_800_000_000.0


def sample(trial: int, segment: int, stage: int, seq: int, workload: str = "llm") -> Sample:
    t = T + 100 * trial + 10 * segment + stage + seq / 100
    return Sample(workload, trial, segment, stage, seq, seq % 3, t, t + 0.001, t + 0.05, True,
                  first_token_s=t + 0.01 if workload == "llm" else None, output_tokens=4, input_tokens=8, status=200)


def run_segment(rec: Recorder, trial: int, segment: int, stages: int, *, release: bool, workload: str = "llm") -> None:
    """One segment of ``stages`` stages of 5 samples of ``workload`` each, released (ended) or not."""
    base = T + 100 * trial + 10 * segment
    where = {workload: ClassPlacement(url="http://127.0.0.1:1", device="cpu")}
    rec.segment_applied(trial, segment, [workload], Placement(where))
    rec.note(ArmApplied(segment=segment, placement=where), trial)
    # Telemetry is found by time (the segment's start is the clock's now): a row just after it.
    rec.add_telemetry(trial, [TelemetryRow(time.time(), "cpu", "DCGM_FI_DEV_GPU_UTIL", 50.0, None)])
    for stage in range(stages):
        rec.stage_started(trial, segment, stage, f"s{stage}", {workload: 5.0}, {workload: "poisson"}, base + stage,
                          planned_s=1.0, arrivals={workload: 5})
        rec.add_samples([sample(trial, segment, stage, i, workload) for i in range(5)])
        rec.add_server_points(trial, segment, stage, [ServerPoint(base + stage + 0.5, workload, "queue_depth", 1.0),
                                                       ServerPoint(base + stage + 0.5, workload, "running", 2.0)])
        rec.stage_ended(trial, segment, stage, base + stage + 1, "completed")
        rec.note(StageEnd(segment=segment, stage=stage, status="completed", reason=None), trial)
    if release:
        rec.segment_released(trial, segment)


def campaign(path: Path) -> Recorder:
    """Trial 1 ended (two segments); trial 2 cut short in its segment 0, after its first stage."""
    rec = Recorder(path)
    classes = {"llm": {"slo": {"p95_ms": 1000.0}}, "embedding": {"slo": {"p95_ms": 500.0}}}
    rec.set_meta("scenario", {"name": "s", "sha256": "ab" * 32,
                              "resolved": resolved([{"name": "a", "control": True}], classes)})
    for trial in (1, 2):
        rec.add_trial(trial, trial - 1, Arm(name="a"), trial)
    rec.trial_started(1)
    run_segment(rec, 1, 0, 2, release=True)
    run_segment(rec, 1, 1, 2, release=True, workload="embedding")  # each class alone in turn
    rec.trial_ended(1, "completed")
    rec.trial_started(2)
    rec.pod_event(2, PodEvent(t=T + 200, kind="created", pod="p", uid="u", workload="llm"))
    run_segment(rec, 2, 0, 1, release=False)
    rec.stage_started(2, 0, 1, "s1", {"llm": 5.0}, {"llm": "poisson"}, T + 201, planned_s=1.0, arrivals={"llm": 5})
    return rec


def test_commits_survive_a_sigkill_and_the_stage_in_flight_reads_as_running(tmp_path: Path) -> None:
    """A writer killed mid-stage: everything committed is there; its buffered samples are not, its stage is running."""
    path = tmp_path / "results.sqlite"
    script = textwrap.dedent(f"""
        import os, signal, sys
        sys.path[:0] = [{str(Path(__file__).parent)!r}, {str(Path(__file__).parents[1])!r}]
        from pathlib import Path
        from test_recorder_resume import campaign, sample
        rec = campaign(Path({str(path)!r}))
        rec.add_samples([sample(2, 0, 1, i) for i in range(3)])  # buffered: the stage has not ended
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert (tmp_path / "results.sqlite-wal").is_file()  # never closed: its last commits are in the log
    with open_campaign(path) as reader:
        trials = reader.trials()
        counts = Counter(f"{s.trial}.{s.segment}.{s.stage}" for s in read_samples(reader.db))
    assert [(t.id, t.status) for t in trials] == [(1, "completed"), (2, "running")]
    assert counts == {"1.0.0": 5, "1.0.1": 5, "1.1.0": 5, "1.1.1": 5, "2.0.0": 5}
    (cut,) = trials[1].segments
    assert cut.released_s is None and [s.status for s in trials[1].stages] == ["completed", "running"]
    # The file alone, without its log, holds every segment that ended (the checkpoint at each release).
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(path, alone / "results.sqlite")
    with open_campaign(alone / "results.sqlite") as reader:
        ended = [(t.id, s.index) for t in reader.trials() for s in t.segments if s.released_s is not None]
        samples = len(reader.samples(1))
    assert ended == [(1, 0), (1, 1)] and samples == 20


def test_one_writer_at_a_time(tmp_path: Path) -> None:
    path = tmp_path / "results.sqlite"
    rec = Recorder(path)
    with pytest.raises(StoreError, match=r"results.sqlite: another process is writing this campaign \(one process "
                                         r"at a time\)$"):
        Recorder(path)
    rec.close()
    Recorder(path).close()  # free again once closed


def test_superseding_moves_every_row_of_the_attempt_and_nothing_else(tmp_path: Path) -> None:
    path = tmp_path / "results.sqlite"
    rec = campaign(path)
    rec.stage_ended(2, 0, 1, T + 201.5, "interrupted")
    rec.trial_ended(2, "interrupted")
    db = sqlite3.connect(path)
    before = {table: db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0] for table in SUPERSEDABLE}
    moved = rec.supersede_segment(2, 0, resume=1)
    after = {table: db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0] for table in SUPERSEDABLE}
    aside = {table: db.execute(f"SELECT COUNT(*) FROM superseded_{table} WHERE resume=1").fetchone()[0]
             for table in SUPERSEDABLE}
    assert moved == aside == {"samples": 5, "stages": 2, "segments": 1, "events": 2, "telemetry": 1,
                              "stage_series": 0, "stage_series_notes": 0, "pod_events": 1, "server_series": 2}
    assert all(after[t] == before[t] - moved[t] for t in SUPERSEDABLE)
    assert db.execute("SELECT COUNT(*) FROM samples WHERE trial=2").fetchone() == (0,)
    assert db.execute("SELECT COUNT(*) FROM events WHERE trial=1").fetchone() == (6,)  # trial 1 untouched
    (row,) = db.execute("SELECT * FROM superseded_samples").fetchall()[:1]
    assert row[:5] == (1, "llm", 2, 0, 0)  # resume, then the sample's own columns
    db.close()
    summary = summarise(tmp_path)
    assert [len(t.stages) for t in summary.trials] == [2, 0]  # trial 1: stages 0 and 1 over two segments
    assert {n: c.requests for n, c in summary.trials[0].stages[0].classes.items()} == {"llm": 5, "embedding": 5}
    rec.close()


def test_a_later_segment_takes_the_trials_telemetry_from_its_start_only(tmp_path: Path) -> None:
    path = tmp_path / "results.sqlite"
    rec = Recorder(path)
    rec.add_trial(1, 0, Arm(name="a"), 1)
    rec.trial_started(1)
    run_segment(rec, 1, 0, 1, release=True)
    run_segment(rec, 1, 1, 1, release=False)
    moved = rec.supersede_segment(1, 1, resume=1)
    assert (moved["telemetry"], moved["samples"], moved["segments"]) == (1, 5, 1)
    db = sqlite3.connect(path)
    assert db.execute("SELECT COUNT(*) FROM telemetry").fetchone() == (1,)  # segment 0's stays
    db.close()
    rec.close()


def test_a_resumed_trial_keeps_its_first_start_only_with_a_kept_segment(tmp_path: Path) -> None:
    path = tmp_path / "results.sqlite"
    rec = campaign(path)
    with open_campaign(path) as reader:
        first = {t.id: t.started_s for t in reader.trials()}
    rec.supersede_segment(2, 0, resume=1)
    rec._db.execute("UPDATE trials SET started_s=1.0 WHERE id=1")  # a start to recognise
    rec.trial_started(1)  # trial 1 keeps its segments: its start stays
    rec.trial_started(2)  # trial 2 kept nothing: it starts now
    with open_campaign(path) as reader:
        now = {t.id: t.started_s for t in reader.trials()}
    assert now[1] == 1.0 and now[2] > first[2]
    rec.close()


def test_a_version_3_store_still_reads_and_is_not_written_into(tmp_path: Path) -> None:
    """Version 3 had no superseded_* tables: it reads as a store where nothing was superseded."""
    path = tmp_path / "results.sqlite"
    rec = campaign(path)
    rec.set_meta("status", {"status": "interrupted", "reason": None})
    rec.close()
    db = sqlite3.connect(path)
    for table in SUPERSEDABLE:
        db.execute(f"DROP TABLE superseded_{table}")
    db.execute("UPDATE meta SET value=? WHERE key='store_version'", (json.dumps(3),))
    db.commit()
    db.close()
    with open_store(path) as db:
        assert store_version(db) == 3
    assert [t.id for t in summarise(tmp_path).trials] == [1, 2]
    with pytest.raises(StoreError, match="a store of an older version"):
        Recorder(path)
