"""Store: results.sqlite's schema and version, and every typed read of it.

The recorder (recorder.py) writes the store; everything else reads it through this module: the
analysis (the trials, stages, samples, events and telemetry windows it summarises: ``CampaignReader``)
and the report (each trial's timeline: when the arm was applied and where each class was placed,
when each class became ready and warmed up, when each stage ran and how it ended, every request's
intended send time and latency, and the GPU telemetry of the trial window, plus the per-stage series a
queried source returned). A store of a version this code does not know is refused with one line.
What a resumed campaign superseded (``superseded_*`` tables: the rows of attempts cut short) is read
by nothing here: every reader sees the campaign as if one process had recorded it.

The report must stay fast on a campaign of a million samples, where building a Python tuple per row is
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
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt
from pydantic import TypeAdapter, ValidationError

from bench_plugin.results.placement import ClassPlacement
from bench_plugin.results.pod_events import PodEvent, in_order
from bench_plugin.results.record import CampaignRecord
from bench_plugin.results.samples import SAMPLE_FIELDS, Sample
from bench_plugin.results.server_rows import ServerPoint, ServerSource
from bench_plugin.results.summary import GeneratorUse, HostLoad, SearchResult, first_problem
from bench_plugin.results.telemetry_rows import TelemetryRow
from bench_plugin.results.timeline import (
    Disruption,
    Entry,
    SearchOutcome,
    SearchStep,
    ServerMetrics,
    Telemetry,
    TimelineError,
    parse,
)
from bench_plugin.results.words import TrialStatus
from bench_plugin.scenario import Arm, class_rank

E = TypeVar("E", bound=Entry)

FloatArray = npt.NDArray[np.float64]

_TABLES = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS trials (
    id INTEGER PRIMARY KEY, position INTEGER NOT NULL, arm TEXT NOT NULL, repeat INTEGER NOT NULL,
    arm_config TEXT NOT NULL, started_s REAL, ended_s REAL, status TEXT NOT NULL, reason TEXT
);
CREATE TABLE IF NOT EXISTS segments (
    trial INTEGER NOT NULL, segment INTEGER NOT NULL, classes TEXT NOT NULL, placement TEXT,
    applied_s REAL, ready TEXT, released_s REAL, warmup TEXT, protocol TEXT, PRIMARY KEY (trial, segment)
);
CREATE TABLE IF NOT EXISTS stages (
    trial INTEGER NOT NULL, segment INTEGER NOT NULL, stage INTEGER NOT NULL, name TEXT,
    offered TEXT NOT NULL, arrival TEXT NOT NULL, started_s REAL, ended_s REAL, duration_s REAL,
    status TEXT NOT NULL, reason TEXT, planned_s REAL, arrivals TEXT, generators TEXT, host TEXT,
    PRIMARY KEY (trial, segment, stage)
);
CREATE TABLE IF NOT EXISTS samples (
    workload TEXT, trial INTEGER, segment INTEGER, stage INTEGER, seq INTEGER, item INTEGER,
    intended_s REAL, sent_s REAL, end_s REAL, ok INTEGER, first_token_s REAL, error TEXT, detail TEXT,
    status INTEGER, input_tokens INTEGER, output_tokens INTEGER, inputs INTEGER, audio_s REAL, worker TEXT,
    slot_wait_s REAL, last_token_s REAL, chunk_gaps BLOB, chunks INTEGER, tokens_from TEXT, stream_end TEXT,
    reply_format TEXT, server_queue_s REAL, server_compute_s REAL
);
CREATE INDEX IF NOT EXISTS samples_by_stage ON samples (trial, segment, stage, workload);
CREATE TABLE IF NOT EXISTS telemetry (
    t REAL NOT NULL, device TEXT NOT NULL, metric TEXT NOT NULL, value REAL NOT NULL, process TEXT,
    trial INTEGER
);
CREATE INDEX IF NOT EXISTS telemetry_by_time ON telemetry (t);
CREATE TABLE IF NOT EXISTS events (
    t REAL NOT NULL, trial INTEGER, kind TEXT NOT NULL, detail TEXT
);
CREATE TABLE IF NOT EXISTS stage_series (
    trial INTEGER NOT NULL, segment INTEGER NOT NULL, stage INTEGER NOT NULL, source TEXT NOT NULL,
    workload TEXT NOT NULL, t REAL NOT NULL, device TEXT NOT NULL, metric TEXT NOT NULL, value REAL NOT NULL,
    process TEXT
);
CREATE INDEX IF NOT EXISTS stage_series_by_stage ON stage_series (trial, segment, stage);
CREATE TABLE IF NOT EXISTS stage_series_notes (
    trial INTEGER NOT NULL, segment INTEGER NOT NULL, stage INTEGER NOT NULL, source TEXT NOT NULL,
    note TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS server_series (
    trial INTEGER NOT NULL, segment INTEGER NOT NULL, stage INTEGER NOT NULL, t REAL NOT NULL,
    workload TEXT NOT NULL, quantity TEXT NOT NULL, value REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS server_series_by_class ON server_series (trial, workload, quantity, t);
CREATE TABLE IF NOT EXISTS pod_events (
    trial INTEGER, t REAL NOT NULL, kind TEXT NOT NULL, pod TEXT NOT NULL, uid TEXT NOT NULL, workload TEXT,
    node TEXT, reason TEXT, message TEXT, requests TEXT, count INTEGER NOT NULL DEFAULT 1
);
CREATE INDEX IF NOT EXISTS pod_events_by_trial ON pod_events (trial, t);
"""

