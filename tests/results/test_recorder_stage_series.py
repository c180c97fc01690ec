"""The recorder's stage series: a queried source's per-class rows and notes, written per stage and read back."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from bench_plugin.results.recorder import Recorder
from bench_plugin.results.store import SUPERSEDABLE, StageSeriesRecord, open_campaign
from bench_plugin.results.telemetry_rows import TelemetryRow
from bench_plugin.telemetry import fields as F

ROWS = {
    "llm": [TelemetryRow(10.0, "cuda:0", F.GPU_UTIL, 61.0, "pod:bench/llm-0"),
            TelemetryRow(10.5, "cuda:0", F.GPU_UTIL, 97.0, "pod:bench/llm-0")],
    "asr": [TelemetryRow(10.0, "MIG-1", F.FB_USED, 20480.0, None)],
    "embedding": [],
}
NOTES = ["DCGM_FI_PROF_SM_ACTIVE: no series for llm (UUID GPU-1)", "DCGM_FI_DEV_POWER_USAGE: no series for asr (...)"]


def test_rows_and_notes_of_a_stage_are_written_together_and_read_back(tmp_path: Path) -> None:
    rec = Recorder(tmp_path / "r.sqlite")
    rec.add_stage_series(1, 0, 2, "prometheus", ROWS, NOTES)
    rec.add_stage_series(1, 0, 3, "prometheus", {"llm": []}, ["Prometheus at x unreachable: Connection refused"])
    rec.add_stage_series(2, 0, 0, "prometheus", {"llm": ROWS["llm"]}, [])
    rec.add_stage_series(1, 1, 0, "prometheus", {}, [])  # nothing to write: no rows appear
    rec.close()
    with open_campaign(tmp_path / "r.sqlite") as reader:
        first, second = reader.stage_series(1), reader.stage_series(2)
    assert first == [
        StageSeriesRecord(0, 2, "prometheus", {"llm": ROWS["llm"], "asr": ROWS["asr"]}, NOTES),
        StageSeriesRecord(0, 3, "prometheus", {}, ["Prometheus at x unreachable: Connection refused"]),
    ]
    assert second == [StageSeriesRecord(0, 0, "prometheus", {"llm": ROWS["llm"]}, [])]
    db = sqlite3.connect(tmp_path / "r.sqlite")  # the table itself: no row under any other trial either
    assert db.execute("SELECT COUNT(*) FROM stage_series").fetchone()[0] == 5
    db.close()


def test_the_existing_tables_are_unchanged(tmp_path: Path) -> None:
    Recorder(tmp_path / "r.sqlite").close()
    db = sqlite3.connect(tmp_path / "r.sqlite")
    tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    columns = [row[1] for row in db.execute("PRAGMA table_info(telemetry)")]
    db.close()
    assert tables == {"meta", "trials", "segments", "stages", "samples", "telemetry", "events", "stage_series",
                      "stage_series_notes", "pod_events", "server_series"} | {f"superseded_{name}"
                                                                              for name in SUPERSEDABLE}
    assert columns == ["t", "device", "metric", "value", "process", "trial"]
