"""A stage's disruption while its load goes on: begun ``at_s`` into the stage, waited for at its end.

The scenario's disruption of the stage (a rollout restart, a restart, a kill, a drain, a node failure) is
carried out by the backend in its own greenlet, so arrivals keep their schedule. Every step is a
``disruption`` event in the store; one that had not begun when the stage ended, or that outlived its bound,
says so there. A backend that starts a server anew asks ``probe`` whether it answers the class's own request
(run/readiness.py's rule). At the stage's end the backend puts back what it changed (``end_disruption``)
whatever happened.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import gevent

from bench_plugin.results.recorder import Recorder
from bench_plugin.results.samples import Sample
from bench_plugin.results.timeline import Disruption
from bench_plugin.run.schedule import Trial
from bench_plugin.scenario import Scenario
from bench_plugin.sharing.base import ApplyError, SharingBackend

logger = logging.getLogger(__name__)


Probe = Callable[[str, str], Sample]
"""Sends class ``name`` its readiness request at ``url`` now; the sample (Conductor.probe_at)."""


class StageDisruption:
    """The scenario's disruption of one stage, under way in its own greenlet."""

    def __init__(self, scenario: Scenario, backend: SharingBackend, recorder: Recorder, trial: Trial, segment: int,
                 index: int, targets: list[str], start_s: float, probe: Probe) -> None:
        spec = scenario.disruption_of(index)
        assert spec is not None
        self.probe = probe
        self.scenario, self.spec, self.backend, self.recorder = scenario, spec, backend, recorder
        self.trial, self.segment, self.index, self.targets = trial, segment, index, targets
        self.began = False
        """Whether the backend was told to act (the stage may end before ``at_s``)."""
        self.greenlet = gevent.spawn_later(max(0.0, start_s + spec.at_s - time.time()), self._act)

    @classmethod
    def begin(cls, scenario: Scenario, backend: SharingBackend, recorder: Recorder, trial: Trial, segment: int,
              index: int, classes: list[str], start_s: float, probe: Probe) -> StageDisruption | None:
        """The disruption of stage ``index`` of ``trial`` begun, or None where the scenario has none for it."""
        spec = scenario.disruption_of(index)
        if spec is None or not spec.hits(trial.arm.name):
            return None
        targets = [name for name in classes if spec.classes is None or name in spec.classes]
        if not targets:
            return None
        return cls(scenario, backend, recorder, trial, segment, index, targets, start_s, probe)

    def record(self, **detail: Any) -> None:
        """One ``disruption`` event of this stage in the store."""
        self.recorder.note(Disruption(segment=self.segment, stage=self.index, disruption=self.spec.kind,
                                      at_s=self.spec.at_s, **detail), self.trial.id)

    def _act(self) -> None:
        self.began = True
        try:
            self.backend.disrupt(self.spec, self.targets, self.record, self.probe)
        except ApplyError as exc:
            logger.error("trial %d stage %d: disruption %s: %s", self.trial.id, self.index, self.spec.kind, exc)
            self.record(action="error", target=",".join(self.targets), result=str(exc))

    def end(self, stopped: bool) -> None:
        """Wait (bounded) for the disruption to finish, unless the run was ``stopped``; then have the backend
        put the nodes back."""
        spec, greenlet = self.spec, self.greenlet
        if not self.began:
            greenlet.kill()
            self.record(action="start", target="", result="not started: the stage ended first")
        elif not stopped:
            section = self.scenario.kubernetes
            bound = (2 * spec.command_timeout_s + (spec.rejoin_after_s or 0.0) + spec.eviction_timeout_s
                     + 2 * (section.rollout_timeout_s if section else 300.0) + 10.0)
            if section is None:  # local: per class, the old server's drain and the new one's readiness
                bound = len(self.targets) * (spec.grace_s + self.scenario.readiness_timeout_s + 30.0)
            greenlet.join(timeout=bound)
        if not greenlet.dead:
            greenlet.kill()
            self.record(action="stopped", target="", result="stopped before it finished")
        self.backend.end_disruption()
