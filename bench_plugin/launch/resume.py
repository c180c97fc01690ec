"""Resume: continue an interrupted campaign in its own results directory (``--resume DIR``).

The unit of resumption is the **segment**: one application of an arm (its servers started once,
ready, warmed up) and its stages in order, until its servers are released. A segment whose release
was recorded is kept whole: every one of its samples was drained, committed and accounted for. A
segment that did not get there (Ctrl-C, a kill, a failure, an invalid stage) is run again **from its
start**, on fresh servers with a fresh warm-up: its stage k then follows the same history (warm-up,
stages 0..k-1 on the same servers) as stage k of every other trial. Running only its missing stages
would measure them after a warm-up instead of after the lower stages, and would leave the last
completed stage without the stragglers that arrive after its end (they are committed with the next
stage). An adaptive search segment (``search:``) runs again too, but keeps every probe its earlier
attempt decided, with its stages: each probe is drained and decided on its own samples, so it needs
no history but ready, warmed servers, and a search's next probe follows only from the decisions before
it. The kept decisions are replayed into the searches, which go on from there on the fresh servers
(the probe that was cut short runs again), their new stages numbered after the kept ones. A trial is
done when its end was recorded as completed; one that was not runs its remaining segments.

The earlier attempt of a segment that runs again is not deleted: its rows (samples, stages, its
segment row, its timeline events, telemetry and stage series) move to the store's ``superseded_*``
tables (recorder.supersede_segment), which no analysis reads. The ``resumed`` event on the timeline
and the meta key ``resumes`` (the summary's ``status.resumed``) say when, from what state, what was
kept and what runs again, and how many rows were superseded.

A resume is refused, in one line naming what differs, when the directory is not a campaign's, when
its campaign completed, or when the experiment would not be the same: the scenario (its sha256 after
the overrides, which default to the recorded ones), the workload classes, a request set's sha256,
the backend, a device (model, memory, CPU cores; a cluster's GPU nodes), the driver (the cluster's
Kubernetes version), Python, a package version or the bench_plugin source. A device that is another
unit of the same model (another UUID) is a warning.
"""

from __future__ import annotations

import datetime as dt
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench_plugin.analysis.probe import limited_why
from bench_plugin.results.facts import BackendFacts
from bench_plugin.results.record import CampaignRecord
from bench_plugin.results.recorder import Recorder
from bench_plugin.results.store import (
    STORE_VERSION,
    UPGRADABLE,
    CampaignReader,
    StoreError,
    TrialRecord,
    open_store,
    read_record,
    read_trials,
    store_version,
)
from bench_plugin.results.summary import Ending, Overrides, Provenance, Resume, SearchResult
from bench_plugin.results.timeline import Resumed
from bench_plugin.results.words import CampaignState, ProbeOutcome, StageStatus, TrialStatus
from bench_plugin.run.schedule import Done, KeptProbe, Trial

STORE = "results.sqlite"

OVERRIDES = ("arm", "repeats", "stage_duration")
"""The command-line overrides a campaign records; a resume takes them from the record unless given."""

UNFINISHED_STAGES = (StageStatus.RUNNING, StageStatus.INTERRUPTED, StageStatus.INVALID)
"""Stage statuses of a segment that did not run to its end."""


class ResumeRefused(Exception):
    """This directory's campaign cannot be resumed here; the message is one line, ``--resume DIR: why``."""


@dataclass(frozen=True)
class Recorded:
    """What a results directory says about its campaign: the store's facts and its trials as recorded."""

    directory: Path
    given: str
    """DIR as given on the command line (messages name it so)."""
    record: CampaignRecord
    """What the campaign recorded about itself (results/record.py)."""
    trials: list[TrialRecord]
    probes: dict[tuple[int, int], tuple[KeptProbe, ...]] = field(default_factory=dict)
    """(trial, segment) -> the search probes decided in it, in order (from the timeline)."""
    ended_rays: dict[tuple[int, int], frozenset[str]] = field(default_factory=dict)
    """(trial, segment) -> its rays whose search ended (their result recorded)."""
    searched: tuple[tuple[int, int, SearchResult], ...] = ()
    """Every ended search, ``(trial, segment, result)``, in the order recorded (run/schedule.Done.searched)."""

    def refused(self, why: str) -> ResumeRefused:
        """A refusal naming this directory."""
        return ResumeRefused(f"--resume {self.given}: {why}")

    @property
    def status(self) -> Ending | None:
        """How the last process left the campaign (None: it was killed before it could say)."""
        return self.record.status

    @property
    def resumes(self) -> list[Resume]:
        """The resumes recorded so far, oldest first."""
        return list(self.record.resumes)


