"""Conductor: runs a campaign's trials in order on the master (or local runner).

Per trial: apply the arm (segment by segment), wait until every endpoint answers a real request,
run the stages (announcing each to the users, watching the rollback conditions), drain what is in
flight, release the servers. Every step lands in the recorder as it happens, so a failure or
Ctrl-C at any point leaves everything measured before it, plus the reason, in results.sqlite.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import gevent

from bench_plugin.campaign import Trial
from bench_plugin.events import BenchEvents
from bench_plugin.inputs import RequestSet
from bench_plugin.readiness import NotReady, wait_until_ready
from bench_plugin.recorder import Recorder
from bench_plugin.rollback import RollbackGuard, StageTally
from bench_plugin.samples import Sample
from bench_plugin.scenario import LLMClass, Scenario
from bench_plugin.sharing.base import ApplyError, SharingBackend
from bench_plugin.users.state import ClassLoad, StageAssignment

logger = logging.getLogger(__name__)

LEAD_S = 0.25
"""A stage starts this long after it is announced, so every worker has it before its first arrival."""


class CampaignFailed(Exception):
    """The campaign could not go on (an arm did not apply, an endpoint never became ready)."""


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
        announce: Callable[[StageAssignment], None],
        stop_stage: Callable[[tuple[int, int, int]], None],
        in_flight: Callable[[], int],
    ) -> None:
        self.scenario = scenario
        self.class_names = class_names
        self.trials = trials
        self.backend = backend
        self.recorder = recorder
        self.request_sets = request_sets
        self.events = events
        self.announce = announce
        self.stop_stage = stop_stage
        self.in_flight = in_flight
        self.guard = RollbackGuard(scenario)
        self.tally: StageTally | None = None
        self.status = "running"
        self.reason: str | None = None
        self.finished = False

    def on_sample(self, sample: Sample) -> None:
        """Take one finished request (from local users or a worker's report)."""
        self.recorder.add_samples([sample])
        if self.tally is not None:
            self.tally.add(sample)

    def run(self) -> None:
        """Run every trial; sets ``status`` to completed, failed or interrupted."""
        try:
            for trial in self.trials:
                self._trial(trial)
            self.status = "completed"
        except CampaignFailed as exc:
            self.status, self.reason = "failed", str(exc)
        except gevent.GreenletExit:
            self.status, self.reason = "interrupted", "the run was stopped (Ctrl-C or a stop signal)"
            raise
        finally:
            self.backend.restore()
            self.recorder.commit()
            self.recorder.set_meta("status", {"status": self.status, "reason": self.reason, "ended_s": time.time()})
            self.finished = True

    def _trial(self, trial: Trial) -> None:
        self.recorder.trial_started(trial.id)
        self.recorder.event("trial_start", trial.id, arm=trial.arm.name, repeat=trial.repeat)
        self.events.trial_start.fire(trial=trial)
        status, reason = "completed", None
        try:
            for segment, classes in enumerate(self.backend.segments(trial.arm, self.class_names)):
                self._segment(trial, segment, classes)
        except (ApplyError, NotReady) as exc:
            status, reason = "failed", str(exc)
            raise CampaignFailed(f"trial {trial.id} (arm {trial.arm.name}, repeat {trial.repeat}): {exc}") from None
        except gevent.GreenletExit:
            status, reason = "interrupted", "the run was stopped"
            raise
        finally:
            self.backend.release()
            self.recorder.trial_ended(trial.id, status, reason)
            self.recorder.event("trial_stop", trial.id, status=status, reason=reason)
            self.events.trial_stop.fire(trial=trial, status=status, reason=reason)

    def _segment(self, trial: Trial, segment: int, classes: list[str]) -> None:
        placement = self.backend.apply(trial.arm, classes, trial.id, segment)
        self.recorder.segment_applied(trial.id, segment, classes, placement.to_dict())
        self.recorder.event("arm_applied", trial.id, segment=segment, placement=placement.to_dict())
        ready = wait_until_ready(
            self.scenario, placement, self.request_sets, self.scenario.readiness_timeout_s, died=self.backend.exited
        )
        self.recorder.segment_ready(trial.id, segment, ready)
        for name, t in ready.items():
            self.recorder.event("ready", trial.id, segment=segment, workload=name, t=t)
        self.events.arm_applied.fire(trial=trial, segment=segment, placement=placement.to_dict(), ready=ready)
        urls = {name: placement.classes[name].url for name in classes}
        rolled_back: int | None = None
        for index in range(len(self.scenario.stages)):
            if rolled_back is not None:
                self._skip(trial, segment, classes, index, f"stage {rolled_back} was rolled back")
                continue
            if self._stage(trial, segment, classes, index, urls) == "aborted":
                rolled_back = index
        self._drain(trial, segment)
        self.backend.release()
        self.recorder.segment_released(trial.id, segment)
        self.recorder.event("released", trial.id, segment=segment)

    def _class_load(self, name: str, url: str, load: float) -> ClassLoad:
        spec = self.scenario.classes.get(name)
        options: dict[str, Any] = {}
        if isinstance(spec, LLMClass):
            options = {"api": spec.api, "fixed_output": spec.fixed_output}
        return ClassLoad(url=url, model=spec.model, arrival=spec.arrival, load=load,
                         timeout_s=spec.request_timeout_s, max_in_flight=spec.max_in_flight, options=options)

    def _offered(self, classes: list[str], index: int) -> tuple[dict[str, float], dict[str, str]]:
        stage = self.scenario.stages[index]
        offered = {name: float(stage.load[name]) for name in classes}  # type: ignore[index]
        arrival: dict[str, str] = {name: self.scenario.classes.get(name).arrival for name in classes}
        return offered, arrival

    def _skip(self, trial: Trial, segment: int, classes: list[str], index: int, reason: str) -> None:
        offered, arrival = self._offered(classes, index)
        name = self.scenario.stages[index].name
        self.recorder.stage_skipped(trial.id, segment, index, name, offered, arrival, reason)

    def _stage(self, trial: Trial, segment: int, classes: list[str], index: int, urls: dict[str, str]) -> str:
        stage = self.scenario.stages[index]
        offered, arrival = self._offered(classes, index)
        start = time.time() + LEAD_S
        assignment = StageAssignment(
            trial=trial.id, segment=segment, stage=index, start_s=start, end_s=start + stage.duration_s,
            seed=self.scenario.seed,
            classes={name: self._class_load(name, urls[name], offered[name]) for name in classes},
        )
        self.tally = StageTally(assignment.key)
        self.recorder.stage_started(trial.id, segment, index, stage.name, offered, arrival, start)
        self.recorder.event("stage_start", trial.id, segment=segment, stage=index, offered=offered)
        self.events.stage_start.fire(trial=trial, segment=segment, stage=index, offered=offered)
        self.announce(assignment)
        status, reason = "completed", None
        try:
            reason = self._watch(assignment)
            if reason is not None:
                status = "aborted"
                self.stop_stage(assignment.key)
                logger.warning("trial %d stage %d rolled back: %s", trial.id, index, reason)
        except gevent.GreenletExit:
            status, reason = "interrupted", "the run was stopped during this stage"
            self.stop_stage(assignment.key)
            raise
        finally:
            ended = min(time.time(), assignment.end_s)
            self.recorder.stage_ended(trial.id, segment, index, ended, status, reason)
            self.recorder.event("stage_end", trial.id, segment=segment, stage=index, status=status, reason=reason)
            self.events.stage_end.fire(trial=trial, segment=segment, stage=index, status=status, reason=reason)
            self.tally = None
        return status

    def _watch(self, assignment: StageAssignment) -> str | None:
        """Sleep through the stage, checking the rollback conditions twice a second."""
        while (remaining := assignment.end_s - time.time()) > 0:
            gevent.sleep(min(0.5, remaining))
            assert self.tally is not None
            reason = self.guard.check(self.tally)
            if reason is not None:
                return reason
        return None

    def _drain(self, trial: Trial, segment: int) -> None:
        """Wait for requests still in flight before the servers go; count the stragglers if they don't."""
        deadline = time.time() + self.scenario.drain_timeout_s
        while self.in_flight() > 0 and time.time() < deadline:
            gevent.sleep(0.05)
        left = self.in_flight()
        if left:
            self.recorder.event("drain_timeout", trial.id, segment=segment, in_flight=left)
            logger.warning("trial %d: %d requests still in flight after the drain timeout", trial.id, left)
        self.recorder.commit()
