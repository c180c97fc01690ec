"""Pod events: what the cluster did to a workload pod, as typed records, from the API's own objects.

``PodTimeline`` turns each Pod object and each core/v1 Event a watch delivers (JSON form, camelCase
keys) into the transitions that are new, once each. What each kind is read from, in Kubernetes 1.34
and kwok 0.8 (observed on the test cluster, docs/kubernetes-test-cluster.md):

============== =========================================================================================
kind           source and time
============== =========================================================================================
created        the pod's ``metadata.creationTimestamp``
scheduled      condition PodScheduled=True (its ``lastTransitionTime``), ``spec.nodeName``, and what the
               pod asks of each extended resource (nvidia.com/gpu, nvidia.com/gpu.shared, MIG profiles)
failed_scheduling  Event reason FailedScheduling (default-scheduler): the scheduler's message, e.g.
               ``0/1 nodes are available: 1 Insufficient nvidia.com/gpu. ...``; one per attempt
               reported (``eventTime``, then ``series.lastObservedTime`` for repeats)
preempted      Event reason Preempted on the victim: ``Preempted by pod <uid> on node <node>``
preempting     the same Event seen from the preemptor: a watched pod's uid is ``<uid>`` while the victim
               is not watched (the cluster's other work); the message names the victim and the node
started        every container ``state.running`` (the latest ``startedAt``)
ready          condition Ready turned True
not_ready      condition Ready turned False after being True (probe failing, node lost)
evicted        condition DisruptionTarget=True with any reason but PreemptionByScheduler:
               EvictionByEvictionAPI (a drain), DeletionByTaintManager, TerminationByKubelet,
               DeletionByPodGC; the message is ``<reason>: <message>``
killing        Event reason Killing (a real kubelet's ``Stopping container <name>``; kwok sends none)
deleted        ``metadata.deletionTimestamp`` less ``deletionGracePeriodSeconds``: when deletion was asked
============== =========================================================================================

A drain through the eviction API leaves no Event in 1.34: the API server adds DisruptionTarget
(``EvictionByEvictionAPI: Eviction API: evicting``) and deletes the pod with its grace period; a
kubelet then records Killing, kwok deletes the pod at once. A preemption also adds DisruptionTarget
(``PreemptionByScheduler``); the victim's Preempted Event is used instead, as it names the preemptor.

Times are the cluster's own. Event times have microseconds (``eventTime``; ``firstTimestamp`` and
``lastTimestamp`` of older recorders are whole seconds); a pod's own timestamps (creation, conditions,
container start, deletion) are whole seconds, cut down. So a Pending time (scheduled - created) is
good to a second, and within one second an Event may sort after a pod transition that followed it
(or before one it followed: the scheduler deletes a victim, then records Preempted). They are kept
as the cluster wrote them rather than guessed finer; the local clock dates only a pod gone without a
deletion time in its last state, or gone while a watch was away (absent from the list made again; a
pod whose labels stop matching the selector looks the same, and counts as deleted).

Each transition is recorded once: a relist after an expired watch, or a list overlapping a watch,
gives nothing new, and so do identical Events the scheduler records twice. An Event whose pod has not
been seen yet is held until the pod shows up (events and pods come on separate watches); Events of
pods never seen (pods without the watched labels) are never recorded, except a Preempted Event whose
preemptor is a watched pod: that is the watched pod's ``preempting``, the preemption as the arm did it.
"""

from __future__ import annotations

import datetime as dt
import re
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from bench_plugin.results.pod_events import PodEvent
from bench_plugin.sharing.kubernetes.semantics import Json, format_amount, pod_requests

CLASS_LABEL = "bench-plugin/class"
"""The label that names a pod's workload class (llm, embedding, asr)."""
EVENT_KINDS: Mapping[str, str] = {"FailedScheduling": "failed_scheduling", "Preempted": "preempted",
                                  "Killing": "killing"}
"""Event reason -> kind; other Events (Scheduled, Pulled, Started...) repeat what the pod object says."""
PREEMPTED_BY_SCHEDULER = "PreemptionByScheduler"
ONCE: frozenset[str] = frozenset({"created", "scheduled", "started", "preempted", "evicted", "deleted"})
"""Kinds a pod goes through at most once."""
HELD_EVENTS = 2000
"""Events held for pods not seen yet; past this the oldest are dropped (a namespace busy with other pods)."""


def parse_time(value: str | None) -> float | None:
    """An RFC 3339 API time (``2026-12-01T15:59:29Z``, ``...T16:02:09.007682Z``) as epoch seconds; None if absent."""
    if not value:
        return None
    try:
        return dt.datetime.fromisoformat(value).timestamp()
    except ValueError:
        return None


_AVAILABLE = re.compile(r"^0/\d+ nodes are available:\s*(.*)$", re.S)
_POST_FILTER = re.compile(r"\.?\s*(?:no new claims to deallocate, )?preemption:", re.S)
_COUNT = re.compile(r"^\d+\s+")


