"""What the report reads from results.sqlite beyond summary.json: each trial's own timeline.

summary.json holds the figures; the timeline needs the raw times: when the arm was applied and where
each class was placed, when each class became ready, when each stage ran and how it ended, every
request's intended send time and latency, and the GPU telemetry of the trial window when a
``telemetry`` table exists (columns ``t, device, metric, value, process``), and the per-stage series
a queried source returned (``stage_series`` and ``stage_series_notes``, where they exist).

It must stay fast on a campaign of a million samples, where building a Python tuple per row is
what costs (about 3 s per million). So: one query counts every trial's requests per class, then ONE
query per trial (the ``samples_by_stage`` index starts with ``trial``) returns every failed request
and only every k-th successful one by insertion order (``rowid % k``, k chosen to leave about twice
the point budget), and numpy thins those evenly in time to the budget of points per plot. Failed
requests are all kept: each one is a tick on the timeline.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from bench_plugin.scenario import WORKLOAD_CLASSES
from bench_plugin.telemetry.rows import TelemetryRow

FloatArray = npt.NDArray[np.float64]

MAX_POINTS = 5000
"""The most successful-request points one latency panel draws (all classes together)."""
MAX_TELEMETRY_POINTS = 2000
"""The most points one telemetry line draws."""


@dataclass
class SegmentRecord:
    """One segment of a trial: where its classes were placed, when the arm was applied and each class ready."""

    index: int
    classes: list[str]
    placement: dict[str, dict[str, Any]]
    applied_s: float | None
    ready: dict[str, float]
    released_s: float | None
    warmup: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Class -> its unmeasured warm-up (started_s, ended_s, requests, errors); empty before warm-ups existed."""


@dataclass
class StageRecord:
    """One stage of one segment as it ran (or did not: ``skipped`` has no times)."""

    segment: int
    index: int
    name: str | None
    status: str
    reason: str | None
    started_s: float | None
    ended_s: float | None
    offered: dict[str, float]


@dataclass
class TrialRecord:
    """One trial's rows: its arm and settings, status, segments and stages."""

    id: int
    position: int
    arm: str
    repeat: int
    arm_config: dict[str, Any]
    status: str
    reason: str | None
    started_s: float | None
    ended_s: float | None
    segments: list[SegmentRecord] = field(default_factory=list)
    stages: list[StageRecord] = field(default_factory=list)


@dataclass(frozen=True)
class RequestCounts:
    """How many requests one class sent in one trial, and how many succeeded."""

    total: int
    ok: int


@dataclass
class ClassRequests:
    """One class's requests in one trial, ready to draw; times are epoch seconds."""

    total: int
    """Every request of the class in the trial."""
    ok_total: int
    """Successful requests of the class in the trial (drawn or not)."""
    ok_t: FloatArray
    """Intended send times of the successful requests kept for drawing (thinned evenly)."""
    ok_latency_ms: FloatArray
    failed_t: FloatArray
    """Intended send times of EVERY failed request."""
    failed_kinds: dict[str, int]


@dataclass
class TelemetrySeries:
    """One metric of one device (and process, when the source splits by process) over a trial window."""

    metric: str
    device: str
    process: str | None
    t: FloatArray
    value: FloatArray


@contextmanager
def open_store(path: Path) -> Iterator[sqlite3.Connection]:
    """Open results.sqlite read-only (a report never changes the results it reports)."""
    if not path.is_file():
        raise FileNotFoundError(f"no results store at {path}")
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    db.row_factory = sqlite3.Row
    try:
        yield db
    finally:
        db.close()


def has_table(db: sqlite3.Connection, name: str) -> bool:
    """Whether the store has a table called ``name`` (older stores lack newer tables)."""
    return db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (name,)).fetchone() is not None


def read_meta(db: sqlite3.Connection) -> dict[str, Any]:
    """The campaign-wide facts (meta table), JSON-decoded."""
    return {row["key"]: json.loads(row["value"]) for row in db.execute("SELECT key, value FROM meta")}


