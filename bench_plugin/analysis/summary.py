"""Summary: per trial, stage and class figures from the results store, and their spread over repeats.

Each request belongs to the stage of its intended send time. Throughput counts successful requests
per second of stage time (and tokens/s, inputs/s, audio s/s where they apply); latency percentiles
are over successful requests; errors are counted by kind. An exclusive arm measured "alone in turn"
has one segment per class; its stage ``i`` takes each class's figures from that class's segment.

summary.json (schema ``bench_plugin.summary/1``) is a contract that other tools read.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench_plugin.analysis.statistics import percentiles, spread
from bench_plugin.recorder import read_samples
from bench_plugin.samples import Sample
from bench_plugin.scenario import WORKLOAD_CLASSES

SCHEMA = "bench_plugin.summary/1"


@dataclass
class ClassStats:
    """One class in one stage of one trial."""

    requests: int
    errors: int
    errors_by_kind: dict[str, int]
    duration_s: float
    throughput_rps: float
    latency_ms: dict[str, float | None]
    queue_ms: dict[str, float | None]
    ttft_ms: dict[str, float | None] | None = None
    tpot_ms: dict[str, float | None] | None = None
    output_tokens_per_s: float | None = None
    inputs_per_s: float | None = None
    audio_s_per_s: float | None = None


@dataclass
class StageSummary:
    """One stage of one trial."""

    index: int
    name: str | None
    offered: dict[str, float]
    arrival: dict[str, str]
    duration_s: float | None
    status: str
    reason: str | None
    classes: dict[str, ClassStats] = field(default_factory=dict)


@dataclass
class TrialSummary:
    """One trial: an arm run once."""

    id: int
    arm: str
    repeat: int
    status: str
    reason: str | None
    placement: dict[str, Any]
    stages: list[StageSummary]


def class_stats(samples: list[Sample], workload: str, duration_s: float) -> ClassStats:
    """Figures of one class's samples over ``duration_s`` seconds of stage time."""
    ok = [s for s in samples if s.ok]
    per_s = 1.0 / duration_s if duration_s > 0 else 0.0
    stats = ClassStats(
        requests=len(samples),
        errors=len(samples) - len(ok),
        errors_by_kind=dict(Counter(s.error or "unknown" for s in samples if not s.ok)),
        duration_s=duration_s,
        throughput_rps=len(ok) * per_s,
        latency_ms=percentiles([s.latency_ms for s in ok]),
        queue_ms=percentiles([s.queue_ms for s in samples]),
    )
    if workload == "llm":
        stats.ttft_ms = percentiles([v for s in ok if (v := s.ttft_ms) is not None])
        stats.tpot_ms = percentiles([v for s in ok if (v := s.tpot_ms) is not None])
        stats.output_tokens_per_s = sum(s.output_tokens or 0 for s in ok) * per_s
    elif workload == "embedding":
        stats.inputs_per_s = sum(s.inputs or 0 for s in ok) * per_s
    elif workload == "asr":
        stats.audio_s_per_s = sum(s.audio_s or 0.0 for s in ok) * per_s
    return stats


def _stage_rows(db: sqlite3.Connection, trial: int) -> dict[int, list[sqlite3.Row]]:
    rows: dict[int, list[sqlite3.Row]] = {}
    for row in db.execute("SELECT * FROM stages WHERE trial=? ORDER BY stage, segment", (trial,)):
        rows.setdefault(row["stage"], []).append(row)
    return rows


def _merge_status(statuses: list[str]) -> str:
    for worst in ("interrupted", "aborted", "running", "skipped"):
        if worst in statuses:
            return worst
    return "completed"


def trial_summary(db: sqlite3.Connection, trial_row: sqlite3.Row) -> TrialSummary:
    """The summary of one trial from the store."""
    trial = trial_row["id"]
    samples = read_samples(db, "trial=?", (trial,))
    by_key: dict[tuple[int, int, str], list[Sample]] = {}
    for s in samples:
        by_key.setdefault((s.segment, s.stage, s.workload), []).append(s)
    placement: dict[str, Any] = {}
    for seg in db.execute("SELECT * FROM segments WHERE trial=? ORDER BY segment", (trial,)):
        for name, where in json.loads(seg["placement"] or "{}").items():
            placement[name] = {**where, "segment": seg["segment"], "ready": json.loads(seg["ready"] or "{}").get(name)}
    stages = []
    for index, rows in sorted(_stage_rows(db, trial).items()):
        offered: dict[str, float] = {}
        arrival: dict[str, str] = {}
        classes: dict[str, ClassStats] = {}
        durations = []
        for row in rows:
            seg_offered = json.loads(row["offered"])
            offered.update(seg_offered)
            arrival.update(json.loads(row["arrival"]))
            if row["duration_s"] is None:
                continue
            durations.append(row["duration_s"])
            for name in seg_offered:
                classes[name] = class_stats(by_key.get((row["segment"], index, name), []), name, row["duration_s"])
        reasons = [row["reason"] for row in rows if row["reason"]]
        stages.append(StageSummary(
            index=index, name=rows[0]["name"], offered=_ordered(offered), arrival=_ordered(arrival),
            duration_s=max(durations) if durations else None, status=_merge_status([r["status"] for r in rows]),
            reason="; ".join(reasons) or None, classes=_ordered(classes),
        ))
    return TrialSummary(trial, trial_row["arm"], trial_row["repeat"], trial_row["status"], trial_row["reason"],
                        placement, stages)