def read_campaign(given: str) -> Recorded:
    """The campaign recorded in directory ``given``; ResumeRefused when it is not one or has nothing left."""
    directory = Path(given)
    where = f"--resume {given}"
    if not directory.exists():
        raise ResumeRefused(f"{where}: no such directory")
    if not directory.is_dir():
        raise ResumeRefused(f"{where}: not a directory")
    store = directory / STORE
    if not store.is_file():
        raise ResumeRefused(f"{where}: not a campaign's results directory (no {STORE})")
    try:
        with open_store(store) as db:
            version = store_version(db, str(store))
            record, trials = read_record(db, str(store)), read_trials(db)
            probes, ended_rays, searched = _searches(db, trials)
    except StoreError as exc:
        raise ResumeRefused(f"{where}: {exc}") from None
    except sqlite3.DatabaseError as exc:
        raise ResumeRefused(f"{where}: {STORE} cannot be read: {exc}") from None
    if version != STORE_VERSION and version not in UPGRADABLE:
        raise ResumeRefused(f"{where}: {STORE} is store version {version}, this bench-plugin writes "
                            f"{STORE_VERSION}: resume it with the bench-plugin that wrote it")
    if not record.scenario.sha256:
        raise ResumeRefused(f"{where}: not a campaign's results directory ({STORE} records no scenario)")
    recorded = Recorded(directory, given, record, trials, probes, ended_rays, searched)
    status = recorded.status
    if status is not None and status.status == CampaignState.COMPLETED:
        at = f" at {_when(status.ended_s)}" if status.ended_s is not None else ""
        raise recorded.refused(f"the campaign completed{at}: nothing to resume")
    return recorded


def _searches(db: sqlite3.Connection, trials: list[TrialRecord]
              ) -> tuple[dict[tuple[int, int], tuple[KeptProbe, ...]], dict[tuple[int, int], frozenset[str]],
                         tuple[tuple[int, int, SearchResult], ...]]:
    """Per search segment, its decided probes in order, and its rays whose search ended; and every ended search's
    result with its trial and segment (the timeline's typed entries: StoreError where one is not of its kind)."""
    reader = CampaignReader(db)
    probes: dict[tuple[int, int], list[KeptProbe]] = {}
    ended: dict[tuple[int, int], set[str]] = {}
    searched: list[tuple[int, int, SearchResult]] = []
    for trial in trials:
        for step in reader.search_steps(trial.id):
            decision = step.decision
            stages = sorted([*decision.stages, *decision.set_aside] if decision is not None else []) or [step.stage]
            probes.setdefault((trial.id, step.segment), []).append(KeptProbe(
                ray=step.ray, scale=step.scale, passed=step.passed,
                decided=decision is None or decision.outcome != ProbeOutcome.UNDECIDED, stages=tuple(stages),
                limited=limited_why(decision)))
        for result in reader.search_results(trial.id):
            ended.setdefault((trial.id, result.segment), set()).add(result.ray)
            searched.append((trial.id, result.segment, result))
    return ({k: tuple(v) for k, v in probes.items()}, {k: frozenset(v) for k, v in ended.items()},
            tuple(searched))


def options_for(recorded: Recorded, scenario: str | None, results_dir: str | None,
                given: Overrides) -> tuple[Path, Overrides]:
    """The scenario file and overrides a resume runs with: the recorded ones, or given ones that match them.

    ``given`` holds the command line's ``arm``, ``repeats`` and ``stage_duration`` (None: not given).
    """
    if results_dir is not None and Path(results_dir).resolve() != recorded.directory.resolve():
        raise recorded.refused(f"--results-dir {results_dir} is another directory (a resumed campaign writes "
                               "into its own)")
    kept = recorded.record.overrides or Overrides()
    overrides: dict[str, Any] = {}
    for name in OVERRIDES:
        mine, theirs = getattr(given, name), getattr(kept, name)
        if mine is not None and mine != theirs:
            flag = "--" + name.replace("_", "-")
            raise recorded.refused(f"{flag} {mine} vs {theirs if theirs is not None else 'not given'} (recorded)")
        overrides[name] = theirs if mine is None else mine
    if scenario is not None:
        return Path(scenario), Overrides(**overrides)
    path = recorded.record.scenario.path
    if not path or not Path(path).is_file():
        raise recorded.refused(f"the scenario it ran ({path}) is not there: name it with --scenario")
    return Path(path), Overrides(**overrides)