def read_trials(db: sqlite3.Connection) -> list[TrialRecord]:
    """Every trial that started, in run order, with its segments and stages."""
    trials = []
    for row in db.execute("SELECT * FROM trials WHERE status != 'planned' ORDER BY position"):
        trial = TrialRecord(
            id=row["id"], position=row["position"], arm=row["arm"], repeat=row["repeat"],
            arm_config=json.loads(row["arm_config"] or "{}"), status=row["status"], reason=row["reason"],
            started_s=row["started_s"], ended_s=row["ended_s"],
        )
        for seg in db.execute("SELECT * FROM segments WHERE trial=? ORDER BY segment", (trial.id,)):
            trial.segments.append(SegmentRecord(
                index=seg["segment"], classes=json.loads(seg["classes"]),
                placement=json.loads(seg["placement"] or "{}"), applied_s=seg["applied_s"],
                ready=json.loads(seg["ready"] or "{}"), released_s=seg["released_s"],
                warmup=json.loads((seg["warmup"] if "warmup" in seg.keys() else None) or "{}"),  # noqa: SIM118
            ))
        for st in db.execute("SELECT * FROM stages WHERE trial=? ORDER BY segment, stage", (trial.id,)):
            trial.stages.append(StageRecord(
                segment=st["segment"], index=st["stage"], name=st["name"], status=st["status"], reason=st["reason"],
                started_s=st["started_s"], ended_s=st["ended_s"], offered=json.loads(st["offered"]),
            ))
        trials.append(trial)
    return trials


def even_indices(n: int, k: int) -> npt.NDArray[np.intp]:
    """At most ``k`` indices spread evenly over ``range(n)`` (all of them when ``n <= k``)."""
    if n <= k:
        return np.arange(n)
    return np.unique(np.linspace(0, n - 1, k).round().astype(np.intp))


def count_requests(db: sqlite3.Connection) -> dict[tuple[int, str], RequestCounts]:
    """(trial, class) -> requests and successes, for the whole campaign in one query."""
    rows = db.execute("SELECT trial, workload, COUNT(*), SUM(ok) FROM samples GROUP BY trial, workload")
    return {(trial, name): RequestCounts(int(total), int(ok or 0)) for trial, name, total, ok in rows}


def _class_order(names: set[str]) -> list[str]:
    return [n for n in WORKLOAD_CLASSES if n in names] + sorted(names - set(WORKLOAD_CLASSES))


