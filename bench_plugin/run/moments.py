"""Moments: each moment of a run said once, as its row, its timeline entry and its hook, in that order.

A moment of a trial (it starts, its arm is applied, its servers are ready, a stage starts or ends,
its servers are released, it stops) is recorded in three places: the store's row for it (trials,
segments, stages), the timeline (a declared kind of results/timeline.py) and, where the plugin has
one, its hook (run/hooks.py). One call here does all three, always in this order:

1. the row, so that a listener reading the store from the hook finds the moment there;
2. the timeline entry;
3. the hook, last, so that a listener that fails (Locust's EventHook logs it) loses nothing recorded.

A write that fails (StoreWriteError) stops there: no entry or hook then says that something
happened which the store does not hold. Per trial the moments come in the order of run/hooks.py:
``trial_started``, then per segment ``segment_applied``, ``segment_ready`` (the ``arm_applied`` hook),
``segment_warmed``, per stage ``stage_started`` and ``stage_ended``, ``segment_released``; and last
``trial_ended``, after the backend released the servers.
"""

from __future__ import annotations

from collections.abc import Mapping

from bench_plugin.results.placement import Placement
from bench_plugin.results.recorder import Recorder
from bench_plugin.results.timeline import (
    ArmApplied,
    Ready,
    Released,
    StageEnd,
    StageStart,
    TrialStart,
    TrialStop,
    WarmupEnd,
    WarmupStart,
)
from bench_plugin.run.hooks import BenchEvents
from bench_plugin.run.schedule import Trial
from bench_plugin.run.warmup import ClassWarmup


class Moments:
    """Says each moment of a campaign's trials: row, timeline entry, hook (see the module docstring)."""

    def __init__(self, recorder: Recorder, events: BenchEvents) -> None:
        self.recorder = recorder
        self.events = events

    def trial_started(self, trial: Trial) -> None:
        """A trial begins, before its arm is applied."""
        self.recorder.trial_started(trial.id)
        self.recorder.note(TrialStart(arm=trial.arm.name, repeat=trial.repeat), trial.id)
        self.events.trial_start.fire(trial=trial)

    def segment_applied(self, trial: Trial, segment: int, classes: list[str], placement: Placement) -> None:
        """The backend applied the arm for ``classes`` (no hook yet: ``arm_applied`` waits for readiness)."""
        self.recorder.segment_applied(trial.id, segment, classes, placement)
        self.recorder.note(ArmApplied(segment=segment, placement=placement.classes), trial.id)

    def segment_ready(self, trial: Trial, segment: int, placement: Placement, ready: Mapping[str, float],
                      protocol: Mapping[str, Mapping[str, str | None]]) -> None:
        """Every class answered its own real request (epoch seconds per class in ``ready``); ``protocol`` is what
        readiness found of a class's protocol (output_lengths, note), where it found anything."""
        self.recorder.segment_ready(trial.id, segment, dict(ready))
        if protocol:
            self.recorder.segment_protocol(trial.id, segment, protocol)
        for name, t in ready.items():
            self.recorder.note(Ready(segment=segment, workload=name, t=t, **protocol.get(name, {})), trial.id)
        self.events.arm_applied.fire(trial=trial, segment=segment, placement=placement.to_json(), ready=dict(ready))

    def segment_warming(self, trial: Trial, segment: int, requests: str) -> None:
        """The segment's unmeasured warm-up begins (timeline only: its row is written when it ends)."""
        self.recorder.note(WarmupStart(segment=segment, requests=requests), trial.id)

    def segment_warmed(self, trial: Trial, segment: int, done: Mapping[str, ClassWarmup]) -> None:
        """The warm-up ended: per class what it sent and how it went."""
        self.recorder.segment_warmed(trial.id, segment, done)
        self.recorder.note(WarmupEnd(segment=segment, classes={name: r.to_dict() for name, r in done.items()}),
                           trial.id)

    def stage_started(self, trial: Trial, segment: int, index: int, name: str | None, offered: dict[str, float],
                      arrival: dict[str, str], start_s: float, end_s: float, planned_s: float,
                      arrivals: Mapping[str, int | None]) -> None:
        """A stage's arrivals begin at ``start_s`` and end at ``end_s`` (``planned_s`` long, as the scenario says):
        its offered load per class."""
        self.recorder.stage_started(trial.id, segment, index, name, offered, arrival, start_s,
                                    planned_s=planned_s, arrivals=arrivals)
        self.recorder.note(StageStart(segment=segment, stage=index, offered=offered), trial.id)
        self.events.stage_start.fire(trial=trial, segment=segment, stage=index, offered=offered, name=name,
                                     start_s=start_s, end_s=end_s)

    def stage_ended(self, trial: Trial, segment: int, index: int, ended_s: float, status: str,
                    reason: str | None) -> None:
        """A stage ended (completed, aborted, invalid or interrupted), its samples committed with its row."""
        self.recorder.stage_ended(trial.id, segment, index, ended_s, status, reason)
        self.recorder.note(StageEnd(segment=segment, stage=index, status=status, reason=reason), trial.id)
        self.events.stage_end.fire(trial=trial, segment=segment, stage=index, status=status, reason=reason)

    def segment_released(self, trial: Trial, segment: int) -> None:
        """The segment's servers were released."""
        self.recorder.segment_released(trial.id, segment)
        self.recorder.note(Released(segment=segment), trial.id)

    def trial_ended(self, trial: Trial, status: str, reason: str | None) -> None:
        """A trial ended (completed, failed, invalid or interrupted), after its servers were released."""
        self.recorder.trial_ended(trial.id, status, reason)
        self.recorder.note(TrialStop(status=status, reason=reason), trial.id)
        self.events.trial_stop.fire(trial=trial, status=status, reason=reason)
