"""Recorder: the results store of one campaign (results.sqlite).

Everything a report needs lives here: the campaign's conditions, each trial and its arm, where each
class ran, when it became ready, every stage and every request's sample, plus a timeline of events.
GPU telemetry (table ``telemetry``, DCGM metric names) is written at each stage end too, and so are the
per-class series a queried source (Prometheus) returned for the stage (``stage_series``, with its
one-line notes in ``stage_series_notes``), and, where a cluster ran the workload, what it did to the
workload pods (``pod_events``, as the Kubernetes backend's pod watch reports them, at the cluster's times).
Samples are buffered and committed at each stage boundary, so a crash or Ctrl-C loses at most the
stage in flight; that stage is then marked ``interrupted``.

Every other write commits at once (autocommit) into the write-ahead log, which survives a killed
process (SIGKILL) and is read back by the next connection. Each write runs in the store's writer
(bench_plugin/results/offloop.py: one OS thread under gevent, so the sending loop turns while the disk works)
and returns once it is done. At each segment's end the log is folded into results.sqlite (a
checkpoint), so the file alone holds every segment that ended: what a resumed campaign keeps
(launch/resume.py), should only results.sqlite be carried to another machine. One process
writes a campaign at a time: the recorder holds an exclusive lock on the file while it is open.
A resumed campaign moves the rows of a segment's unfinished attempt aside (``supersede_segment``).

A full disk (ENOSPC) or a file-size limit (EFBIG) must not cost what was committed. The recorder keeps a
reserve beside the store (``results.sqlite.reserve``, RESERVE_BYTES, allocated when it opens: a disk
without that much room refuses the campaign before it starts). The first write that fails frees it and
raises StoreWriteError, naming the file and the error; the conductor stops the campaign there, and the
room freed is what folding the log into results.sqlite and writing the summaries then take.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import sqlite3
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from bench_plugin.results.offloop import OffLoop
from bench_plugin.results.placement import Placement
from bench_plugin.results.pod_events import PodEvent
from bench_plugin.results.record import CampaignRecord
from bench_plugin.results.samples import SAMPLE_FIELDS, Sample
from bench_plugin.results.server_rows import ServerPoint
from bench_plugin.results.store import (
    SCHEMA,
    STORE_VERSION,
    SUPERSEDABLE,
    UPGRADABLE,
    ClassWarmup,
    StoreError,
    StoreWriteError,
    store_version,
    upgrade_store,
)
from bench_plugin.results.summary import GeneratorUse, HostLoad
from bench_plugin.results.telemetry_rows import TelemetryRow
from bench_plugin.results.timeline import Entry
from bench_plugin.results.words import StageStatus, TrialStatus
from bench_plugin.scenario import Arm

logger = logging.getLogger(__name__)

RESERVE_BYTES = 16 << 20
"""Room kept beside the store for ending a campaign cleanly on a full disk (a store of a few thousand samples
per stage grows by well under 1 MiB a stage; the summaries and the report of a large campaign, a few MiB)."""


class Recorder:
    """Writes one campaign's results; every method commits unless it says it buffers."""

    def __init__(self, path: Path, *, upgrade: bool = False) -> None:
        """Open (or create) the store at ``path``; an existing store of an older version is refused, or with
        ``upgrade`` (a resume) brought to this version where it can be (store.upgrade_store)."""
        self.path = path
        self.failure: str | None = None
        """The first write that failed, in one line (StoreWriteError's message); None while every write succeeds."""
        self._reserve: Path | None = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            existed = path.is_file() and path.stat().st_size > 0
            self._lock = _StoreLock(path)
        except OSError as exc:
            raise StoreError(f"{path}: cannot write the results store ({exc.strerror or exc})") from None
        try:
            self._reserve = path.with_name(path.name + ".reserve")  # taken only once the store is this process's
            _reserve(self._reserve, RESERVE_BYTES)
            self._db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
            if existed and (version := store_version(self._db, str(path))) != STORE_VERSION:
                if not upgrade or version not in UPGRADABLE:
                    self._db.close()
                    raise StoreError(f"{path}: a store of an older version: write new results into a new directory")
                upgrade_store(self._db)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.executescript(SCHEMA)
            self._db.execute("INSERT OR IGNORE INTO meta VALUES ('store_version', ?)", (json.dumps(STORE_VERSION),))
        except (sqlite3.Error, OSError, StoreError) as exc:
            self._lock.close()
            self._free_reserve()
            if isinstance(exc, StoreError):
                raise
            raise StoreError(f"{path}: cannot write the results store ({exc})") from None
        self._pending: list[Sample] = []
        self._writer = OffLoop()
        """Where every write runs (bench_plugin/results/offloop.py): off the event loop under gevent."""

    def _execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        """Run one statement (autocommit) in the store's writer (``_writer``)."""
        self._write(self._db.execute, sql, params)

    def _transaction(self, *statements: tuple[str, Sequence[Sequence[Any]]]) -> list[int]:
        """Run each (statement, rows of parameters) in one transaction in the store's writer; rows changed by each."""
        result: list[int] = self._write(self._in_transaction, statements)
        return result

    def _write(self, call: Any, *args: Any) -> Any:
        """``call(*args)`` in the writer; a failure of the disk or the database is StoreWriteError (and the first
        one frees the reserve: see the module docstring)."""
        try:
            return self._writer.run(call, *args)
        except (sqlite3.Error, OSError) as exc:
            message = f"writing {self.path} failed: {exc}"
            if self.failure is None:
                self.failure = message
                self._free_reserve()
                logger.error("%s; the campaign stops here (what was committed is kept)", message)
            raise StoreWriteError(message) from None

    def _free_reserve(self) -> None:
        if self._reserve is not None:
            self._reserve.unlink(missing_ok=True)
            self._reserve = None

    def _fetch_one(self, sql: str, params: Sequence[Any]) -> Any:
        return self._db.execute(sql, params).fetchone()

    def _in_transaction(self, statements: tuple[tuple[str, Sequence[Sequence[Any]]], ...]) -> list[int]:
        try:
            with self._db:
                self._db.execute("BEGIN")
                return [self._db.executemany(sql, rows).rowcount for sql, rows in statements]
        except BaseException:
            if self._db.in_transaction:  # its COMMIT failed (a full disk): ``with`` leaves it open
                self._db.rollback()
            raise

    def close(self) -> None:
        """Commit what is buffered and close the file, leaving one self-contained results.sqlite."""
        try:
            self.commit()
            try:  # folds the write-ahead log back into the file
                # first a checkpoint that empties the log: it holds even where the mode cannot change (a full disk
                # once left the file locked for that), so the file alone has everything committed
                self._writer.run(self._fetch_one, "PRAGMA wal_checkpoint(TRUNCATE)", ())
                self._writer.run(self._db.execute, "PRAGMA journal_mode=DELETE", ())
            except (sqlite3.Error, OSError) as exc:  # another process has the file open (or no room): -wal stays
                logger.warning("results.sqlite kept its write-ahead log (%s): keep results.sqlite-wal beside it", exc)
        finally:
            self._writer.close()
            self._db.close()
            self._lock.close()
            self._free_reserve()

    def checkpoint(self) -> None:
        """Fold the write-ahead log into results.sqlite, so the file alone holds everything committed.

        PASSIVE: it never waits (a wait would stall every greenlet of the process, the workers' heartbeats
        too); frames a reader still needs (the web UI's report, say) are left for the next checkpoint.
        """
        _, log, done = self._write(self._fetch_one, "PRAGMA wal_checkpoint(PASSIVE)", ())
        if done < log:
            logger.info("results.sqlite: %d of %d log frames folded in; a reader holds the rest", done, log)

    def record(self, facts: CampaignRecord) -> None:
        """Store the campaign-wide facts that ``facts`` sets (results/record.py), each under its own name."""
        for key, value in facts.model_dump(mode="json", include=facts.model_fields_set).items():
            self.set_meta(key, value)

    def reopen(self) -> None:
        """A resumed campaign runs again: how it ended is forgotten until it ends again."""
        self._execute("DELETE FROM meta WHERE key='status'")

    def set_meta(self, key: str, value: Any) -> None:
        """Store one campaign-wide fact (JSON-encoded); the campaign itself records them through ``record``."""
        self._execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, json.dumps(value, sort_keys=True)))

    def add_trial(self, trial_id: int, position: int, arm: Arm, repeat: int) -> None:
        """Register a planned trial of ``arm`` (status ``planned``); its settings are kept as they were planned."""
        self._execute(
            "INSERT OR REPLACE INTO trials (id, position, arm, repeat, arm_config, status) VALUES (?,?,?,?,?,?)",
            (trial_id, position, arm.name, repeat, json.dumps(arm.model_dump(mode="json"), sort_keys=True),
             TrialStatus.PLANNED),
        )

    def trial_started(self, trial_id: int) -> None:
        """Mark a trial as running (resumed with a kept segment: from its first start)."""
        # A resumed trial with a kept segment keeps the start of its first attempt: that segment ran from then
        # on. Without one (every row of the earlier attempt superseded), it starts now.
        now = time.time()
        self._execute("UPDATE trials SET started_s=CASE WHEN EXISTS (SELECT 1 FROM segments WHERE trial=?) "
                      "THEN COALESCE(started_s, ?) ELSE ? END, status=? WHERE id=?",
                      (trial_id, now, now, TrialStatus.RUNNING, trial_id))

    def trial_ended(self, trial_id: int, status: str, reason: str | None = None) -> None:
        """Close a trial: ``completed``, ``failed``, ``interrupted``."""
        self.commit()
        self._execute(
            "UPDATE trials SET ended_s=?, status=?, reason=? WHERE id=?", (time.time(), status, reason, trial_id)
        )

    def segment_applied(self, trial: int, segment: int, classes: list[str], placement: Placement) -> None:
        """Record where a segment's classes run once the backend applied the arm."""
        self._execute(
            "INSERT OR REPLACE INTO segments (trial, segment, classes, placement, applied_s) VALUES (?,?,?,?,?)",
            (trial, segment, json.dumps(classes), json.dumps(placement.to_json(), sort_keys=True), time.time()),
        )

    def segment_ready(self, trial: int, segment: int, ready: dict[str, float]) -> None:
        """Record when each class first answered a real request."""
        self._execute("UPDATE segments SET ready=? WHERE trial=? AND segment=?", (json.dumps(ready), trial, segment))

    def segment_protocol(self, trial: int, segment: int, protocol: Mapping[str, Mapping[str, Any]]) -> None:
        """Record what each class's readiness probe resolved (llm output lengths) and found about the server."""
        self._execute("UPDATE segments SET protocol=? WHERE trial=? AND segment=?",
                      (json.dumps(protocol, sort_keys=True), trial, segment))

    def segment_warmed(self, trial: int, segment: int, warmup: Mapping[str, ClassWarmup]) -> None:
        """Record each class's unmeasured warm-up (when it ran, its requests and failures)."""
        self._execute("UPDATE segments SET warmup=? WHERE trial=? AND segment=?",
                      (json.dumps({name: w.to_dict() for name, w in warmup.items()}, sort_keys=True), trial,
                       segment))

    def segment_released(self, trial: int, segment: int) -> None:
        """Record when the segment's servers were stopped: the segment ended; fold it into the file."""
        self.commit()
        self._execute("UPDATE segments SET released_s=? WHERE trial=? AND segment=?", (time.time(), trial, segment))
        self.checkpoint()

    def supersede_segment(self, trial: int, segment: int, resume: int, *, keep_stages: Sequence[int] = (),
                          keep_rays: Sequence[str] = ()) -> dict[str, int]:
        """Move every row of a segment's unfinished attempt to the ``superseded_*`` tables, in one transaction.

        Rows of the segment (samples, stages, its own row, its timeline events, stage series) and the
        trial's telemetry and pod events from the segment's start on (all of them for segment 0: nothing
        of the trial before it is kept) move, tagged with ``resume``. A search segment's rays that ended
        stay: their stages (``keep_stages``: rows, samples, series, the events of those stages), their
        probes and results (``keep_rays``) and the telemetry and pod events within those stages' times.
        Returns table -> rows moved.
        """
        self.commit()
        row = self._writer.run(self._fetch_one, "SELECT applied_s FROM segments WHERE trial=? AND segment=?",
                               (trial, segment))
        since = row[0] if row is not None and segment > 0 else None
        stages = sorted(set(keep_stages))
        windows: list[tuple[float, float]] = []
        for stage in stages:
            found = self._writer.run(self._fetch_one, "SELECT started_s, ended_s FROM stages WHERE trial=? AND "
                                     "segment=? AND stage=?", (trial, segment, stage))
            if found is not None and found[0] is not None and found[1] is not None:
                windows.append((found[0], found[1]))
        marks = ",".join("?" * len(stages))
        not_kept = f" AND stage NOT IN ({marks})" if stages else ""
        own = (f"trial=? AND segment=?{not_kept}", (trial, segment, *stages))
        outside = "".join(" AND NOT (t BETWEEN ? AND ?)" for _ in windows)
        spans = tuple(v for window in windows for v in window)
        later = ((f"trial=?{outside}", (trial, *spans)) if since is None
                 else (f"trial=? AND t>=?{outside}", (trial, since, *spans)))
        rays = ",".join("?" * len(keep_rays))
        kept_events = ""
        if stages:
            kept_events += f" AND coalesce(json_extract(detail, '$.stage'), -1) NOT IN ({marks})"
        if keep_rays:
            kept_events += (f" AND NOT (kind IN ('search_step', 'search_result') AND "
                            f"coalesce(json_extract(detail, '$.ray'), 'mix') IN ({rays}))")
        where: dict[str, tuple[str, tuple[Any, ...]]] = {
            "segments": ("trial=? AND segment=?", (trial, segment)),
            "events": (f"trial=? AND json_extract(detail, '$.segment')=?{kept_events}",
                       (trial, segment, *(stages if stages else ()), *keep_rays)),
            "telemetry": later, "pod_events": later,
        }
        statements: list[tuple[str, Sequence[Sequence[Any]]]] = []
        for table in SUPERSEDABLE:
            condition, params = where.get(table, own)
            statements += [(f"INSERT INTO superseded_{table} SELECT ?, * FROM {table} WHERE {condition}",
                            [(resume, *params)]),
                           (f"DELETE FROM {table} WHERE {condition}", [params])]
        changed = self._transaction(*statements)
        return dict(zip(SUPERSEDABLE, changed[::2], strict=True))

    def stage_started(
        self, trial: int, segment: int, stage: int, name: str | None, offered: dict[str, float],
        arrival: dict[str, str], started_s: float, planned_s: float | None = None,
        arrivals: Mapping[str, int | None] | None = None,
    ) -> None:
        """Open a stage row (status ``running``): its nominal load, planned length and open-loop arrival counts."""
        self._execute(
            "INSERT OR REPLACE INTO stages (trial, segment, stage, name, offered, arrival, started_s, status, "
            "planned_s, arrivals) VALUES (?,?,?,?,?,?,?,?,?,?)",
            (trial, segment, stage, name, json.dumps(offered), json.dumps(arrival), started_s, StageStatus.RUNNING,
             planned_s, json.dumps(dict(arrivals)) if arrivals is not None else None),
        )

    def stage_checked(self, trial: int, segment: int, stage: int, generators: Mapping[str, GeneratorUse],
                      host: HostLoad | None) -> None:
        """Store a stage's self-check: each load generator's CPU use while sending, and the host's own load."""
        used = {member: use.model_dump(mode="json", exclude_unset=True) for member, use in generators.items()}
        self._execute(
            "UPDATE stages SET generators=?, host=? WHERE trial=? AND segment=? AND stage=?",
            (json.dumps(used, sort_keys=True), json.dumps(host.model_dump()) if host is not None else None,
             trial, segment, stage),
        )

    def stage_ended(
        self, trial: int, segment: int, stage: int, ended_s: float, status: str, reason: str | None = None
    ) -> None:
        """Close a stage and commit every sample buffered so far (a stage whose samples could not be written
        is closed as ``interrupted``, saying why)."""
        try:
            self.commit()
        except StoreWriteError as exc:
            status, reason = StageStatus.INTERRUPTED, f"its samples could not be written: {exc}"
            raise
        finally:
            self._close_stage(trial, segment, stage, ended_s, status, reason)

    def _close_stage(self, trial: int, segment: int, stage: int, ended_s: float, status: str,
                     reason: str | None) -> None:
        self._execute(
            "UPDATE stages SET ended_s=?, duration_s=? - started_s, status=?, reason=? "
            "WHERE trial=? AND segment=? AND stage=?",
            (ended_s, ended_s, status, reason, trial, segment, stage),
        )

    def stage_cut(self, trial: int, segment: int, stage: int, reason: str) -> None:
        """Mark a stage that ended (completed or rolled back) as ``interrupted``: the run was stopped while some
        of its requests were still in flight, so its slowest answers are missing (each is a ``cancelled``
        sample) and its figures would judge the load by the rest."""
        self._execute("UPDATE stages SET status=?, reason=? WHERE trial=? AND segment=? AND stage=? "
                      "AND status IN (?, ?)", (StageStatus.INTERRUPTED, reason, trial, segment, stage,
                                               StageStatus.COMPLETED, StageStatus.ABORTED))

    def stage_invalid(self, trial: int, segment: int, stage: int, reason: str) -> None:
        """Mark a stage whose load was not the stated one (its accounting failed; loadgen/ledger.py)."""
        self._execute("UPDATE stages SET status=?, reason=? WHERE trial=? AND segment=? AND stage=?",
                      (StageStatus.INVALID, reason, trial, segment, stage))

    def stage_skipped(
        self, trial: int, segment: int, stage: int, name: str | None, offered: dict[str, float],
        arrival: dict[str, str], reason: str,
    ) -> None:
        """Record a stage that did not run (a lower stage was rolled back)."""
        self._execute(
            "INSERT OR REPLACE INTO stages (trial, segment, stage, name, offered, arrival, status, reason) "
            "VALUES (?,?,?,?,?,?,?,?)",
            (trial, segment, stage, name, json.dumps(offered), json.dumps(arrival), StageStatus.SKIPPED, reason),
        )

    def note(self, entry: Entry, trial: int | None = None) -> None:
        """Add one entry to the timeline (a declared kind: results/timeline.py), of ``trial`` or of the campaign."""
        self._execute("INSERT INTO events VALUES (?,?,?,?)",
                      (time.time(), trial, entry.kind, json.dumps(entry.detail(), sort_keys=True)))

    def pod_event(self, trial: int, event: PodEvent) -> None:
        """Add one thing the cluster did to a workload pod of ``trial``, at the cluster's time of it (``event.t``)."""
        self._execute(
            "INSERT INTO pod_events (trial, t, kind, pod, uid, workload, node, reason, message, requests, count) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            (trial, event.t, event.kind, event.pod, event.uid, event.workload, event.node, event.reason,
             event.message, json.dumps(dict(event.requests), sort_keys=True), event.count))

    def add_telemetry(self, trial: int, rows: list[TelemetryRow]) -> None:
        """Write GPU telemetry rows (called at each stage end with what was sampled since the last)."""
        if not rows:
            return
        self._transaction(("INSERT INTO telemetry VALUES (?,?,?,?,?,?)", [(*row.as_tuple(), trial) for row in rows]))

    def add_stage_series(self, trial: int, segment: int, stage: int, source: str,
                         rows: Mapping[str, Iterable[TelemetryRow]], notes: Iterable[str]) -> None:
        """Write one stage's per-class GPU series from a queried source (``prometheus``) and its notes.

        ``rows`` is class -> rows (StageSeries.rows), ``notes`` one line each (StageSeries.notes); both
        go in one transaction, to ``stage_series`` and ``stage_series_notes``.
        """
        points = [(trial, segment, stage, source, workload, *row.as_tuple())
                  for workload, class_rows in rows.items() for row in class_rows]
        lines = [(trial, segment, stage, source, note) for note in notes]
        if not points and not lines:
            return
        self._transaction(("INSERT INTO stage_series (trial, segment, stage, source, workload, t, device, metric, "
                           "value, process) VALUES (?,?,?,?,?,?,?,?,?,?)", points),
                          ("INSERT INTO stage_series_notes VALUES (?,?,?,?,?)", lines))

    def add_server_points(self, trial: int, segment: int, stage: int, points: Iterable[ServerPoint]) -> None:
        """Write each class's server metrics read during a stage (results/server_rows.py)."""
        rows = [(trial, segment, stage, *p.as_tuple()) for p in points]
        if rows:
            self._transaction(("INSERT INTO server_series (trial, segment, stage, t, workload, quantity, value) "
                               "VALUES (?,?,?,?,?,?,?)", rows))

    def add_samples(self, samples: list[Sample]) -> None:
        """Buffer samples; they reach the file at the next commit (each stage end)."""
        self._pending.extend(samples)

    def commit(self) -> None:
        """Write buffered samples in one transaction; should it fail, they stay buffered."""
        if not self._pending:
            return
        # taken from the buffer before the write: samples added while the writer works wait for the next commit
        batch, self._pending = self._pending, []
        rows = [tuple(getattr(s, f) for f in SAMPLE_FIELDS) for s in batch]
        marks = ",".join("?" * len(SAMPLE_FIELDS))
        try:
            self._transaction((f"INSERT INTO samples ({','.join(SAMPLE_FIELDS)}) VALUES ({marks})", rows))
        except BaseException:
            self._pending[:0] = batch
            raise


def _reserve(path: Path, size: int) -> None:
    """Allocate ``size`` bytes at ``path`` (blocks of the disk, not a sparse file); StoreError when the disk has
    no room for them."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            os.posix_fallocate(fd, 0, size)
        finally:
            os.close(fd)
    except OSError as exc:
        path.unlink(missing_ok=True)
        raise StoreError(f"{path.parent}: cannot keep {size >> 20} MiB free for the results ({exc.strerror}): "
                         f"free some space, or write them elsewhere (--results-dir)") from None


class _StoreLock:
    """An exclusive lock on results.sqlite (flock, apart from SQLite's own locks) while a recorder has it open."""

    def __init__(self, path: Path) -> None:
        self._file = open(path, "ab")  # noqa: SIM115 (held for the recorder's life)
        try:
            fcntl.flock(self._file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._file.close()
            raise StoreError(f"{path}: another process is writing this campaign (one process at a time)") from None
        except OSError as exc:  # a file system without flock: the run goes on unguarded
            logger.warning("%s: cannot lock it (%s); make sure no other process writes this campaign", path, exc)

    def close(self) -> None:
        """Release the lock."""
        self._file.close()