def scheduling_reasons(message: str) -> list[str]:
    """The filter reasons of a FailedScheduling message, without node counts, in the scheduler's order.

    ``0/3 nodes are available: 1 Insufficient nvidia.com/gpu, 2 node(s) didn't match Pod's node
    affinity/selector. preemption: ...`` gives ``["Insufficient nvidia.com/gpu", "node(s) didn't match
    Pod's node affinity/selector"]`` (the scheduler's FitError: a pre-filter sentence, the histogram of
    filter reasons, then the preemption outcome, which is left out). Another message is its own reason.
    """
    found = _AVAILABLE.match(message.strip())
    if not found:
        return [message.strip().rstrip(".")] if message.strip() else []
    body = _POST_FILTER.split(found.group(1), maxsplit=1)[0].strip().rstrip(".")
    reasons: list[str] = []
    for sentence in body.split(". "):
        for item in sentence.split(", "):
            reason = _COUNT.sub("", item.strip()).rstrip(".")
            if reason and reason not in reasons:
                reasons.append(reason)
    return reasons


def preemptor_uid(message: str | None) -> str | None:
    """The preemptor's uid in ``Preempted by pod <uid> on node <node>``, or None."""
    found = re.match(r"Preempted by pod (\S+) on node", message or "")
    return found.group(1) if found else None


def _condition(pod: Json, kind: str) -> Json | None:
    return next((c for c in (pod.get("status") or {}).get("conditions") or [] if c.get("type") == kind), None)


def _one_line(*parts: Any) -> str | None:
    text = ": ".join(str(p) for p in parts if p)
    return " ".join(text.split()) or None


@dataclass
class _Pod:
    name: str
    workload: str | None
    node: str | None = None
    ready: bool | None = None
    """The Ready condition last seen (None: not yet seen)."""