SUPERSEDABLE: tuple[str, ...] = ("samples", "stages", "segments", "events", "telemetry", "stage_series",
                                 "stage_series_notes", "pod_events", "server_series")
"""Tables with rows of one segment's attempt. A resumed campaign re-runs a segment that did not end
(launch/resume.py) and moves the rows of its earlier attempt to ``superseded_<table>`` (the same columns and a
leading ``resume``, the number of the resume that superseded them): kept, never read by the analysis."""

SCHEMA = _TABLES + "".join(
    f"CREATE TABLE IF NOT EXISTS superseded_{name} AS SELECT 0 AS resume, * FROM {name} WHERE 0;\n"
    for name in SUPERSEDABLE)
"""Every table of this version's store."""

STORE_VERSION = 7
"""The store version this code writes (meta key ``store_version``). History:

- 1: stores written before the version was kept (no ``store_version``): stages without planned length,
  arrival counts, self-check or host load, samples without ``slot_wait_s``, segments without warm-up.
  Read as they are: the missing columns read as unknown.
- 2: no ``pod_events`` (what the cluster did to the workload pods). Read as they are: no trial has pod events.
- 3: no ``superseded_*`` tables (the earlier attempts of segments a resumed campaign re-ran). Read as
  they are: nothing was superseded.
- 4: samples without the stream's own record (``last_token_s``, ``chunk_gaps``, ``chunks``,
  ``tokens_from``, ``stream_end``), segments without ``protocol`` (what readiness found). Read as they
  are: no inter-token latencies, TPOT up to the stream's end, output lengths as the scenario asked.
- 5: embedding requests asked for JSON floats (there was no ``encoding_format`` key), and samples without
  ``reply_format``. Read with ``classes.embedding.encoding_format: float`` in the recorded scenario, which
  is what those campaigns sent; no sample says how its vectors came back.
- 6: no ``server_series`` (each class's server metrics through its stages: results/server_rows.py), samples
  without the server's own split of their time (``server_queue_s``, ``server_compute_s``). Read as they are:
  no server said anything. A resume upgrades such a store in place (:func:`upgrade_store`), so a campaign begun
  with the version before goes on.
- 7: this module's SCHEMA.
"""
KNOWN_VERSIONS: tuple[int, ...] = (1, 2, 3, 4, 5, 6, 7)
"""Store versions this code reads."""
UPGRADABLE: tuple[int, ...] = (6,)
"""Store versions a resume upgrades to STORE_VERSION in place (:func:`upgrade_store`)."""

_ADDED_SAMPLE_COLUMNS = ("server_queue_s REAL", "server_compute_s REAL")
"""The sample columns version 7 added."""


def upgrade_store(db: sqlite3.Connection) -> int:
    """Bring a store of an UPGRADABLE version to STORE_VERSION in one transaction: the columns and tables it
    lacks are added (every row already there reads as before). Returns the version it was."""
    was = store_version(db)
    if was == STORE_VERSION:
        return was
    if was not in UPGRADABLE:
        raise StoreError(f"store version {was} cannot be upgraded to {STORE_VERSION}")
    db.execute("BEGIN IMMEDIATE")
    try:
        for table in ("samples", "superseded_samples"):
            present = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
            for column in _ADDED_SAMPLE_COLUMNS:
                if present and column.split()[0] not in present:
                    db.execute(f"ALTER TABLE {table} ADD COLUMN {column}")
        for statement in SCHEMA.split(";"):
            if statement.strip():
                db.execute(statement)
        db.execute("UPDATE meta SET value=? WHERE key='store_version'", (json.dumps(STORE_VERSION),))
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    return was