def differences(recorded: Recorded, *, scenario_sha256: str, classes: list[str], request_sets: dict[str, str],
                provenance: Provenance) -> list[str]:
    """``what: recorded vs now`` for each fixed condition that differs (empty: the same experiment)."""
    record = recorded.record
    out: list[str] = []
    theirs = record.scenario.sha256
    if theirs != scenario_sha256:
        out.append(f"scenario sha256 {_short(theirs)} vs {_short(scenario_sha256)}")
    if (record.classes or []) != classes:
        out.append(f"classes {', '.join(record.classes or []) or 'none'} vs {', '.join(classes) or 'none'}")
    sets = record.request_set_sha256()
    for name in sorted(set(sets) | set(request_sets)):
        if sets.get(name) != request_sets.get(name):
            out.append(f"request set {name}: sha256 {_short(sets.get(name))} vs {_short(request_sets.get(name))}")
    out += provenance_differences(record.conditions or Provenance(), provenance)
    return out


def provenance_differences(theirs: Provenance, mine: Provenance) -> list[str]:
    """Differences of the conditions that shape a measurement: backend, devices, driver, Python, packages, source."""
    out: list[str] = []
    back_theirs, back_mine = theirs.backend or BackendFacts(), mine.backend or BackendFacts()
    if back_theirs.backend != back_mine.backend:
        out.append(f"backend {back_theirs.backend} vs {back_mine.backend}")
    dev_theirs, dev_mine = back_theirs.device_identities(), back_mine.device_identities()
    for name in sorted(set(dev_theirs) | set(dev_mine)):
        if dev_theirs.get(name) != dev_mine.get(name):
            out.append(f"device {name}: {dev_theirs.get(name) or 'none'} vs {dev_mine.get(name) or 'none'}")
    for label, a, b in (("driver", back_theirs.driver, back_mine.driver),
                        ("CUDA driver", back_theirs.cuda_driver, back_mine.cuda_driver),
                        ("Kubernetes", back_theirs.server_version, back_mine.server_version)):
        if a != b:
            out.append(f"{label} {a} vs {b}")
    if theirs.python != mine.python:
        out.append(f"python {theirs.python} vs {mine.python}")
    pkg_theirs, pkg_mine = theirs.packages or {}, mine.packages or {}
    for name in sorted(set(pkg_theirs) | set(pkg_mine)):
        if pkg_theirs.get(name) != pkg_mine.get(name):
            out.append(f"package {name}: {pkg_theirs.get(name)} vs {pkg_mine.get(name)}")
    if theirs.source_digest and theirs.source_digest != mine.source_digest:
        out.append(f"bench_plugin source {theirs.source_digest} vs {mine.source_digest}")
    return out


def other_units(theirs: Provenance, mine: Provenance) -> list[str]:
    """Warnings for devices of the same model that are other units (another UUID): figures may shift a little."""
    ids = {d.name: d.uuid for d in (theirs.backend.devices if theirs.backend else None) or []}
    return [f"device {d.name} is another unit of the same model ({ids[d.name]} vs {d.uuid})"
            for d in (mine.backend.devices if mine.backend else None) or []
            if ids.get(d.name) and d.uuid and ids[d.name] != d.uuid]


@dataclass(frozen=True)
class Plan:
    """What a resumed campaign keeps and what it runs again."""

    done: Done
    """Trials and segments kept (the conductor skips them), and the rays kept of search segments run again."""
    kept: list[tuple[int, int]]
    """(trial, segment) kept, in run order."""
    rerun: list[tuple[int, int]]
    """(trial, segment) with an earlier, unfinished attempt: superseded, then run from its start (a search
    segment: the probes its earlier attempt decided are kept with their stages, ``done.probes``, and its
    searches go on from them)."""


def plan(recorded: Recorded, trials: list[Trial]) -> Plan:
    """The plan of a resume: kept segments and trials, and the segments whose attempt is superseded.

    The recorded trials must be the planned ones (same ids, arms and repeats): the scenario's hash
    says so already; a store that disagrees is refused rather than merged.
    """
    planned = {t.id: (t.arm.name, t.repeat) for t in trials}
    kept: list[tuple[int, int]] = []
    rerun: list[tuple[int, int]] = []
    done: set[int] = set()
    for record in sorted(recorded.trials, key=lambda r: r.position):
        if planned.get(record.id) != (record.arm, record.repeat):
            arm, repeat = planned.get(record.id, ("none", "-"))
            raise recorded.refused(f"trial {record.id}: arm {record.arm} repeat {record.repeat} vs arm {arm} "
                                   f"repeat {repeat}")
        finished = True
        for segment in sorted(record.segments, key=lambda s: s.index):
            unfinished = any(s.status in UNFINISHED_STAGES for s in record.stages if s.segment == segment.index)
            # Segments run in order: one that did not end means none after it did.
            finished = finished and segment.released_s is not None and not unfinished
            (kept if finished else rerun).append((record.id, segment.index))
        if record.status == TrialStatus.COMPLETED and finished:
            done.add(record.id)
    kept_probes = {key: probes for key in rerun if (probes := recorded.probes.get(key))}
    next_stage = {}
    for key in kept_probes:
        record = next(r for r in recorded.trials if r.id == key[0])
        next_stage[key] = 1 + max((s.index for s in record.stages if s.segment == key[1]), default=-1)
    ended = {key: recorded.ended_rays.get(key, frozenset()) for key in kept_probes}
    return Plan(Done(frozenset(done), frozenset(kept), kept_probes, ended, next_stage, recorded.searched), kept,
                rerun)


