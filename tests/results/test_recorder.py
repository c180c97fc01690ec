"""The results store: samples reach the file only at commits (stage ends), and read back intact."""

from __future__ import annotations

import math
import sqlite3
from pathlib import Path

import pytest

from bench_plugin.results.recorder import Recorder
from bench_plugin.results.samples import Sample
from bench_plugin.results.store import StoreWriteError, open_campaign, read_samples
from bench_plugin.results.telemetry_rows import TelemetryRow
from bench_plugin.scenario import Arm


def sample(seq: int) -> Sample:
    return Sample("llm", 1, 0, 0, seq, seq % 3, 10.0 + seq, 10.001 + seq, 10.5 + seq, True,
                  first_token_s=10.1 + seq, output_tokens=8, input_tokens=16, status=200)


def on_disk(path: Path) -> int:
    """How many samples of trial 1 (the only one these tests write) a reader of the file finds now."""
    with open_campaign(path) as reader:
        return len(reader.samples(1))


def test_samples_are_committed_at_stage_end_and_read_back(tmp_path: Path) -> None:
    rec = Recorder(tmp_path / "r.sqlite")
    rec.add_trial(1, 0, Arm(name="a"), 1)
    rec.stage_started(1, 0, 0, "low", {"llm": 1.0}, {"llm": "poisson"}, 10.0)
    rec.add_samples([sample(i) for i in range(5)])
    assert on_disk(tmp_path / "r.sqlite") == 0
    rec.stage_ended(1, 0, 0, 20.0, "completed")
    assert on_disk(tmp_path / "r.sqlite") == 5
    db = sqlite3.connect(tmp_path / "r.sqlite")
    back = read_samples(db, "trial=?", (1,))
    assert back == [sample(i) for i in range(5)]
    assert back[0].ttft_ms == pytest.approx(100.0) and back[0].tpot_ms == pytest.approx(400.0 / 7)
    # the trial never started, so the reader (started trials only) does not show its stage: read the row
    assert db.execute("SELECT duration_s, status FROM stages").fetchone() == (10.0, "completed")
    db.close()
    rec.close()
    assert not (tmp_path / "r.sqlite-wal").exists()


def test_writes_are_on_disk_when_they_return_though_they_ran_off_the_event_loop(tmp_path: Path) -> None:
    path = tmp_path / "r.sqlite"
    rec = Recorder(path)
    try:
        rec.add_trial(1, 0, Arm(name="a"), 1)
        rows = [TelemetryRow(100.0 + i / 5, "cuda:0", "DCGM_FI_DEV_GPU_UTIL", float(i)) for i in range(1000)]
        rec.add_telemetry(1, rows)
        with open_campaign(path) as reader:
            stored = reader.telemetry(1, -math.inf, math.inf, ["DCGM_FI_DEV_GPU_UTIL"])
        assert (len(stored), sum(row.value for row in stored)) == (1000, float(sum(range(1000))))
        db = sqlite3.connect(path)
        try:  # a trial that never started is not the reader's (it reads started trials only): read its row
            assert db.execute("SELECT arm, status FROM trials").fetchone() == ("a", "planned")
        finally:
            db.close()
    finally:
        rec.close()


def test_samples_whose_write_failed_stay_buffered_for_the_next_commit(tmp_path: Path) -> None:
    path = tmp_path / "r.sqlite"
    rec = Recorder(path)
    try:
        rec.add_trial(1, 0, Arm(name="a"), 1)
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("CREATE TRIGGER refuse BEFORE INSERT ON samples BEGIN SELECT RAISE(ABORT, 'no room'); END")
        rec.add_samples([sample(i) for i in range(3)])
        with pytest.raises(StoreWriteError, match=f"writing {path} failed: no room"):
            rec.commit()
        assert on_disk(path) == 0
        rec.add_samples([sample(i) for i in range(3, 5)])
        other.execute("DROP TRIGGER refuse")
        other.close()
        rec.commit()
        db = sqlite3.connect(path)
        try:
            assert read_samples(db, "trial=?", (1,)) == [sample(i) for i in range(5)], "each once, in order"
        finally:
            db.close()
    finally:
        rec.close()
