"""The timeline's declared kinds: what each entry of the store's ``events`` table says, typed.

A campaign's timeline is one row per moment (``events``: time, trial, kind, detail as JSON). Every
kind is declared here once, as a model whose fields are the entry's detail, so a writer cannot put
an undeclared kind or a misspelt field on it (``Recorder.note`` takes an :class:`Entry`, and each
model refuses unknown fields) and a reader gets the same type back (:func:`parse`). The order in which
a run says its moments (row, timeline entry, hook) is bench_plugin/run/moments.py's.

Kinds, by who says them:

- the trial's course (run/moments.py, run/conductor.py): ``trial_start``, ``arm_applied``, ``ready``,
  ``warmup_start``, ``warmup_end``, ``stage_start``, ``stage_end``, ``search_step``,
  ``search_result``, ``drain_timeout``, ``stage_accounting``, ``server_gone``, ``released``,
  ``observe_problem``, ``trial_stop``;
- the load generators (loadgen/fleet.py, the plugin): ``worker_connected``, ``worker_refused``,
  ``worker_accepted``, ``worker_lost``, ``final_accounting``;
- telemetry (telemetry/campaign.py): ``telemetry``, ``telemetry_unavailable``, ``server_metrics``;
- a stage's disruption (run/disruption.py, a backend's steps): ``disruption``;
- a resume (launch/resume.py): ``resumed``.

The JSON written for each kind is the model's fields, as before these models existed, so every
store reads the same; ``disruption`` alone allows fields it does not declare, since a backend says
what each of its steps did in its own terms.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, ValidationError

from bench_plugin.results.placement import ClassPlacement
from bench_plugin.results.server_rows import ServerSource
from bench_plugin.results.summary import DisruptionStep, ProbeDecision, Resume, SearchResult, first_problem
from bench_plugin.results.words import Phase


class TimelineError(Exception):
    """An entry of the timeline that is not of its declared kind; the message is one line."""


class Entry(BaseModel):
    """One moment on the timeline; ``kind`` names it in the store."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: ClassVar[str]

    def detail(self) -> dict[str, Any]:
        """The entry's fields as the store keeps them (JSON); an optional field left unsaid is left out."""
        return self.model_dump(mode="json", exclude_unset=True)


class TrialStart(Entry):
    """A trial begins, before its arm is applied."""

    kind: ClassVar[str] = "trial_start"
    arm: str
    repeat: int


class TrialStop(Entry):
    """A trial ended, after its servers were released: completed, failed, invalid or interrupted."""

    kind: ClassVar[str] = "trial_stop"
    status: str
    reason: str | None


class ArmApplied(Entry):
    """The backend applied the arm for a segment: where each class runs."""

    kind: ClassVar[str] = "arm_applied"
    segment: int
    placement: dict[str, ClassPlacement]


class Ready(Entry):
    """A class first answered its own real request (epoch ``t``), and what readiness found of its protocol."""

    kind: ClassVar[str] = "ready"
    segment: int
    workload: str
    t: float
    output_lengths: str | None = None
    note: str | None = None


class Released(Entry):
    """The segment's servers were released."""

    kind: ClassVar[str] = "released"
    segment: int


class WarmupStart(Entry):
    """The segment's unmeasured warm-up begins."""

    kind: ClassVar[str] = "warmup_start"
    segment: int
    requests: str


class WarmupEnd(Entry):
    """The warm-up ended: per class what it sent and how it went (run/warmup.py ClassWarmup.to_dict)."""

    kind: ClassVar[str] = "warmup_end"
    segment: int
    classes: dict[str, dict[str, Any]]


class ServerLost(Entry):
    """A class's server exited or stopped answering (run/liveness.py); the campaign stops."""

    kind: ClassVar[str] = "server_gone"
    segment: int
    stage: int | None = None
    reason: str


class StageStart(Entry):
    """A stage's arrivals begin: the load each class is offered (req/s, or users if closed-loop)."""

    kind: ClassVar[str] = "stage_start"
    segment: int
    stage: int
    offered: dict[str, float]


class StageEnd(Entry):
    """A stage ended: completed, aborted (rolled back), invalid or interrupted."""

    kind: ClassVar[str] = "stage_end"
    segment: int
    stage: int
    status: str
    reason: str | None


class SearchStep(Entry):
    """The adaptive search judged one stage at ``scale`` of its mix."""

    kind: ClassVar[str] = "search_step"
    segment: int
    stage: int
    """The stage that decided it (the last of its extensions)."""
    scale: float
    passed: bool
    """What the search took it for: the decision, or its point estimate when undecided."""
    ray: str = "mix"
    phase: str = Phase.PROBE
    """``probe`` or ``sustain`` (the hold of the found boundary)."""
    decision: ProbeDecision | None = None
    """The counts and confidence bounds it was decided on (None in stores before statistical decisions)."""


