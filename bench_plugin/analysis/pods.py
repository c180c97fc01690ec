"""Pods: each workload pod's scheduling from what the cluster reported, and an arm's over its repeats.

A trial's PodEvents (recorded by the Kubernetes backend's pod watch, read through
results.store.CampaignReader.pod_events) give each pod (one per uid):

- ``created_s``, ``scheduled_s``, ``ready_s`` (Ready first turned True), ``deleted_s`` (deletion asked
  for), ``preempted_s``, ``evicted_s``: the time of its first event of that kind, the cluster's;
- ``pending_s``: ``scheduled_s - created_s``. A pod never scheduled was Pending from its creation
  until it was deleted, or until the trial ended (the last pod event where the trial never closed);
  ``pending_until`` says which. Pod timestamps are whole seconds, so this is good to a second;
- ``failed_scheduling``: each reason of the scheduler's FailedScheduling messages (its filter reasons,
  node counts left out: ``Insufficient nvidia.com/gpu``) -> the attempts that gave it;
- ``preempted_by``: the preemptor named in ``Preempted by pod <uid> on node <node>``, by pod name where
  the watch saw it too.

Per arm (the trials whose pods were watched): per trial the longest ``pending_s`` of its pods (and of
each class's pods), its spread over repeats and the longest of all; the distinct FailedScheduling
reasons with their attempts; how many pods were preempted and evicted. docs/analysis.md, "Scheduling".
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from bench_plugin.analysis.statistics import spread
from bench_plugin.results.pod_events import PodEvent, in_order
from bench_plugin.results.summary import ArmPods, PendingTime, PodSummary, TrialSummary
from bench_plugin.scenario import class_rank
from bench_plugin.sharing.kubernetes.podevents import preemptor_uid, scheduling_reasons

__all__ = ["arm_pods", "pod_summaries"]


def _first(events: Sequence[PodEvent], kind: str) -> PodEvent | None:
    return next((e for e in events if e.kind == kind), None)


def _t(event: PodEvent | None) -> float | None:
    return event.t if event is not None else None


def pod_summaries(events: Sequence[PodEvent], trial_end_s: float | None) -> list[PodSummary]:
    """One summary per pod of a trial's ``events``, in order of creation; ``trial_end_s`` ends open Pending."""
    ordered = in_order(list(events))
    by_uid: dict[str, list[PodEvent]] = {}
    for event in ordered:
        by_uid.setdefault(event.uid, []).append(event)
    names = {uid: mine[0].pod for uid, mine in by_uid.items()}
    end = trial_end_s if trial_end_s is not None else (ordered[-1].t if ordered else None)
    pods = [_pod(uid, mine, names, end) for uid, mine in by_uid.items()]
    return sorted(pods, key=lambda p: (p.created_s if p.created_s is not None else float("inf"),
                                       class_rank(p.workload), p.pod, p.uid))


def _pod(uid: str, events: list[PodEvent], names: dict[str, str], end: float | None) -> PodSummary:
    created, scheduled, deleted = (_first(events, k) for k in ("created", "scheduled", "deleted"))
    preempted, evicted = _first(events, "preempted"), _first(events, "evicted")
    reasons: Counter[str] = Counter()
    for event in events:
        if event.kind == "failed_scheduling":
            for reason in scheduling_reasons(event.message or ""):
                reasons[reason] += event.count
    start = _t(created)
    pending_s, until = None, None
    if start is not None:
        if scheduled is not None:
            pending_s, until = scheduled.t - start, "scheduled"
        elif deleted is not None:
            pending_s, until = deleted.t - start, "deleted"
        elif end is not None:
            pending_s, until = end - start, "trial end"
        pending_s = max(pending_s, 0.0) if pending_s is not None else None
    preemptor = preemptor_uid(preempted.message) if preempted is not None else None
    first_failure = _first(events, "failed_scheduling")
    return PodSummary(
        pod=events[0].pod, uid=uid, workload=next((e.workload for e in events if e.workload), None),
        node=scheduled.node if scheduled is not None else next((e.node for e in events if e.node), None),
        requests=dict(scheduled.requests) if scheduled is not None else {},
        created_s=start, scheduled_s=_t(scheduled), ready_s=_t(_first(events, "ready")), deleted_s=_t(deleted),
        pending_s=pending_s, pending_until=until,
        failed_scheduling=dict(sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))),
        first_failed_scheduling=first_failure.message if first_failure is not None else None,
        preempted_s=_t(preempted), preempted_by=names.get(preemptor, preemptor) if preemptor else None,
        evicted_s=_t(evicted), evicted=evicted.message if evicted is not None else None,
        preempting=[e.message for e in events if e.kind == "preempting" and e.message],
    )


def _pending(per_trial: list[float | None]) -> PendingTime:
    kept = [v for v in per_trial if v is not None]
    return PendingTime(spread=spread(kept), max_s=max(kept) if kept else None)


def _longest(pods: Sequence[PodSummary]) -> float | None:
    values = [p.pending_s for p in pods if p.pending_s is not None]
    return max(values) if values else None


def arm_pods(trials: Sequence[TrialSummary]) -> ArmPods | None:
    """An arm's scheduling over the ``trials`` (its repeats) whose pods were watched; None where none was."""
    watched = [t for t in trials if t.pods is not None]
    if not watched:
        return None
    named = {p.workload for t in watched for p in t.pods or [] if p.workload}
    classes = sorted(named, key=lambda c: (class_rank(c), c))
    reasons: Counter[str] = Counter()
    for trial in watched:
        for pod in trial.pods or []:
            reasons.update(pod.failed_scheduling)
    every = [p for t in watched for p in t.pods or []]
    return ArmPods(
        trials=len(watched),
        pending=_pending([_longest(t.pods or []) for t in watched]),
        classes={c: _pending([_longest([p for p in t.pods or [] if p.workload == c]) for t in watched])
                 for c in classes},
        reasons=dict(sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))),
        preempted=sum(1 for p in every if p.preempted_s is not None),
        evicted=sum(1 for p in every if p.evicted_s is not None),
        preempting=sum(len(p.preempting) for p in every),
    )
