"""Pod events in the store (since version 3): written by the Recorder at the cluster's times, read back typed and in
order, summarised into summary.json; a version-2 store, which has none, still reads and reports."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from stored_scenario import resolved

from bench_plugin.report.outputs import summarise, write_outputs
from bench_plugin.results.pod_events import PodEvent
from bench_plugin.results.recorder import Recorder
from bench_plugin.results.store import (
    STORE_VERSION,
    StoreError,
    open_campaign,
    open_store,
    read_pod_events,
    store_version,
)
from bench_plugin.results.summary import load_summary, parse_summary
from bench_plugin.scenario import Arm

T = 1_800_000_000.0
MESSAGE = "0/1 nodes are available: 1 Insufficient nvidia.com/gpu. preemption: 0/1 nodes are available: 1 " \
          "Preemption is not helpful for scheduling."


def campaign(path: Path, pods: bool = True) -> None:
    """One trial of one arm; with ``pods``, its pods' events as the pod watch delivers them (not in time order)."""
    rec = Recorder(path)
    rec.set_meta("scenario", {"name": "s", "resolved": resolved([{"name": "a", "control": True}],
                                                                {"llm": {"slo": {"p95_ms": 1000.0}}})})
    rec.add_trial(1, 0, Arm(name="a"), 1)
    rec.trial_started(1)
    if pods:
        for event in (PodEvent(T + 2, "scheduled", "bench-llm-x", "u1", "llm", "gpu-a",
                               requests={"nvidia.com/gpu": "1"}),
                      PodEvent(T + 0.5, "failed_scheduling", "bench-llm-x", "u1", "llm", reason="FailedScheduling",
                               message=MESSAGE, count=3),
                      PodEvent(T, "created", "bench-llm-x", "u1", "llm"),
                      PodEvent(T + 3, "ready", "bench-llm-x", "u1", "llm", "gpu-a"),
                      PodEvent(T + 1, "created", "bench-asr-y", "u2", "asr")):
            rec.pod_event(1, event)
        rec.pod_event(2, PodEvent(T, "created", "elsewhere", "u3", "llm"))  # another trial's
    rec.trial_ended(1, "completed")
    rec._db.execute("UPDATE trials SET started_s=?, ended_s=? WHERE id=1", (T - 1, T + 10))  # fixed times
    rec.set_meta("status", {"status": "completed", "reason": None})
    rec.close()


def test_pod_events_read_back_typed_and_in_order(tmp_path: Path) -> None:
    campaign(tmp_path / "results.sqlite")
    with open_store(tmp_path / "results.sqlite") as db:
        assert store_version(db) == STORE_VERSION
        events = read_pod_events(db, 1)
    assert [(e.pod, e.kind) for e in events] == [
        ("bench-llm-x", "created"), ("bench-llm-x", "failed_scheduling"), ("bench-asr-y", "created"),
        ("bench-llm-x", "scheduled"), ("bench-llm-x", "ready")]
    failed = events[1]
    assert (failed.t, failed.count, failed.message, failed.reason) == (T + 0.5, 3, MESSAGE, "FailedScheduling")
    assert dict(events[3].requests) == {"nvidia.com/gpu": "1"} and events[3].node == "gpu-a"
    with open_campaign(tmp_path / "results.sqlite") as reader:
        assert reader.pod_events(1) == events and [e.pod for e in reader.pod_events(2)] == ["elsewhere"]


def test_summary_json_has_each_pods_scheduling_and_the_arms(tmp_path: Path) -> None:
    campaign(tmp_path / "results.sqlite")
    summary = summarise(tmp_path)
    [llm, asr] = summary.trials[0].pods or []
    assert (llm.pod, llm.workload, llm.node, llm.created_s, llm.scheduled_s, llm.ready_s) == (
        "bench-llm-x", "llm", "gpu-a", T, T + 2, T + 3)
    assert (llm.pending_s, llm.pending_until) == (2.0, "scheduled")
    assert llm.failed_scheduling == {"Insufficient nvidia.com/gpu": 3} and llm.first_failed_scheduling == MESSAGE
    assert (asr.pending_s, asr.pending_until) == (9.0, "trial end")  # never scheduled: until the trial ended
    pods = summary.arms["a"].pods
    assert pods is not None and pods.trials == 1 and pods.pending.max_s == 9.0
    assert pods.pending.spread.values == [9.0] and pods.classes["llm"].max_s == 2.0
    assert pods.reasons == {"Insufficient nvidia.com/gpu": 3}
    (tmp_path / "summary.json").write_text(summary.to_json())
    assert load_summary(tmp_path / "summary.json") == summary


def as_version_2(path: Path) -> None:
    """What a version-2 store is: this schema without pod_events."""
    db = sqlite3.connect(path)
    db.execute("DROP TABLE pod_events")
    db.execute("UPDATE meta SET value='2' WHERE key='store_version'")
    db.commit()
    db.close()


def test_a_version_2_store_still_reads_and_reports(tmp_path: Path) -> None:
    campaign(tmp_path / "results.sqlite", pods=False)
    as_version_2(tmp_path / "results.sqlite")
    with open_store(tmp_path / "results.sqlite") as db:
        assert store_version(db) == 2 and read_pod_events(db, 1) == []
    write_outputs(tmp_path)
    report = tmp_path / "report.html"
    summary = load_summary(tmp_path / "summary.json")
    assert summary.trials[0].pods is None and summary.arms["a"].pods is None
    assert "pods: what the cluster did" not in report.read_text()
    assert "## Scheduling" not in (tmp_path / "report.md").read_text()
    with pytest.raises(StoreError, match="a store of an older version"):
        Recorder(tmp_path / "results.sqlite")  # never appended to in the new form


def test_a_summary_written_before_the_pods_sections_still_loads(tmp_path: Path) -> None:
    campaign(tmp_path / "results.sqlite", pods=False)
    data = json.loads(summarise(tmp_path).to_json())
    for trial in data["trials"]:
        del trial["pods"]
    for arm in data["arms"].values():
        del arm["pods"]
    older = parse_summary(data)  # as a bench_plugin.summary/2 file from before
    assert older.trials[0].pods is None and older.arms["a"].pods is None