class StoreError(Exception):
    """A results.sqlite this code cannot read (unknown version, not a results store); the message is one line."""


class StoreWriteError(StoreError):
    """A write to results.sqlite failed (a full disk, a file-size limit, an I/O error); the message is one line."""


def store_version(db: sqlite3.Connection, where: str = "results.sqlite") -> int:
    """The store's version (1 for stores that predate it); StoreError when it is not one this code reads."""
    if not has_table(db, "meta"):
        raise StoreError(f"{where}: not a results store (no meta table)")
    row = db.execute("SELECT value FROM meta WHERE key='store_version'").fetchone()
    if row is None:
        return 1
    try:
        version = json.loads(row[0])
    except json.JSONDecodeError:
        version = row[0]
    if version not in KNOWN_VERSIONS:
        known = ", ".join(str(v) for v in KNOWN_VERSIONS)
        raise StoreError(f"{where}: store version {version!r} is not one this bench-plugin reads ({known}): "
                         "read it with the bench-plugin that wrote it")
    return int(version)

MAX_POINTS = 5000
"""The most successful-request points one latency panel draws (all classes together)."""
MAX_TELEMETRY_POINTS = 2000
"""The most points one telemetry line draws."""


@dataclass(frozen=True)
class ClassWarmup:
    """What one class's unmeasured warm-up sent (run/warmup.py), as the segment's row keeps it."""

    started_s: float
    ended_s: float
    requests: int
    errors: int
    error: str | None = None
    """The first failure's message, if any failed."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (the segment's ``warmup`` column and the ``warmup_end`` event)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ClassWarmup:
        return cls(float(data["started_s"]), float(data["ended_s"]), int(data["requests"]), int(data["errors"]),
                   data.get("error"))


@dataclass
class SegmentRecord:
    """One segment of a trial: where its classes were placed, when the arm was applied and each class ready."""

    index: int
    classes: list[str]
    placement: dict[str, ClassPlacement]
    applied_s: float | None
    ready: dict[str, float]
    released_s: float | None
    warmup: dict[str, ClassWarmup] = field(default_factory=dict)
    """Class -> its unmeasured warm-up; empty before warm-ups existed."""
    protocol: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Class -> what its readiness probe resolved: ``output_lengths`` (llm: exact or model) and ``note``
    (what it found about the server); empty in stores before version 5."""


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
    arrival: dict[str, str] = field(default_factory=dict)
    duration_s: float | None = None
    """How long it ran (ended - started)."""
    planned_s: float | None = None
    """How long it was meant to send; None in version-1 stores."""
    arrivals: dict[str, int | None] = field(default_factory=dict)
    """Open-loop class -> its seeded arrival count; empty in version-1 stores."""
    generators: dict[str, GeneratorUse] = field(default_factory=dict)
    """Load generator -> its CPU use (and stalls) while it sent the stage; empty in version-1 stores."""
    host: HostLoad | None = None
    """The host's own load over the stage; None in version-1 stores."""


@dataclass
class TrialRecord:
    """One trial's rows: its arm and settings, status, segments and stages."""

    id: int
    position: int
    arm: str
    repeat: int
    arm_config: Arm
    """The arm's settings as planned (trials.arm_config)."""
    status: str
    reason: str | None
    started_s: float | None
    ended_s: float | None
    segments: list[SegmentRecord] = field(default_factory=list)
    stages: list[StageRecord] = field(default_factory=list)

    @property
    def settings(self) -> str:
        """The arm's settings as the store keeps them (JSON, keys sorted), for the report."""
        return json.dumps(self.arm_config.model_dump(mode="json", exclude_unset=True), sort_keys=True)


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
        store_version(db, str(path))
        yield db
    finally:
        db.close()


def read_record(db: sqlite3.Connection, where: str = "results.sqlite") -> CampaignRecord:
    """The campaign's record of itself (results/record.py) in the open store ``db``; StoreError naming ``where``
    and the fact whose value has the wrong form. A fact stored as JSON null reads as absent."""
    facts = {k: v for k, v in read_meta(db).items() if v is not None}
    if store_version(db, where) < 6:
        _embedding_asked_float(facts)
    try:
        return CampaignRecord.model_validate(facts)
    except ValidationError as exc:
        raise StoreError(f"{where}: meta.{first_problem(exc)}") from None


