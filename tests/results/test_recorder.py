"""The results store: samples reach the file only at commits (stage ends), and read back intact."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from bench_plugin.results.recorder import Recorder
from bench_plugin.results.store import read_samples
from bench_plugin.samples import Sample


def sample(seq: int) -> Sample:
    return Sample("llm", 1, 0, 0, seq, seq % 3, 10.0 + seq, 10.001 + seq, 10.5 + seq, True,
                  first_token_s=10.1 + seq, output_tokens=8, input_tokens=16, status=200)


def on_disk(path: Path) -> int:
    db = sqlite3.connect(path)
    try:
        return db.execute("SELECT count(*) FROM samples").fetchone()[0]
    finally:
        db.close()


def test_samples_are_committed_at_stage_end_and_read_back(tmp_path: Path) -> None:
    rec = Recorder(tmp_path / "r.sqlite")
    rec.add_trial(1, 0, "a", 1, {"name": "a"})
    rec.stage_started(1, 0, 0, "low", {"llm": 1.0}, {"llm": "poisson"}, 10.0)
    rec.add_samples([sample(i) for i in range(5)])
    assert on_disk(tmp_path / "r.sqlite") == 0
    rec.stage_ended(1, 0, 0, 20.0, "completed")
    assert on_disk(tmp_path / "r.sqlite") == 5
    db = sqlite3.connect(tmp_path / "r.sqlite")
    back = read_samples(db, "trial=?", (1,))
    assert back == [sample(i) for i in range(5)]
    assert back[0].ttft_ms == pytest.approx(100.0) and back[0].tpot_ms == pytest.approx(400.0 / 7)
    assert db.execute("SELECT duration_s, status FROM stages").fetchone() == (10.0, "completed")
    db.close()
    rec.close()
    assert not (tmp_path / "r.sqlite-wal").exists()
