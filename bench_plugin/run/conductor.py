"""Conductor: runs a campaign's trials in order on the master (or local runner).

Per trial: apply the arm (segment by segment), wait until every endpoint answers a real request,
run the stages (splitting each over the load generators, watching the rollback conditions and the
load generators themselves), drain what is in flight, check each stage's accounting, release the
servers. Every step lands in the recorder as it happens, so a failure or Ctrl-C at any point
leaves everything measured before it, plus the reason, in results.sqlite.

A stage the scenario disrupts (a restart, a drain, a node failure) has it carried out beside its load
(run/disruption.py).

A resumed campaign hands over what it already ran (campaign.Done): those trials and segments are
skipped, the rest runs as it would have.

A stage whose load was not exactly the stated one (a worker lost mid-stage, a sample missing: see
loadgen/ledger.py) is marked ``invalid`` with the reason, and the campaign stops there with status
``failed``: its figures would compare unequal loads. A worker that quit mid-stage (stopped on purpose:
a Ctrl-C to the process group reaches the workers first) stops the campaign as a stop does: the stage
and the campaign are ``interrupted``, saying which worker quit.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from functools import partial
from typing import Any

import gevent

from bench_plugin.analysis.objectives import ClassObjectives
from bench_plugin.analysis.probe import limited_why, taken_as_passed
from bench_plugin.analysis.search import RaySearches, borrowed_start, prior_bracket, segment_rays
from bench_plugin.analysis.selfcheck import check_stage
from bench_plugin.analysis.summary import PROTOCOL_FAILURE, class_stats
from bench_plugin.loadgen.arrivals import OPEN_LOOP, arrival_offsets
from bench_plugin.loadgen.fleet import LOCAL, QUIT, Fleet, NoLoadGenerators, on_this_host
from bench_plugin.loadgen.ledger import StageKey, StageLedger
from bench_plugin.loadgen.state import ClassLoad, StageAssignment
from bench_plugin.results.placement import Placement
from bench_plugin.results.record import CampaignRecord
from bench_plugin.results.recorder import Recorder
from bench_plugin.results.samples import Sample
from bench_plugin.results.store import StoreWriteError
from bench_plugin.results.summary import BorrowedBracket, ClassStats, Ending, GeneratorUse, SearchResult
from bench_plugin.results.timeline import (
    DrainTimeout,
    ObserveProblem,
    SearchOutcome,
    SearchStep,
    ServerLost,
    StageAccounting,
)
from bench_plugin.results.words import CampaignState, Phase, ProbeOutcome, StageStatus, TrialStatus
from bench_plugin.run.disruption import StageDisruption
from bench_plugin.run.hooks import BenchEvents
from bench_plugin.run.liveness import (
    SERVER_GONE,
    ServerGone,
    exited,
    not_answering,
    unanswered,
    warmup_failed,
    warmup_failure,
)
from bench_plugin.run.moments import Moments
from bench_plugin.run.probing import StageRun, run_probe
from bench_plugin.run.readiness import NotReady, Prober, probe_item, wait_until_ready
from bench_plugin.run.rollback import RollbackGuard, StageTally
from bench_plugin.run.schedule import Done, Trial
from bench_plugin.run.warmup import Builder, warm_up
from bench_plugin.scenario import ASRClass, EmbeddingClass, LLMClass, Scenario, Search, Stage
from bench_plugin.scenario.request_sets import RequestSet
from bench_plugin.sharing.base import ApplyError, SharingBackend
from bench_plugin.telemetry.campaign import CampaignTelemetry
from bench_plugin.telemetry.hostload import HostLoad, HostMonitor, with_extra_own

logger = logging.getLogger(__name__)

LEAD_S = 0.25
"""A stage starts this long after it is announced, so every worker has it before its first arrival."""

LOAD_GENERATORS_TIMEOUT_S = 60.0
"""How long a stage waits for a load generator that can send each of its classes (workers setting up)."""


class CampaignFailed(Exception):
    """The campaign could not go on (an arm did not apply, an endpoint never became ready)."""


class ProtocolFailure(Exception):
    """A stage's requests of some class all failed with one protocol error (rollback.StageTally.protocol_failure)."""