def _embedding_asked_float(facts: dict[str, Any]) -> None:
    """A store before version 6 recorded no ``encoding_format``: its embedding requests asked for floats
    (the key's default is base64 now, which those campaigns never sent)."""
    resolved = facts.get("scenario", {}).get("resolved") if isinstance(facts.get("scenario"), dict) else None
    embedding = resolved.get("classes", {}).get("embedding") if isinstance(resolved, dict) else None
    if isinstance(embedding, dict):
        embedding.setdefault("encoding_format", "float")


def has_table(db: sqlite3.Connection, name: str) -> bool:
    """Whether the store has a table called ``name`` (older stores lack newer tables)."""
    return db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (name,)).fetchone() is not None


def read_meta(db: sqlite3.Connection) -> dict[str, Any]:
    """The campaign-wide facts (meta table), JSON-decoded."""
    return {row["key"]: json.loads(row["value"]) for row in db.execute("SELECT key, value FROM meta")}


def _column(row: sqlite3.Row, name: str) -> Any:
    """``row[name]``, or None where the store predates that column (version 1)."""
    return row[name] if name in row.keys() else None  # noqa: SIM118 (a Row is not a dict)


def read_trials(db: sqlite3.Connection) -> list[TrialRecord]:
    """Every trial that started, in run order, with its segments and stages."""
    trials = []
    for row in db.execute("SELECT * FROM trials WHERE status != ? ORDER BY position", (TrialStatus.PLANNED,)):
        trial = TrialRecord(
            id=row["id"], position=row["position"], arm=row["arm"], repeat=row["repeat"],
            arm_config=_arm(row["id"], row["arm_config"]), status=row["status"], reason=row["reason"],
            started_s=row["started_s"], ended_s=row["ended_s"],
        )
        for seg in db.execute("SELECT * FROM segments WHERE trial=? ORDER BY segment", (trial.id,)):
            trial.segments.append(SegmentRecord(
                index=seg["segment"], classes=json.loads(seg["classes"]),
                placement=_placement(trial.id, seg["segment"], seg["placement"]), applied_s=seg["applied_s"],
                ready=json.loads(seg["ready"] or "{}"), released_s=seg["released_s"],
                warmup={name: ClassWarmup.from_dict(data)
                        for name, data in json.loads(_column(seg, "warmup") or "{}").items()},
                protocol=json.loads(_column(seg, "protocol") or "{}"),
            ))
        for st in db.execute("SELECT * FROM stages WHERE trial=? ORDER BY segment, stage", (trial.id,)):
            trial.stages.append(StageRecord(
                segment=st["segment"], index=st["stage"], name=st["name"], status=st["status"], reason=st["reason"],
                started_s=st["started_s"], ended_s=st["ended_s"], offered=json.loads(st["offered"]),
                arrival=json.loads(st["arrival"]), duration_s=st["duration_s"], planned_s=_column(st, "planned_s"),
                arrivals=json.loads(_column(st, "arrivals") or "{}"),
                **_self_check(trial.id, st["segment"], st["stage"], _column(st, "generators"), _column(st, "host")),
            ))
        trials.append(trial)
    return trials


def _arm(trial: int, text: str) -> Arm:
    """A trial's stored arm settings; StoreError naming the trial and the field that is not of its form."""
    try:
        return Arm.model_validate(json.loads(text))
    except ValidationError as exc:
        raise StoreError(f"trials (trial {trial}): arm_config.{first_problem(exc)}") from None


def _self_check(trial: int, segment: int, stage: int, generators: str | None, host: str | None) -> dict[str, Any]:
    """A stage's stored self-check (``generators``, ``host``); StoreError naming the stage and the field."""
    stored_host = json.loads(host or "null")
    try:
        return {"generators": TypeAdapter(dict[str, GeneratorUse]).validate_python(json.loads(generators or "{}")),
                "host": None if stored_host is None else HostLoad.model_validate(stored_host)}
    except ValidationError as exc:
        raise StoreError(f"stages (trial {trial}, segment {segment}, stage {stage}): {first_problem(exc)}") from None


def _placement(trial: int, segment: int, text: str | None) -> dict[str, ClassPlacement]:
    """A segment's stored placement; StoreError naming the segment and the field that is not of its form."""
    try:
        return TypeAdapter(dict[str, ClassPlacement]).validate_python(json.loads(text or "{}"))
    except ValidationError as exc:
        raise StoreError(f"segments (trial {trial}, segment {segment}): placement.{first_problem(exc)}") from None