class PodTimeline:
    """The watch's memory: which transitions of which pods were recorded, and Events waiting for their pod.

    ``pod(obj)`` and ``event(obj)`` return the PodEvents that are new. ``clock`` gives the time of a
    pod that is gone without a deletion time (the only time that is not the cluster's).
    """

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self._pods: dict[str, _Pod] = {}
        self._seen: set[tuple[Any, ...]] = set()
        self._counts: dict[str, int] = {}
        self._held: OrderedDict[str, list[Json]] = OrderedDict()
        self._held_count = 0

    def known(self, uid: str) -> bool:
        """Whether pod ``uid`` was seen (it has the watched labels)."""
        return uid in self._pods

    @staticmethod
    def _when(value: str | None, less_s: float = 0.0) -> float | None:
        t = parse_time(value)
        return None if t is None else t - less_s

    def _new(self, uid: str, kind: str, t: float | None, *, key: Any = None, **fields: Any) -> list[PodEvent]:
        if t is None:
            return []
        mark = (uid, kind) if kind in ONCE else (uid, kind, key if key is not None else t, fields.get("message"))
        if mark in self._seen:
            return []
        self._seen.add(mark)
        info = self._pods[uid]
        fields.setdefault("node", info.node)
        return [PodEvent(t=t, kind=kind, pod=info.name, uid=uid, workload=info.workload, **fields)]

    def pod(self, obj: Json, deleted: bool = False) -> list[PodEvent]:
        """The new transitions a Pod object shows (``deleted``: it came as a watch DELETED), then held Events."""
        meta = obj.get("metadata") or {}
        uid = str(meta.get("uid") or "")
        if not uid:
            return []
        spec = obj.get("spec") or {}
        info = self._pods.setdefault(uid, _Pod(str(meta.get("name", "")), (meta.get("labels") or {}).get(CLASS_LABEL)))
        info.node = spec.get("nodeName") or info.node
        out = self._new(uid, "created", self._when(meta.get("creationTimestamp")))
        out += self._scheduled(uid, obj)
        out += self._started(uid, obj)
        out += self._readiness(uid, obj)
        disruption = _condition(obj, "DisruptionTarget")
        if disruption and disruption.get("status") == "True" and disruption.get("reason") != PREEMPTED_BY_SCHEDULER:
            out += self._new(uid, "evicted", self._when(disruption.get("lastTransitionTime")),
                             reason=disruption.get("reason"),
                             message=_one_line(disruption.get("reason"), disruption.get("message")))
        out += self._deleted(uid, meta, deleted)
        held = self._held.pop(uid, [])
        self._held_count -= len(held)
        for waiting in held:
            out += self.event(waiting)
        return out

    def _scheduled(self, uid: str, obj: Json) -> list[PodEvent]:
        spec = obj.get("spec") or {}
        node = spec.get("nodeName")
        if not node:
            return []
        condition = _condition(obj, "PodScheduled")
        if condition is not None and condition.get("status") != "True":
            return []
        at = condition.get("lastTransitionTime") if condition else None
        message = None if condition else "spec.nodeName was set: no scheduler placed it"
        at = at or (obj.get("metadata") or {}).get("creationTimestamp")
        requests = {name: format_amount(amount) for name, amount in sorted(pod_requests(spec).items())}
        return self._new(uid, "scheduled", self._when(at), node=node, message=message, requests=requests)

    def _started(self, uid: str, obj: Json) -> list[PodEvent]:
        statuses = (obj.get("status") or {}).get("containerStatuses") or []
        started = [((s.get("state") or {}).get("running") or {}).get("startedAt") for s in statuses]
        if not statuses or not all(started):
            return []
        return self._new(uid, "started", self._when(max(str(s) for s in started)))

    def _readiness(self, uid: str, obj: Json) -> list[PodEvent]:
        info = self._pods[uid]
        condition = _condition(obj, "Ready")
        if condition is None:
            return []
        ready = condition.get("status") == "True"
        was, info.ready = info.ready, ready
        at = self._when(condition.get("lastTransitionTime"))
        if ready and was is not True:
            return self._new(uid, "ready", at)
        if not ready and was is True:
            return self._new(uid, "not_ready", at, reason=condition.get("reason"),
                             message=_one_line(condition.get("reason"), condition.get("message")))
        return []

    def _deleted(self, uid: str, meta: Json, deleted: bool) -> list[PodEvent]:
        grace = meta.get("deletionGracePeriodSeconds")
        at = self._when(meta.get("deletionTimestamp"), float(grace or 0))
        if at is not None:
            return self._new(uid, "deleted", at, message=f"grace period {grace} s" if grace is not None else None)
        if deleted:  # gone without a deletion time in its last state: when the watch saw it go
            return self._new(uid, "deleted", self.clock(), message="gone (its last state had no deletion time)")
        return []

    def missing(self, listed: set[str]) -> list[PodEvent]:
        """Pods known but absent from a new list (gone while a watch was away): deleted, when seen gone."""
        out: list[PodEvent] = []
        for uid in sorted(set(self._pods) - listed):
            if (uid, "deleted") not in self._seen:
                out += self._new(uid, "deleted", self.clock(), message="gone while the watch was away")
        return out

    def event(self, obj: Json) -> list[PodEvent]:
        """The new occurrences an Event about a pod reports; held (and [] now) while its pod is unknown."""
        involved = obj.get("involvedObject") or obj.get("regarding") or {}
        kind = EVENT_KINDS.get(str(obj.get("reason")))
        uid = str(involved.get("uid") or "")
        if involved.get("kind") != "Pod" or kind is None or not uid:
            return []
        if uid not in self._pods:
            by = preemptor_uid(obj.get("message")) if kind == "preempted" else None
            if by is not None and by in self._pods:
                return self._preempting(by, obj, involved)
            for waiting in {uid, by} - {None}:  # its pod, or a preemptor of ours, may show up later
                self._hold(str(waiting), obj)
            return []
        meta = obj.get("metadata") or {}
        series = obj.get("series") or {}
        count = int(series.get("count") or obj.get("count") or 1)
        key = str(meta.get("uid") or meta.get("name") or "")
        before = self._counts.get(key, 0)
        if count <= before:
            return []
        self._counts[key] = count
        message = _one_line(obj.get("message"))
        node = self._pods[uid].node
        if kind == "preempted":
            found = re.search(r" on node (\S+)", message or "")
            node = found.group(1) if found else node
        first = self._when(obj.get("eventTime") or obj.get("firstTimestamp") or obj.get("lastTimestamp")
                           or meta.get("creationTimestamp"))
        last = self._when(series.get("lastObservedTime") or obj.get("lastTimestamp")) or first
        out: list[PodEvent] = []
        if before == 0:
            out += self._new(uid, kind, first, reason=obj.get("reason"), message=message, node=node)
        repeats = count - max(before, 1)
        if repeats > 0:
            out += self._new(uid, kind, last, key=(key, count), reason=obj.get("reason"), message=message,
                             node=node, count=repeats)
        return out

    def _preempting(self, by: str, obj: Json, involved: Json) -> list[PodEvent]:
        """Watched pod ``by`` preempted the unwatched pod an Event is about (its Preempted Event)."""
        meta = obj.get("metadata") or {}
        found = re.search(r" on node (\S+)", str(obj.get("message") or ""))
        node = found.group(1) if found else self._pods[by].node
        victim = f"{involved.get('namespace') or ''}/{involved.get('name') or ''}".strip("/")
        return self._new(by, "preempting", self._when(obj.get("eventTime") or obj.get("firstTimestamp")
                                                      or obj.get("lastTimestamp") or meta.get("creationTimestamp")),
                         key=victim, reason="Preempted", message=f"preempted pod {victim} on node {node}", node=node)

    def _hold(self, uid: str, obj: Json) -> None:
        self._held.setdefault(uid, []).append(obj)
        self._held.move_to_end(uid)
        self._held_count += 1
        while self._held_count > HELD_EVENTS:
            self._held_count -= len(self._held.popitem(last=False)[1])