class StageInvalid(Exception):
    """A stage's load was not the stated one (its accounting failed); the message says how."""


class WorkerQuit(Exception):
    """Every worker lost mid-stage had quit (stopped on purpose, not failed): the campaign stops as a stop does."""


class Conductor:
    """Runs the trials; ``status`` tells how it ended once ``finished`` is set."""

    def __init__(
        self,
        *,
        scenario: Scenario,
        class_names: list[str],
        trials: list[Trial],
        backend: SharingBackend,
        recorder: Recorder,
        request_sets: dict[str, RequestSet],
        events: BenchEvents,
        fleet: Fleet,
        telemetry: CampaignTelemetry,
        builders: Mapping[str, Builder] | None = None,
        probers: Mapping[str, Prober] | None = None,
        done: Done | None = None,
        borrowed: list[BorrowedBracket] | None = None,
    ) -> None:
        """``borrowed``: the brackets an earlier campaign left (``--warm-start-from``), where each ray's search starts
        in its arm's first repeat (``_priors``)."""
        self.scenario = scenario
        self.borrowed = list(borrowed or [])
        self.class_names = class_names
        self.trials = trials
        self.backend = backend
        self.recorder = recorder
        self.request_sets = request_sets
        self.events = events
        self.moments = Moments(recorder, events)
        self.fleet = fleet
        self.unverified: list[tuple[StageKey, bool]] = []
        """Stages run since the last drain, each with whether its arrivals were stopped early."""
        self.guard = RollbackGuard(scenario)
        self.tally: StageTally | None = None
        self.disrupted: set[int] = set()
        """Trials a disruption has hit: a server lost in one is that trial's outcome, not the campaign's end."""
        self.telemetry = telemetry
        self.host = HostMonitor()
        """The host's own load per stage (telemetry/hostload.py): this process and the servers it started are the
        run's."""
        self.host_loads: dict[StageKey, HostLoad] = {}
        self.builders = dict(builders or {})
        self.probers = dict(probers or {})
        self.options: dict[str, dict[str, Any]] = {}
        """Class -> its request options as the current segment's readiness resolved them (ClassLoad.options)."""
        """Class -> how to build one of its requests (its user's ``prepare``), for the warm-up."""
        self.done = done or Done()
        """Trials and segments a resumed campaign already ran to their end: skipped."""
        self.searched: list[tuple[int, int, SearchResult]] = list(self.done.searched)
        """Every ray's search that ended, ``(trial id, segment, result)``: a warm start's brackets (``_priors``)."""
        self.judged: tuple[tuple[int, int, int], list[Sample]] | None = None
        """The stage an adaptive search is about to judge, and its samples (stragglers included)."""
        self.judged_use: dict[str, GeneratorUse] | None = None
        """What the load generators used and saw sending that stage, once it drained (``_generators``)."""
        self.judged_host: HostLoad | None = None
        """The host's load over that stage (its drain records it), for the self-check."""
        self.stop_cause = "Ctrl-C or a stop signal"
        """What stopped the run, if it is stopped (the plugin names the signal where it knows it)."""
        self._urls: dict[str, str] = {}
        """Class -> the current segment's endpoint."""
        self.status: CampaignState = CampaignState.RUNNING
        self.reason: str | None = None
        self.finished = False

    def on_sample(self, sample: Sample) -> None:
        """Take one finished request (from local users or a worker's report)."""
        self.recorder.add_samples([sample])
        if self.tally is not None:
            self.tally.add(sample)
        if self.judged is not None and self.judged[0] == (sample.trial, sample.segment, sample.stage):
            self.judged[1].append(sample)

    def run(self) -> None:
        """Run every trial; sets ``status`` to completed, failed or interrupted."""
        try:
            for trial in self.trials:
                if trial.id not in self.done.trials:
                    self._trial(trial)
            self.status = CampaignState.COMPLETED
        except CampaignFailed as exc:
            self.status, self.reason = CampaignState.FAILED, str(exc)
        except ApplyError as exc:  # releasing a trial's servers failed (raised from its finally, past _trial)
            self.status, self.reason = CampaignState.FAILED, f"releasing what the arm started failed: {exc}"
        except StageInvalid as exc:
            self.status = CampaignState.FAILED
            self.reason = f"{exc}; the campaign stopped there (what was measured is kept)"
        except WorkerQuit as exc:
            self.status = CampaignState.INTERRUPTED
            self.reason = f"{exc}; the campaign stopped there (what was measured is kept)"
        except StoreWriteError as exc:  # the disk is full, say: stop, keeping what was committed
            self.status = CampaignState.FAILED
            self.reason = f"{exc}; the campaign stopped there (what was committed is kept)"
        except gevent.GreenletExit:
            self.status, self.reason = CampaignState.INTERRUPTED, f"the run was stopped ({self.stop_cause})"
            raise
        finally:
            try:
                self.backend.restore()
            finally:  # whatever fails here, the campaign has ended: the shape must see it (or it waits for ever)
                try:
                    self.recorder.commit()
                    self.recorder.record(CampaignRecord(status=Ending(status=self.status, reason=self.reason,
                                                                      ended_s=time.time())))
                except StoreWriteError as exc:
                    logger.error("the campaign's end could not be recorded: %s", exc)
                finally:
                    self.finished = True

    def _trial(self, trial: Trial) -> None:
        self.moments.trial_started(trial)
        status, reason = TrialStatus.COMPLETED, None
        try:
            self.backend.observe(trial.arm, trial.id, partial(self.recorder.pod_event, trial.id))
            for segment, classes in enumerate(self.backend.segments(trial.arm, self.class_names)):
                if (trial.id, segment) not in self.done.segments:
                    self._segment(trial, segment, classes)
        except ServerGone as exc:
            status, reason = TrialStatus.FAILED, str(exc)
            if trial.id not in self.disrupted:
                raise CampaignFailed(f"trial {trial.id} (arm {trial.arm.name}, repeat {trial.repeat}): {exc}") from None
            # a server that did not come through a disruption (a co-tenant taken down with it, a restart that never
            # came back) is what the disruption measured: the trial ends failed and the campaign goes on
            logger.error("trial %d (arm %s, repeat %d) failed after its disruption: %s", trial.id, trial.arm.name,
                         trial.repeat, exc)
        except (ApplyError, NotReady, ProtocolFailure) as exc:
            status, reason = TrialStatus.FAILED, str(exc)
            raise CampaignFailed(f"trial {trial.id} (arm {trial.arm.name}, repeat {trial.repeat}): {exc}") from None
        except StageInvalid as exc:
            status, reason = TrialStatus.INVALID, str(exc)
            raise
        except WorkerQuit as exc:
            status, reason = TrialStatus.INTERRUPTED, str(exc)
            raise
        except gevent.GreenletExit:
            status, reason = TrialStatus.INTERRUPTED, "the run was stopped"
            raise
        finally:
            self.backend.release()
            for problem in self.backend.end_observe():  # after the release: the deletions are on the timeline
                self.recorder.note(ObserveProblem(problem=problem), trial.id)
                logger.warning("trial %d: pod timeline: %s", trial.id, problem)
            self.moments.trial_ended(trial, status, reason)

    def _segment(self, trial: Trial, segment: int, classes: list[str]) -> None:
        placement = self.backend.apply(trial.arm, classes, trial.id, segment)
        self.moments.segment_applied(trial, segment, classes, placement)
        self.telemetry.start_segment(trial.id, segment, placement)
        try:
            self._measure(trial, segment, classes, placement)
        finally:
            self.telemetry.stop_segment(trial.id, segment, placement)

    def _measure(self, trial: Trial, segment: int, classes: list[str], placement: Placement) -> None:
        """Wait for readiness, run the stages, drain, release."""
        self.options = {}
        found = wait_until_ready(
            placement, {name: self._class_load(name, placement.classes[name].url, 0.0) for name in placement.classes},
            self.request_sets, self.probers, self.scenario.readiness_timeout_s, died=self.backend.exited,
        )
        self.options = found.options
        ready = found.ready
        protocol = {name: {"output_lengths": found.output_lengths.get(name), "note": found.notes.get(name)}
                    for name in ready if name in found.output_lengths or name in found.notes}
        for name in ready:
            if name in found.notes:
                logger.warning("trial %d segment %d: %s: %s", trial.id, segment, name, found.notes[name])
        self.moments.segment_ready(trial, segment, placement, ready, protocol)
        urls = self._urls = {name: placement.classes[name].url for name in classes}
        self._warm_up(trial, segment, classes, urls)
        if self.scenario.search is not None:
            self._search(trial, segment, classes, urls, self.scenario.search)
        else:
            self._sweep(trial, segment, classes, urls)
        self._drain(trial, segment)
        self.telemetry.stop_servers(trial.id, segment)  # before the servers go: their going is no metrics problem
        self.backend.release()
        self.moments.segment_released(trial, segment)

    def _warm_up(self, trial: Trial, segment: int, classes: list[str], urls: dict[str, str]) -> None:
        """The segment's unmeasured warm-up (run/warmup.py), on the timeline and in the segment's row."""
        spec = self.scenario.warmup
        if spec.requests == "none":
            return
        self.moments.segment_warming(trial, segment, spec.requests)
        done = warm_up({name: self._class_load(name, urls[name], 0.0) for name in classes},
                       {name: self.request_sets[name].items for name in classes}, self.builders,
                       mode=spec.requests, duration_s=spec.duration_s, concurrency=spec.concurrency,
                       timeout_s=spec.timeout_s)
        self.moments.segment_warmed(trial, segment, done)
        gone = self._exited(classes)
        for name in warmup_failed(done):
            if gone is None:
                probe = self._probe(name)
                gone = None if probe.ok else warmup_failure(name, done[name], probe)
        if gone is not None:
            self.recorder.note(ServerLost(segment=segment, reason=gone), trial.id)
            raise ServerGone(f"warm-up: {gone}")

    def _sweep(self, trial: Trial, segment: int, classes: list[str], urls: dict[str, str]) -> None:
        """The scenario's fixed stages in order; after a rollback the higher ones are skipped."""
        rolled_back: int | None = None
        for index, stage in enumerate(self.scenario.stages):
            if rolled_back is not None:
                self._skip(trial, segment, classes, index, stage, f"stage {rolled_back} was rolled back")
                continue
            if self._stage(trial, segment, classes, index, stage, urls) == StageStatus.ABORTED:
                rolled_back = index

    def _search(self, trial: Trial, segment: int, classes: list[str], urls: dict[str, str], spec: Search) -> None:
        """Stages proposed by the adaptive boundary search along each ray, each probe decided before the next is
        chosen (run/probing.py): an undecided one is run again at its load, its samples pooled."""
        rays = segment_rays(spec.rays(), classes)
        searches = RaySearches(rays, spec.start_scale, spec.max_scale, spec.precision, growth=spec.growth,
                               minimum=spec.min_scale, sustain=spec.sustain_duration_s > 0, budget=spec.budget,
                               priors=self._priors(trial, segment, rays, spec.warm_start))
        key = (trial.id, segment)
        for kept in self.done.probes.get(key, ()):  # a resume replays the probes its earlier attempt decided
            searches.searches[kept.ray].record(kept.scale, kept.passed, decided=kept.decided, runs=len(kept.stages),
                                               limited=kept.limited)
        index = self.done.next_stage.get(key, 0)
        reported: set[str] = set(self.done.rays.get(key, frozenset()))
        while (search := searches.propose()) is not None:
            scale = search.propose()
            assert scale is not None
            phase, load = search.phase, search.offered(scale)
            objectives = {name: ClassObjectives(self.scenario.classes.get(name).slo,
                                                self.scenario.classes.get(name).error_budget) for name in load}
            duration = spec.stage_length_s(load, hold=phase == Phase.SUSTAIN)
            label = (("" if search.ray == "mix" else f"{search.ray} ") + f"x{scale:.4g}"
                     + (" hold" if phase == Phase.SUSTAIN else ""))
            run_stage = partial(self._probe_stage, trial, segment, classes, urls, load, duration, objectives)
            probe = run_probe(run_stage, spec, objectives, label, phase, index, runs_before=searches.runs,
                              budget=searches.budget, trial=trial.id)
            decision, stages, aside, index = probe.decision, probe.stages, probe.aside, probe.next_index
            limited = limited_why(decision)  # then the search stops there
            passed = taken_as_passed(decision)
            self.recorder.note(SearchStep(segment=segment, stage=stages[-1], scale=scale, passed=passed,
                                          ray=search.ray, phase=phase, decision=decision), trial.id)
            search.record(scale, passed, decided=decision.outcome != ProbeOutcome.UNDECIDED,
                          runs=len(stages) + len(aside), limited=limited)
            if search.propose() is None:  # this ray is done: its outcome now, so a resume can keep it
                self._ended(trial, segment, search.result(segment))
                reported.add(search.ray)
        self.judged = None
        for result in searches.results(segment):
            if result.ray not in reported:  # stopped by the budget
                self._ended(trial, segment, result)

    def _probe_stage(self, trial: Trial, segment: int, classes: list[str], urls: dict[str, str],
                     load: Mapping[str, float], duration: float, objectives: dict[str, ClassObjectives], index: int,
                     name: str) -> StageRun:
        """One stage of a search's probe (run/probing.py's ``run_stage``): run at ``load``, drained, and checked."""
        stage = Stage.model_validate({"duration_s": duration, "name": name,
                                      "load": {c: load.get(c, 0.0) for c in classes}})
        self.judged, self.judged_use, self.judged_host = ((trial.id, segment, index), []), None, None
        status = self._stage(trial, segment, classes, index, stage, urls)
        self._drain(trial, segment)  # the slowest requests of the stage decide it: wait for them
        samples = self.judged[1]
        return StageRun(status, samples, self._generator_limit(samples, objectives, duration))

    def _ended(self, trial: Trial, segment: int, result: SearchResult) -> None:
        """A ray's search ended: on the timeline, and kept for the warm starts of later repeats."""
        self.recorder.note(SearchOutcome(**result.model_dump()), trial.id)
        self.searched.append((trial.id, segment, result))

    def _priors(self, trial: Trial, segment: int, rays: dict[str, dict[str, float]],
                warm: bool) -> dict[str, tuple[float | None, float | None]]:
        """Ray -> the bracket its search starts from. With ``warm`` (``search.warm_start``): from the latest earlier
        trial of the same arm whose search of that ray in this segment ended on its own (analysis/search.
        prior_bracket). In the arm's first trial: the bracket an earlier campaign left (``--warm-start-from``). Only
        trials earlier in the schedule count, so a resume starts each ray where the uncut campaign did."""
        position = {t.id: t for t in self.trials}
        first = not any(t.arm.name == trial.arm.name and t.position < trial.position for t in self.trials)
        out: dict[str, tuple[float | None, float | None]] = {}
        for ray, mix in rays.items():
            if first:
                if (bracket := borrowed_start(self.borrowed, trial.arm.name, ray, mix)) is not None:
                    out[ray] = bracket
                continue
            if not warm:
                continue
            earlier = sorted(((position[t].position, result) for t, seg, result in self.searched
                              if t in position and position[t].arm.name == trial.arm.name
                              and position[t].position < trial.position and seg == segment and result.ray == ray),
                             key=lambda pr: pr[0])
            if (bracket := prior_bracket([result for _, result in earlier])) is not None:
                out[ray] = bracket
        return out

    def _generator_limit(self, samples: list[Sample], objectives: dict[str, ClassObjectives],
                         duration_s: float) -> str | None:
        """Why the load generators could not send the stage just drained as planned (analysis/selfcheck.py: the
        rule the summary applies to every stage), or None."""
        mine: dict[str, list[Sample]] = {}
        for sample in samples:
            mine.setdefault(sample.workload, []).append(sample)

        def stats_of(name: str, some: list[Sample]) -> ClassStats:
            return class_stats(some, name, duration_s, objectives.get(name))

        rows = [self.judged_use] if self.judged_use is not None else []
        return check_stage({name: stats_of(name, some) for name, some in mine.items()}, rows, mine, stats_of,
                           objectives, self.judged_host).limited

    def _class_load(self, name: str, url: str, load: float) -> ClassLoad:
        spec = self.scenario.classes.get(name)
        options: dict[str, Any] = {}
        if name in self.options:  # as readiness resolved them for this segment
            options = dict(self.options[name])
        elif isinstance(spec, LLMClass):
            options = {"api": spec.api, "fixed_output": spec.fixed_output}
        elif isinstance(spec, ASRClass):
            options = {"response_format": spec.response_format}
        elif isinstance(spec, EmbeddingClass):
            options = {"encoding_format": spec.encoding_format}
        return ClassLoad(url=url, model=spec.model, arrival=spec.arrival, load=load,
                         timeout_s=spec.request_timeout_s, max_in_flight=spec.max_in_flight, options=options)

    def _offered(self, classes: list[str], stage: Stage) -> tuple[dict[str, float], dict[str, str]]:
        offered = {name: float(stage.load[name]) for name in classes}  # type: ignore[index]
        arrival: dict[str, str] = {name: self.scenario.classes.get(name).arrival for name in classes}
        return offered, arrival

    def _skip(self, trial: Trial, segment: int, classes: list[str], index: int, stage: Stage, reason: str) -> None:
        offered, arrival = self._offered(classes, stage)
        self.recorder.stage_skipped(trial.id, segment, index, stage.name, offered, arrival, reason)

    def _stage(self, trial: Trial, segment: int, classes: list[str], index: int, stage: Stage,
               urls: dict[str, str]) -> StageStatus:
        offered, arrival = self._offered(classes, stage)
        try:
            self.fleet.wait_for_senders([n for n in classes if offered[n] > 0], LOAD_GENERATORS_TIMEOUT_S)
        except NoLoadGenerators as exc:
            raise CampaignFailed(str(exc)) from None
        start = time.time() + LEAD_S
        assignment = StageAssignment(
            trial=trial.id, segment=segment, stage=index, start_s=start, end_s=start + stage.duration_s,
            seed=self.scenario.seed,
            classes={name: self._class_load(name, urls[name], offered[name]) for name in classes},
        )
        self.tally = tally = StageTally(assignment.key)
        arrivals = _arrivals(assignment)
        self.moments.stage_started(trial, segment, index, stage.name, offered, arrival, assignment.start_s,
                                   assignment.end_s, assignment.duration_s, arrivals)
        status = StageStatus.INTERRUPTED  # until the stage has run
        reason: str | None = "the stage could not start"
        stop: ServerGone | ProtocolFailure | None = None  # what ends the trial once the stage is closed
        window, disruption = None, None
        try:  # from here on the stage row exists: whatever stops the run closes it (a stop can come while announcing)
            try:
                ledger = self.fleet.announce(assignment, arrivals)
            except NoLoadGenerators as exc:
                status, reason = StageStatus.INVALID, str(exc)
                raise CampaignFailed(str(exc)) from None
            window = self.host.start()
            disruption = StageDisruption.begin(self.scenario, self.backend, self.recorder, trial, segment, index,
                                                classes, start, self.probe_at)
            if disruption is not None:
                self.disrupted.add(trial.id)
            status, reason, stop = self._watch(assignment, ledger, disrupted=disruption is not None)
            if status != StageStatus.COMPLETED:
                self.fleet.stop_stage(assignment.key)
                logger.warning("trial %d stage %d %s: %s", trial.id, index, status, reason)
        except gevent.GreenletExit:
            status, reason = StageStatus.INTERRUPTED, "the run was stopped during this stage"
            self.fleet.stop_stage(assignment.key)
            raise
        except StoreWriteError:
            status, reason = StageStatus.INTERRUPTED, "writing the results failed during this stage"
            self.fleet.stop_stage(assignment.key)
            raise
        finally:
            ended = min(time.time(), assignment.end_s)
            if window is not None:
                self.host_loads[assignment.key] = self.host.stop(window)
            self.moments.stage_ended(trial, segment, index, ended, status, reason)
            self.telemetry.stage_ended(trial.id, segment, index, start, ended)
            self.tally = None
            if disruption is not None:
                disruption.end(stopped=status == StageStatus.INTERRUPTED)
        stopped_early = status in (StageStatus.ABORTED, StageStatus.INTERRUPTED) or isinstance(stop, ServerGone)
        self.unverified.append((assignment.key, stopped_early))
        if stop is not None:  # a server exited (keep what was measured up to its exit), or a protocol failure
            self._drain(trial, segment)  # (keep what was measured: every stage would measure the same); then stop
            raise stop
        if status == StageStatus.INVALID:
            self._drain(trial, segment)  # keep what the remaining workers measured, then stop
            raise StageInvalid(f"trial {trial.id} stage {index} is invalid: {reason}")
        if status == StageStatus.INTERRUPTED:
            self._drain(trial, segment)  # keep what the remaining workers measured, then stop
            raise WorkerQuit(f"trial {trial.id} stage {index}: {reason}")
        self._answered(trial, segment, index, tally)
        return status

    def _answered(self, trial: Trial, segment: int, index: int, tally: StageTally) -> None:
        """Raise ServerGone (the stage marked invalid) when a class of the stage got no successful reply and,
        the stage drained, a probe gets none either (run/liveness.py); a server that answers the probe was at
        its capacity, and the stage stands."""
        key = (trial.id, segment, index)
        sent = {name: len(values) for name, values in tally.latencies.items()}
        for name, _ in self.fleet.in_flight_of(key):
            sent[name] = sent.get(name, 0) + 1
        succeeded = {name: len(values) - tally.errors.get(name, 0) for name, values in tally.latencies.items()}
        silent = unanswered(succeeded, sent)
        if not silent:
            return
        self._drain(trial, segment)
        for name in silent:
            gone = self._exited([name])
            if gone is None:
                probe = self._probe(name)
                if probe.ok:
                    continue
                gone = not_answering(name, sent[name], probe)
            if gone is not None:
                self.recorder.stage_invalid(*key, SERVER_GONE + gone)
                self.recorder.note(ServerLost(segment=segment, stage=index, reason=gone), trial.id)
                raise ServerGone(f"stage {index}: {gone}")

    def _exited(self, classes: list[str]) -> str | None:
        """The first of ``classes`` whose server has exited, with why (liveness.exited); None while they run, and
        always None where the platform replaces a server that went (its pods: what a disruption measures)."""
        return None if self.backend.replaces_servers else exited(classes, self.backend.exited)

    def _probe(self, name: str) -> Sample:
        """Send class ``name`` its readiness request now, at the current segment's endpoint; its sample."""
        return self.probe_at(name, self._urls[name])

    def probe_at(self, name: str, url: str) -> Sample:
        """Send class ``name`` its readiness request now, at ``url`` (a server started anew mid-stage); its sample."""
        load = self._class_load(name, url, 0.0)
        return self.probers[name](load, probe_item(name, self.request_sets[name]))

    def _watch(self, assignment: StageAssignment, ledger: StageLedger, disrupted: bool = False
               ) -> tuple[StageStatus, str | None, ServerGone | ProtocolFailure | None]:
        """Sleep through the stage, checking the rollback conditions and the load generators twice a second: its
        status, the reason recorded for it, and what ends the trial after it (a server gone, a protocol failure).

        A ``disrupted`` stage is never rolled back: its errors and its latency spike are what it measures."""
        while (remaining := assignment.end_s - time.time()) > 0:
            gevent.sleep(min(0.5, remaining))
            if self.recorder.failure is not None:  # a write made outside this greenlet failed (a worker's event)
                raise StoreWriteError(self.recorder.failure)
            gone = self._exited(list(assignment.classes))
            if gone is not None:
                gone += " mid-stage"
                return StageStatus.INVALID, SERVER_GONE + gone, ServerGone(f"stage {assignment.stage}: {gone}")
            lost = self.fleet.lost(ledger)
            if lost and all(why == QUIT for why in lost.values()):
                return StageStatus.INTERRUPTED, "; ".join(f"worker {w} quit mid-stage" for w in sorted(lost)), None
            if lost:
                return StageStatus.INVALID, "; ".join(f"worker {w} was lost mid-stage ({why})"
                                                     for w, why in sorted(lost.items())), None
            assert self.tally is not None
            failure = self.tally.protocol_failure()
            if failure is not None:
                return StageStatus.ABORTED, PROTOCOL_FAILURE + failure, ProtocolFailure(failure)
            reason = None if disrupted else self.guard.check(self.tally, self.fleet.in_flight_of(assignment.key))
            if reason is not None:
                return StageStatus.ABORTED, reason, None
        return StageStatus.COMPLETED, None, None

    def _drain(self, trial: Trial, segment: int) -> None:
        """Wait for what is in flight before the servers go, then check each stage's accounting.

        Requests still in flight after the drain timeout are counted on the timeline (their samples
        may still arrive). A stage whose accounting fails is marked invalid and stops the campaign.
        """
        keys, self.unverified = self.unverified, []
        try:
            self.fleet.settle([key for key, _ in keys], time.time() + self.scenario.drain_timeout_s)
        except gevent.GreenletExit:  # stopped while draining: a stage still waiting for answers loses them
            for key, _ in keys:
                left = len(self.fleet.in_flight_of(key))
                if left:
                    self.recorder.stage_cut(*key, f"the run was stopped while {left} of its requests were still "
                                                  f"in flight ({self.stop_cause})")
            raise
        left = self.fleet.in_flight()
        if left:
            self.recorder.note(DrainTimeout(segment=segment, in_flight=left), trial.id)
            logger.warning("trial %d: %d requests still in flight after the drain timeout", trial.id, left)
        self.recorder.commit()
        invalid = []
        for key, stopped in keys:
            problems = self.fleet.verify(key, stopped)
            ledger = self.fleet.ledgers[key]
            host = self.host_loads.pop(key, None)
            if host is not None:  # load generators on this host are the run's own CPU, not other work
                host = with_extra_own(host, sum(cpu for member, (cpu, _) in ledger.usage.items()
                                                if member != LOCAL and on_this_host(member)))
            used = _generators(ledger)
            if self.judged is not None and self.judged[0] == key:
                self.judged_use, self.judged_host = used, host
            self.recorder.stage_checked(*key, generators=used, host=host)
            self.recorder.note(StageAccounting(segment=key[1], stage=key[2], shares=self.fleet.ledgers[key].describe(),
                                               problems=problems), trial.id)
            if problems:
                reason = "; ".join(problems)
                self.recorder.stage_invalid(*key, reason)
                invalid.append(f"trial {key[0]} stage {key[2]} is invalid: {reason}")
        if invalid:
            raise StageInvalid("; ".join(invalid))


def _generators(ledger: StageLedger) -> dict[str, GeneratorUse]:
    """Load generator -> its CPU seconds, wall seconds and mean cores used while sending the stage, and
    what its stall monitor saw (``stalls``, where it sent that)."""
    out: dict[str, GeneratorUse] = {}
    for member, (cpu_s, wall_s) in sorted(ledger.usage.items()):
        stalls = {"stalls": ledger.stalls[member]} if member in ledger.stalls else {}
        out[member] = GeneratorUse(cpu_s=cpu_s, wall_s=wall_s, cores=cpu_s / wall_s if wall_s > 0 else 0.0, **stalls)
    return out


def _arrivals(assignment: StageAssignment) -> dict[str, int | None]:
    """Class -> the stage's open-loop arrival count (the sequence every load generator draws), None if closed."""
    return {name: len(arrival_offsets(load.arrival, load.load, assignment.duration_s, assignment.seed, name,
                                      assignment.stage))
            if load.arrival in OPEN_LOOP else None for name, load in assignment.classes.items()}