def even_indices(n: int, k: int) -> npt.NDArray[np.intp]:
    """At most ``k`` indices spread evenly over ``range(n)`` (all of them when ``n <= k``)."""
    if n <= k:
        return np.arange(n)
    return np.unique(np.linspace(0, n - 1, k).round().astype(np.intp))


def count_requests(db: sqlite3.Connection) -> dict[tuple[int, str], RequestCounts]:
    """(trial, class) -> requests and successes, for the whole campaign in one query."""
    rows = db.execute("SELECT trial, workload, COUNT(*), SUM(ok) FROM samples GROUP BY trial, workload")
    return {(trial, name): RequestCounts(int(total), int(ok or 0)) for trial, name, total, ok in rows}


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
    for name in sorted(set(workload), key=lambda n: (class_rank(n), n)):
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


def read_samples(db: sqlite3.Connection, where: str = "", params: tuple[Any, ...] = ()) -> list[Sample]:
    """Samples from a results store, optionally filtered by an SQL condition.

    A store written before a field existed lacks its column; such a field keeps its default.
    """
    stored = {row[1] for row in db.execute("PRAGMA table_info(samples)")}
    names = [name for name in SAMPLE_FIELDS if name in stored]
    sql = f"SELECT {','.join(names)} FROM samples {('WHERE ' + where) if where else ''}"
    out = []
    for row in db.execute(sql, params):
        data = dict(zip(names, row, strict=True))
        data["ok"] = bool(data["ok"])
        out.append(Sample(**data))
    return out


def _read_events(db: sqlite3.Connection, trial: int, kind: str) -> list[dict[str, Any]]:
    """The details of ``trial``'s timeline events of ``kind``, in time order."""
    return [json.loads(detail) for (detail,) in
            db.execute("SELECT detail FROM events WHERE trial=? AND kind=? ORDER BY t", (trial, kind))]


def read_pod_events(db: sqlite3.Connection, trial: int) -> list[PodEvent]:
    """What the cluster did to ``trial``'s workload pods, in time order; [] for a store without them (v1, v2)."""
    if not has_table(db, "pod_events"):
        return []
    rows = db.execute("SELECT t, kind, pod, uid, workload, node, reason, message, requests, count FROM pod_events "
                      "WHERE trial=?", (trial,))
    return in_order([PodEvent(t=t, kind=kind, pod=pod, uid=uid, workload=workload, node=node, reason=reason,
                              message=message, requests=json.loads(requests or "{}"), count=count)
                     for t, kind, pod, uid, workload, node, reason, message, requests, count in rows])


def telemetry_rows(db: sqlite3.Connection, trial: int, start_s: float, end_s: float,
                   metrics: Sequence[str]) -> list[TelemetryRow]:
    """``trial``'s telemetry rows of ``metrics`` in ``[start_s, end_s]``; [] without the table."""
    if not has_table(db, "telemetry") or not metrics:
        return []
    marks = ",".join("?" * len(metrics))
    rows = db.execute(f"SELECT t, device, metric, value, process FROM telemetry WHERE trial=? AND t BETWEEN ? AND ? "
                      f"AND metric IN ({marks})", (trial, start_s, end_s, *metrics))
    return [TelemetryRow(*row) for row in rows]


