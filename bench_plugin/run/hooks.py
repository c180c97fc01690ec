"""The plugin's own hooks, declared the way locust/event.py declares Locust's.

Each fires on the master (or the local runner) only, in this order per trial: ``trial_start``, then
per segment ``arm_applied`` and per stage ``stage_start`` / ``stage_end``, then ``trial_stop``.
Listeners get keyword arguments; an exception in a listener is logged by Locust's EventHook and
does not stop the campaign, so never use a listener to veto anything. Each hook fires from
run/moments.py, after the moment's row and timeline entry are in the store.
"""

from __future__ import annotations

from locust.event import EventHook


class BenchEvents:
    """The hooks of one campaign; reachable as ``environment.bench_plugin_events`` after register()."""

    trial_start: EventHook
    """
    Fired before a trial's arm is applied.

    :param trial: the bench_plugin.run.schedule.Trial
    """

    arm_applied: EventHook
    """
    Fired once the backend applied the arm for a segment and every endpoint answered a real request.

    :param trial: the Trial
    :param segment: segment index within the trial (classes measured together)
    :param placement: dict, where each class runs (URL, device, PID, ...)
    :param ready: dict, class -> epoch seconds when it first answered
    """

    stage_start: EventHook
    """
    Fired when a stage's arrivals begin.

    :param trial: the Trial
    :param segment: segment index
    :param stage: stage index
    :param offered: dict, class -> offered load (req/s, or users if closed-loop)
    :param name: the stage's name, or None
    :param start_s: epoch seconds of its first possible arrival
    :param end_s: epoch seconds when its arrivals end
    """

    stage_end: EventHook
    """
    Fired when a stage ends.

    :param trial: the Trial
    :param segment: segment index
    :param stage: stage index
    :param status: completed, aborted (rollback) or interrupted
    :param reason: why it did not complete, or None
    """

    trial_stop: EventHook
    """
    Fired when a trial ends, after its servers were released.

    :param trial: the Trial
    :param status: completed, failed or interrupted
    :param reason: why it did not complete, or None
    """

    def __init__(self) -> None:
        for name, value in BenchEvents.__annotations__.items():
            if value == "EventHook":
                setattr(self, name, EventHook())