def _ordered(mapping: dict[str, Any]) -> dict[str, Any]:
    return {name: mapping[name] for name in WORKLOAD_CLASSES if name in mapping}


def _arm_figures(trials: list[TrialSummary], arm: str, control: str | None) -> list[dict[str, Any]]:
    """Per stage and class: figures over the arm's repeats, and throughput normalised to the control."""
    mine = [t for t in trials if t.arm == arm]
    theirs = {t.repeat: t for t in trials if t.arm == control}
    n_stages = max((len(t.stages) for t in mine), default=0)
    out = []
    for index in range(n_stages):
        stage_classes: dict[str, Any] = {}
        names = [n for n in WORKLOAD_CLASSES if any(index < len(t.stages) and n in t.stages[index].classes
                                                     for t in mine)]
        for name in names:
            runs = [(t.repeat, t.stages[index].classes[name]) for t in mine
                    if index < len(t.stages) and name in t.stages[index].classes]
            ratios = []
            for repeat, stats in runs:
                ref = theirs.get(repeat)
                ref_stats = ref.stages[index].classes.get(name) if ref and index < len(ref.stages) else None
                if ref_stats is not None and ref_stats.throughput_rps > 0:
                    ratios.append(stats.throughput_rps / ref_stats.throughput_rps)
            fig: dict[str, Any] = {
                "throughput_rps": spread([s.throughput_rps for _, s in runs]).to_dict(),
                "latency_p50_ms": spread([s.latency_ms["p50"] for _, s in runs]).to_dict(),
                "latency_p95_ms": spread([s.latency_ms["p95"] for _, s in runs]).to_dict(),
                "error_rate": spread([s.errors / s.requests if s.requests else None for _, s in runs]).to_dict(),
                "normalised_throughput": spread(ratios).to_dict() if control else None,
            }
            if name == "llm":
                fig["ttft_p95_ms"] = spread([s.ttft_ms["p95"] if s.ttft_ms else None for _, s in runs]).to_dict()
                fig["tpot_p95_ms"] = spread([s.tpot_ms["p95"] if s.tpot_ms else None for _, s in runs]).to_dict()
            stage_classes[name] = fig
        offered = next((t.stages[index].offered for t in mine if index < len(t.stages)), {})
        out.append({"index": index, "offered": offered, "classes": stage_classes})
    return out


def build_summary(db_path: Path) -> dict[str, Any]:
    """The summary.json document of the campaign stored at ``db_path``."""
    db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    db.row_factory = sqlite3.Row
    try:
        meta = {row["key"]: json.loads(row["value"]) for row in db.execute("SELECT key, value FROM meta")}
        trial_rows = list(db.execute("SELECT * FROM trials ORDER BY position"))
        trials = [trial_summary(db, row) for row in trial_rows if row["status"] != "planned"]
    finally:
        db.close()
    scenario = meta.get("scenario", {})
    resolved = scenario.get("resolved", {})
    arm_names = [a["name"] for a in resolved.get("arms", [])]
    control = next((a["name"] for a in resolved.get("arms", []) if a.get("control")), None)
    return {
        "schema": SCHEMA,
        "scenario": {"name": scenario.get("name"), "sha256": scenario.get("sha256"), "path": scenario.get("path")},
        "status": meta.get("status", {"status": "interrupted", "reason": "the run ended without closing the store"}),
        "overrides": meta.get("overrides"),
        "classes": meta.get("classes"),
        "control": control,
        "request_sets": meta.get("request_sets"),
        "conditions": meta.get("conditions"),
        "slo": {name: spec.get("slo") for name, spec in (resolved.get("classes") or {}).items() if spec},
        "trials": [asdict(t) for t in trials],
        "arms": {arm: {"stages": _arm_figures(trials, arm, control if arm != control else None)} for arm in arm_names},
    }


def write_summaries(results_dir: Path) -> dict[str, Any]:
    """Write summary.json and summary.md into ``results_dir``; return the summary."""
    from bench_plugin.report.markdown import render_summary

    summary = build_summary(results_dir / "results.sqlite")
    (results_dir / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=False) + "\n", encoding="utf-8")
    (results_dir / "summary.md").write_text(render_summary(summary), encoding="utf-8")
    return summary