def begin(recorded: Recorded, resume_plan: Plan, recorder: Recorder, provenance: Provenance) -> Resume:
    """Supersede the unfinished attempts, and record the resume (meta ``resumes``, a ``resumed`` event).

    The previous status is dropped: until this process ends the campaign again, the store reads as
    one that ended without closing (what it is, should this process be killed too). Returns the record.
    """
    number = len(recorded.resumes) + 1
    superseded: dict[str, int] = {}
    for trial, segment in resume_plan.rerun:
        probes = resume_plan.done.probes.get((trial, segment), ())
        for table, rows in recorder.supersede_segment(trial, segment, number,
                                                      keep_stages=[i for p in probes for i in p.stages],
                                                      keep_rays=sorted({p.ray for p in probes})).items():
            superseded[table] = superseded.get(table, 0) + rows
    status = recorded.status or Ending(status=CampaignState.UNFINISHED, reason="the process ended without recording "
                                                                               "how (killed, or its machine stopped)")
    record = Resume(number=number, at_s=time.time(), previous_status=status.status, previous_reason=status.reason,
                    kept=list(resume_plan.kept), rerun=list(resume_plan.rerun),
                    superseded={k: v for k, v in superseded.items() if v}, host=provenance.host,
                    command=provenance.command)
    recorder.reopen()
    recorder.record(CampaignRecord(resumes=[*recorded.resumes, record]))
    recorder.note(Resumed(**dict(record)))
    return record


def _short(sha: str | None) -> str:
    return f"{sha[:12]}…" if sha else "none"


def _when(epoch_s: float) -> str:
    return dt.datetime.fromtimestamp(epoch_s, tz=dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


@dataclass(frozen=True)
class Resuming:
    """A resume that passed its checks: the recorded campaign, its plan, and this process's provenance."""

    recorded: Recorded
    plan: Plan
    provenance: Provenance
    trials: list[Trial]
    """The campaign's schedule (campaign.plan_trials)."""


def prepare(recorded: Recorded, *, trials: list[Trial], scenario_sha256: str, classes: list[str],
            request_sets: dict[str, str], provenance: Provenance) -> Resuming:
    """Check that this process runs the recorded experiment, and plan what is left; ResumeRefused if not."""
    found = differences(recorded, scenario_sha256=scenario_sha256, classes=classes, request_sets=request_sets,
                        provenance=provenance)
    if found:
        raise recorded.refused("; ".join(found))
    return Resuming(recorded, plan(recorded, trials), provenance, trials)


def confirm(resuming: Resuming) -> None:
    """Once this process holds the store's lock: the campaign is still as it was read and planned.

    The checks read the store before this process could lock it; another resume that ran meanwhile
    would make the plan stale (and superseding by it would move a segment that has since ended).
    """
    again = read_campaign(resuming.recorded.given)
    if again.resumes != resuming.recorded.resumes or plan(again, resuming.trials) != resuming.plan:
        raise again.refused("the campaign changed since this process read it (another process resumed it): "
                            "run --resume again")


def describe(resuming: Resuming, record: Resume) -> str:
    """One line for the console: what a resume keeps and runs again."""
    kept, rerun = resuming.plan.kept, resuming.plan.rerun
    trials = len(resuming.plan.done.trials)
    samples = record.superseded.get("samples", 0)
    probes = resuming.plan.done.probes
    named = ", ".join(f"trial {t} segment {s}" + (f" (keeping the {_count(len(probes[(t, s)]), 'probe')} it decided)"
                                                  if (t, s) in probes else "") for t, s in rerun)
    again = (f"; runs again from its start: {named} "
             f"({samples} samples of the earlier attempt superseded)") if rerun else ""
    return (f"resuming {resuming.recorded.given} (resume {record.number}, after status "
            f"{record.previous_status}): keeps {_count(len(kept), 'segment')} ({_count(trials, 'trial')} done)"
            f"{again}")


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"