class SearchOutcome(Entry, SearchResult):
    """The adaptive search of a segment ended (or stopped): results.summary.SearchResult."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: ClassVar[str] = "search_result"


class DrainTimeout(Entry):
    """Requests were still in flight when the drain's time ran out."""

    kind: ClassVar[str] = "drain_timeout"
    segment: int
    in_flight: int


class ShareAccount(BaseModel):
    """One load generator's share of one class in one stage, and what became of it (loadgen/ledger.py)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    share: tuple[int, int]
    """(index, count): it sent arrivals index, index + count, ..."""
    expected: int | None
    """Open loop: the arrivals of the share; closed loop: None."""
    sent: int | None
    """Requests it sent, once it reported the end of its loop (None: it never did)."""
    received: int
    """Samples of the share that arrived."""


class StageAccounting(Entry):
    """A stage's arrivals checked per load generator (loadgen/ledger.py StageLedger.describe) and what failed."""

    kind: ClassVar[str] = "stage_accounting"
    segment: int
    stage: int
    shares: dict[str, dict[str, ShareAccount]]
    """Class -> load generator -> its share's account."""
    problems: list[str]


class FinalAccounting(Entry):
    """What the workers' last reports held of the stage a stop cut short."""

    kind: ClassVar[str] = "final_accounting"
    segment: int
    stage: int
    shares: dict[str, dict[str, ShareAccount]]


class ObserveProblem(Entry):
    """Watching the workload pods failed in part (kubernetes backend): the pod timeline may lack events."""

    kind: ClassVar[str] = "observe_problem"
    problem: str


class Disruption(Entry, DisruptionStep):
    """One step of a stage's disruption (kubernetes backend): the step itself, and where in the campaign."""

    model_config = ConfigDict(extra="allow", frozen=True)
    kind: ClassVar[str] = "disruption"
    segment: int
    stage: int
    disruption: str
    """The scenario's disruption kind."""
    at_s: float
    """When in the stage it was planned, in seconds from the stage's start."""

    def step(self) -> DisruptionStep:
        """The step alone, as the stage's disruption lists it."""
        return DisruptionStep.model_validate(self.model_dump(exclude={"segment", "stage", "disruption", "at_s"}))


class Telemetry(Entry):
    """A segment's GPU sampler stopped: which process was which class, its polls and what went wrong."""

    kind: ClassVar[str] = "telemetry"
    segment: int
    processes: dict[str, str]
    polls: int
    overruns: int
    problems: dict[str, int]
    """Each problem the source met, and how many times."""


class TelemetryUnavailable(Entry):
    """No GPU telemetry for a segment, and why."""

    kind: ClassVar[str] = "telemetry_unavailable"
    segment: int
    reason: str


class ServerMetrics(Entry):
    """A segment's server-metrics scraper stopped: per class where its metrics came from and what went wrong."""

    kind: ClassVar[str] = "server_metrics"
    segment: int
    sources: list[ServerSource]


class Resumed(Entry, Resume):
    """The campaign was resumed (launch/resume.py): what was kept, what runs again, what was superseded; the
    same record as the store's ``resumes`` fact and summary.json's ``status.resumed``."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: ClassVar[str] = "resumed"


class WorkerConnected(Entry):
    """A load generator said hello (its identity: host, pid, versions)."""

    kind: ClassVar[str] = "worker_connected"
    worker: str
    identity: dict[str, Any]


class WorkerRefused(Entry):
    """A load generator was refused, and why."""

    kind: ClassVar[str] = "worker_refused"
    worker: str
    reason: str


class WorkerAccepted(Entry):
    """A load generator joined the fleet."""

    kind: ClassVar[str] = "worker_accepted"
    worker: str


class WorkerLost(Entry):
    """A load generator was lost, and why."""

    kind: ClassVar[str] = "worker_lost"
    worker: str
    reason: str | None


KINDS: dict[str, type[Entry]] = {cls.kind: cls for cls in (
    TrialStart, TrialStop, ArmApplied, Ready, Released, WarmupStart, WarmupEnd, ServerLost, StageStart, StageEnd,
    SearchStep, SearchOutcome, DrainTimeout, StageAccounting, FinalAccounting, ObserveProblem, Disruption,
    Telemetry, TelemetryUnavailable, ServerMetrics, Resumed, WorkerConnected, WorkerRefused, WorkerAccepted, WorkerLost,
)}
"""Kind -> its model: every kind a timeline may hold."""


def parse(kind: str, detail: dict[str, Any]) -> Entry:
    """The entry of ``kind`` with ``detail``; TimelineError names the kind and field when it is not of its kind."""
    model = KINDS.get(kind)
    if model is None:
        raise TimelineError(f"timeline: unknown kind {kind!r}")
    try:
        return model.model_validate(detail)
    except ValidationError as exc:
        raise TimelineError(f"timeline: {kind}.{first_problem(exc)}") from None