class CampaignReader:
    """Everything the analysis reads of one open store, typed: the campaign's facts, trials and their records."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def record(self) -> CampaignRecord:
        """The campaign's record of itself (results/record.py)."""
        return read_record(self.db)

    def trials(self) -> list[TrialRecord]:
        """Every trial that started, in run order, with its segments and stages."""
        return read_trials(self.db)

    def samples(self, trial: int) -> list[Sample]:
        """Every sample of ``trial``."""
        return read_samples(self.db, "trial=?", (trial,))

    def entries(self, trial: int, model: type[E]) -> list[E]:
        """``trial``'s timeline entries of one kind (``model``), in time order; StoreError naming the trial, the
        kind and the field where one is not of its kind."""
        out: list[E] = []
        for detail in _read_events(self.db, trial, model.kind):
            try:
                entry = parse(model.kind, detail)
            except TimelineError as exc:
                raise StoreError(f"trial {trial}: {exc}") from None
            assert isinstance(entry, model)
            out.append(entry)
        return out

    def superseded_stages(self, trial: int) -> list[tuple[float | None, float | None]]:
        """(started, ended) of each stage of ``trial`` that a resume superseded (run again after a cut), in the order
        superseded; [] in a store never resumed."""
        if not has_table(self.db, "superseded_stages"):
            return []
        return [(row[0], row[1]) for row in self.db.execute(
            "SELECT started_s, ended_s FROM superseded_stages WHERE trial=? ORDER BY rowid", (trial,))]

    def search_steps(self, trial: int) -> list[SearchStep]:
        """Adaptive campaigns: each probe of ``trial``'s searches as decided, in run order."""
        return list(self.entries(trial, SearchStep))

    def search_results(self, trial: int) -> list[SearchResult]:
        """Adaptive campaigns: each segment's search result, in run order."""
        return list(self.entries(trial, SearchOutcome))

    def disruptions(self, trial: int) -> list[Disruption]:
        """``trial``'s disruption steps (kubernetes backend), in time order."""
        return self.entries(trial, Disruption)

    def gpu_processes(self, trial: int) -> dict[int, dict[str, str]]:
        """Segment -> GPU process (pid as text) -> class, as the telemetry sampler attributed them."""
        return {entry.segment: dict(entry.processes) for entry in self.entries(trial, Telemetry)}

    def pod_events(self, trial: int) -> list[PodEvent]:
        """What the cluster did to ``trial``'s workload pods, in time order ([] where nothing was watched)."""
        return read_pod_events(self.db, trial)

    def telemetry(self, trial: int, start_s: float, end_s: float, metrics: Sequence[str]) -> list[TelemetryRow]:
        """``trial``'s telemetry rows of ``metrics`` in a window."""
        return telemetry_rows(self.db, trial, start_s, end_s, metrics)

    def events(self, kind: str | None = None, trial: int | None = None) -> list[EventRecord]:
        """The campaign's timeline events in time order: every one, or only those of ``kind`` and of ``trial``."""
        conditions = [(column, value) for column, value in (("kind", kind), ("trial", trial)) if value is not None]
        where = f"WHERE {' AND '.join(f'{column}=?' for column, _ in conditions)} " if conditions else ""
        rows = self.db.execute(f"SELECT t, trial, kind, detail FROM events {where}ORDER BY t, rowid",
                               [value for _, value in conditions])
        return [EventRecord(t, trial_id, name, json.loads(detail) if detail else {})
                for t, trial_id, name, detail in rows]

    def server_points(self, trial: int) -> list[ServerPoint]:
        """Every class's server metrics read during ``trial`` (results/server_rows.py); [] for a store without them."""
        if not has_table(self.db, "server_series"):
            return []
        return [ServerPoint(t, workload, quantity, value) for t, workload, quantity, value in self.db.execute(
            "SELECT t, workload, quantity, value FROM server_series WHERE trial=?", (trial,))]

    def server_sources(self, trial: int) -> dict[int, dict[str, ServerSource]]:
        """Segment -> class -> where its server metrics came from (the ``server_metrics`` timeline entries: one for the
        classes read directly, one for those read through Prometheus)."""
        out: dict[int, dict[str, ServerSource]] = {}
        for entry in self.entries(trial, ServerMetrics):
            out.setdefault(entry.segment, {}).update({source.workload: source for source in entry.sources})
        return out

    def stage_series(self, trial: int) -> list[StageSeriesRecord]:
        """Per (segment, stage, source) of ``trial``, in order, what a queried source (Prometheus) returned and its
        notes; [] for a store without them."""
        return read_stage_series(self.db, trial)

    def telemetry_series(self, start_s: float, end_s: float, metrics: Sequence[str],
                         max_points: int = MAX_TELEMETRY_POINTS) -> list[TelemetrySeries]:
        """Every series of ``metrics`` in ``[start_s, end_s]``, whichever trial recorded it: one per (metric, device,
        process), thinned evenly to ``max_points``; [] without the table."""
        return read_telemetry(self.db, start_s, end_s, metrics, max_points)


@dataclass(frozen=True)
class EventRecord:
    """One row of the campaign's timeline (the ``events`` table): when, in which trial, what kind, its detail."""

    t: float
    trial: int | None
    """None for an event of the campaign rather than of one trial."""
    kind: str
    detail: dict[str, Any]


@contextmanager
def open_campaign(path: Path) -> Iterator[CampaignReader]:
    """A reader of the store at ``path`` (read-only, version checked)."""
    with open_store(path) as db:
        yield CampaignReader(db)