def read_requests(db: sqlite3.Connection, trial: int, counts: dict[tuple[int, str], RequestCounts] | None = None,
                  max_points: int = MAX_POINTS) -> dict[str, ClassRequests]:
    """Per class, the trial's requests to draw: successful ones thinned to ``max_points`` in all, failed all kept.

    ``counts`` is :func:`count_requests` (read once per report); without it, every row is read.
    """
    mine = {name: c for (t, name), c in (counts or {}).items() if t == trial}
    ok_count = sum(c.ok for c in mine.values())
    stride = max(1, ok_count // (2 * max_points)) if counts is not None else 1
    rows = db.execute("SELECT workload, intended_s, end_s, ok, error FROM samples "
                      "WHERE trial=? AND (ok=0 OR rowid % ? = 0)", (trial, stride)).fetchall()
    if not rows:
        return {}
    workload, intended, end, ok, error = zip(*rows, strict=True)
    names = np.asarray(workload, dtype=object)
    t = np.asarray(intended, dtype=np.float64)
    latency = (np.asarray(end, dtype=np.float64) - t) * 1000.0
    good = np.asarray(ok, dtype=bool)
    errors = np.asarray(error, dtype=object)
    if counts is None:
        mine = {n: RequestCounts(int((names == n).sum()), int((good & (names == n)).sum())) for n in set(workload)}
        ok_count = int(good.sum())
    out: dict[str, ClassRequests] = {}
    for name in _class_order(set(workload)):
        rows_of = names == name
        ok_idx = np.flatnonzero(rows_of & good)
        known = mine.get(name, RequestCounts(int(rows_of.sum()), len(ok_idx)))
        # Each class gets a share of the budget in proportion to its successes, at least one point.
        budget = max(1, round(max_points * known.ok / ok_count)) if ok_count else 0
        order = ok_idx[np.argsort(t[ok_idx], kind="stable")]
        kept = order[even_indices(len(order), budget)]
        bad_idx = np.flatnonzero(rows_of & ~good)
        kinds: dict[str, int] = {}
        for kind in errors[bad_idx]:
            key = str(kind or "unknown")
            kinds[key] = kinds.get(key, 0) + 1
        out[name] = ClassRequests(total=known.total, ok_total=known.ok, ok_t=t[kept], ok_latency_ms=latency[kept],
                                  failed_t=np.sort(t[bad_idx]), failed_kinds=kinds)
    return out


def read_telemetry(db: sqlite3.Connection, start_s: float, end_s: float, metrics: Sequence[str],
                   max_points: int = MAX_TELEMETRY_POINTS) -> list[TelemetrySeries]:
    """Rows of ``metrics`` in ``[start_s, end_s]``, one series per (metric, device, process); [] without the table."""
    if not has_table(db, "telemetry") or not metrics:
        return []
    marks = ",".join("?" * len(metrics))
    rows = db.execute(
        f"SELECT metric, device, process, t, value FROM telemetry WHERE t BETWEEN ? AND ? AND metric IN ({marks}) "
        "ORDER BY metric, device, process, t",
        (start_s, end_s, *metrics),
    ).fetchall()
    grouped: dict[tuple[str, str, str | None], list[tuple[float, float]]] = {}
    for row in rows:
        if row["value"] is None:
            continue
        grouped.setdefault((row["metric"], row["device"], row["process"]), []).append((row["t"], row["value"]))
    series = []
    for (metric, device, process), points in grouped.items():
        arr = np.asarray(points, dtype=np.float64)
        keep = even_indices(len(arr), max_points)
        series.append(TelemetrySeries(metric, str(device), process, arr[keep, 0], arr[keep, 1]))
    return series


@dataclass(frozen=True)
class FailureGroup:
    """Failed requests of one trial, stage, class and error kind, with one of their messages."""

    trial: int
    stage: int
    workload: str
    kind: str
    count: int
    detail: str | None


def read_failures(db: sqlite3.Connection) -> list[FailureGroup]:
    """Every failed request, grouped by trial, stage, class and kind (one query; failed rows only)."""
    rows = db.execute(
        "SELECT trial, stage, workload, COALESCE(error, 'unknown'), COUNT(*), MIN(detail) FROM samples "
        "WHERE ok = 0 GROUP BY trial, stage, workload, COALESCE(error, 'unknown') ORDER BY trial, stage, workload"
    ).fetchall()
    return [FailureGroup(r[0], r[1], r[2], r[3], r[4], r[5]) for r in rows]


@dataclass
class StageSeriesRecord:
    """What a queried source (Prometheus) returned for one stage of a trial: per-class rows, and its notes."""

    segment: int
    stage: int
    source: str
    rows: dict[str, list[TelemetryRow]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def read_stage_series(db: sqlite3.Connection, trial: int) -> list[StageSeriesRecord]:
    """Per (segment, stage, source) of ``trial``, in order, the stored rows and notes; [] without the tables."""
    found: dict[tuple[int, int, str], StageSeriesRecord] = {}

    def record(segment: int, stage: int, source: str) -> StageSeriesRecord:
        return found.setdefault((segment, stage, source), StageSeriesRecord(segment, stage, source))

    if has_table(db, "stage_series"):
        for row in db.execute("SELECT segment, stage, source, workload, t, device, metric, value, process "
                              "FROM stage_series WHERE trial=? ORDER BY rowid", (trial,)):
            rows = record(row["segment"], row["stage"], row["source"]).rows.setdefault(row["workload"], [])
            rows.append(TelemetryRow(row["t"], row["device"], row["metric"], row["value"], row["process"]))
    if has_table(db, "stage_series_notes"):
        for row in db.execute("SELECT segment, stage, source, note FROM stage_series_notes WHERE trial=? "
                              "ORDER BY rowid", (trial,)):
            record(row["segment"], row["stage"], row["source"]).notes.append(row["note"])
    return [found[key] for key in sorted(found)]


@dataclass(frozen=True)
class SampledFigures:
    """Mean and peak of one device-wide metric's telemetry rows (NVML's, on this host) over a window."""

    mean: float
    peak: float
    points: int


def telemetry_figures(db: sqlite3.Connection, start_s: float, end_s: float,
                      metrics: Sequence[str]) -> dict[tuple[str, str], SampledFigures]:
    """(device, metric) -> figures of the device-wide ``telemetry`` rows in ``[start_s, end_s]``; {} without it."""
    if not has_table(db, "telemetry") or not metrics:
        return {}
    marks = ",".join("?" * len(metrics))
    rows = db.execute(
        f"SELECT device, metric, AVG(value), MAX(value), COUNT(value) FROM telemetry WHERE t BETWEEN ? AND ? "
        f"AND process IS NULL AND metric IN ({marks}) GROUP BY device, metric", (start_s, end_s, *metrics))
    return {(device, metric): SampledFigures(mean, peak, n) for device, metric, mean, peak, n in rows if n}
