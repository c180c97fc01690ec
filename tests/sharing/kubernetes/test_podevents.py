"""How Pod objects and Events become PodEvents (bench_plugin.sharing.kubernetes.podevents), on plain dicts.

The dicts are shaped as Kubernetes 1.34 and kwok 0.8 sent them to the test cluster's watches
(test_podwatch.py sees the same from the real control plane); the scheduler's messages are its own texts.
"""

from __future__ import annotations

from typing import Any

import pytest

from bench_plugin.results.pod_events import PodEvent, in_order
from bench_plugin.sharing.kubernetes.podevents import PodTimeline, parse_time, preemptor_uid, scheduling_reasons

TOO_BIG = ("0/1 nodes are available: 1 Insufficient nvidia.com/gpu. no new claims to deallocate, preemption: 0/1 "
           "nodes are available: 1 Preemption is not helpful for scheduling.")
T = parse_time("2026-12-01T15:59:29Z") or 0.0


def pod(uid: str = "u1", name: str = "bench-llm-0", **status: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"uid": uid, "name": name, "creationTimestamp": "2026-12-01T15:59:29Z",
                            "labels": {"bench-plugin/class": "llm"}}
    meta.update(status.pop("meta", {}))
    spec = {"containers": [{"name": "server", "resources": {"limits": {"nvidia.com/gpu": "1", "cpu": "2"}}}]}
    if status.pop("node", None):
        spec["nodeName"] = "gpu-a"
    return {"metadata": meta, "spec": spec, "status": status}


def condition(kind: str, status: str, at: str = "2026-12-01T15:59:30Z", **more: str) -> dict[str, str]:
    return {"type": kind, "status": status, "lastTransitionTime": at, **more}


def event(reason: str, message: str, uid: str = "u1", name: str = "e1", **more: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "uid": f"event-{name}"}, "reason": reason, "message": message,
            "involvedObject": {"kind": "Pod", "uid": uid, "name": "bench-llm-0"},
            "eventTime": "2026-12-01T15:59:29.075648Z", **more}


def kinds(events: list[PodEvent]) -> list[str]:
    return [e.kind for e in events]


@pytest.mark.parametrize(("message", "reasons"), [
    (TOO_BIG, ["Insufficient nvidia.com/gpu"]),
    ("0/1 nodes are available: 1 Insufficient nvidia.com/gpu.", ["Insufficient nvidia.com/gpu"]),
    ("0/3 nodes are available: 1 Insufficient nvidia.com/gpu, 2 node(s) didn't match Pod's node affinity/selector. "
     "preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, 2 Preemption is not "
     "helpful for scheduling.", ["Insufficient nvidia.com/gpu", "node(s) didn't match Pod's node affinity/selector"]),
    ("0/1 nodes are available: 1 node(s) were unschedulable. preemption: 0/1 nodes are available: 1 Preemption is "
     "not helpful for scheduling.", ["node(s) were unschedulable"]),
    ("0/2 nodes are available: 2 node(s) had untolerated taint {dedicated: llm}. preemption: not eligible due to "
     "a terminating pod on the nominated node.", ["node(s) had untolerated taint {dedicated: llm}"]),
    ("pod has unbound immediate PersistentVolumeClaims.", ["pod has unbound immediate PersistentVolumeClaims"]),
    ("", []),
])
def test_the_schedulers_reasons_without_node_counts(message: str, reasons: list[str]) -> None:
    assert scheduling_reasons(message) == reasons


def test_times_and_the_preemptor() -> None:
    assert parse_time("2026-12-01T16:02:09.007682Z") == pytest.approx(T + 160.007682)
    assert parse_time(None) is None and parse_time("yesterday") is None
    assert preemptor_uid("Preempted by pod c932341a-5455 on node gpu-a") == "c932341a-5455"
    assert preemptor_uid("something else") is None


def test_a_pod_from_creation_to_ready_each_transition_once() -> None:
    timeline = PodTimeline()
    assert kinds(timeline.pod(pod())) == ["created"]
    scheduled = timeline.pod(pod(node=True, conditions=[condition("PodScheduled", "True")]))
    assert kinds(scheduled) == ["scheduled"]
    assert scheduled[0].node == "gpu-a" and dict(scheduled[0].requests) == {"nvidia.com/gpu": "1"}  # no cpu
    running = pod(node=True, conditions=[condition("PodScheduled", "True"), condition("Ready", "True")],
                  containerStatuses=[{"state": {"running": {"startedAt": "2026-12-01T15:59:31Z"}}}])
    got = timeline.pod(running)
    assert kinds(got) == ["started", "ready"] and got[0].t == T + 2 and got[0].workload == "llm"
    assert timeline.pod(running) == []  # the same object again (a relist): nothing new


def test_readiness_that_comes_and_goes() -> None:
    timeline = PodTimeline()
    assert kinds(timeline.pod(pod(conditions=[condition("Ready", "False", reason="ContainersNotReady")]))) == [
        "created"]  # not ready before it ever was: nothing to say
    assert kinds(timeline.pod(pod(conditions=[condition("Ready", "True", "2026-12-01T15:59:40Z")]))) == ["ready"]
    lost = timeline.pod(pod(conditions=[condition("Ready", "False", "2026-12-01T15:59:50Z", reason="PodNotReady",
                                                  message="probe failed")]))
    assert kinds(lost) == ["not_ready"] and lost[0].message == "PodNotReady: probe failed" and lost[0].t == T + 21
    assert kinds(timeline.pod(pod(conditions=[condition("Ready", "True", "2026-12-01T15:59:55Z")]))) == ["ready"]


def test_an_eviction_and_its_deletion_time_less_the_grace_period() -> None:
    timeline = PodTimeline()
    timeline.pod(pod())
    evicting = pod(conditions=[condition("DisruptionTarget", "True", reason="EvictionByEvictionAPI",
                                         message="Eviction API: evicting")],
                   meta={"deletionTimestamp": "2026-12-01T16:00:05Z", "deletionGracePeriodSeconds": 30})
    got = timeline.pod(evicting)
    assert kinds(got) == ["evicted", "deleted"]
    assert got[0].message == "EvictionByEvictionAPI: Eviction API: evicting"
    assert got[1].t == T + 6 and got[1].message == "grace period 30 s"  # asked at 15:59:35
    # kwok then deletes it at once (grace 0): the deletion was asked for already
    assert timeline.pod(pod(meta={"deletionTimestamp": "2026-12-01T15:59:35Z", "deletionGracePeriodSeconds": 0}),
                        deleted=True) == []


def test_a_preempted_pods_disruption_is_told_by_its_preempted_event() -> None:
    timeline = PodTimeline()
    victim = pod(conditions=[condition("DisruptionTarget", "True", reason="PreemptionByScheduler")])
    assert kinds(timeline.pod(victim)) == ["created"]
    got = timeline.event(event("Preempted", "Preempted by pod u9 on node gpu-b"))
    assert kinds(got) == ["preempted"] and got[0].node == "gpu-b"
    # 1.34's scheduler may record it twice, as two Events
    assert timeline.event(event("Preempted", "Preempted by pod u9 on node gpu-b", name="e2")) == []


def other_work_preempted(by: str, name: str = "e5") -> dict[str, Any]:
    """The Preempted Event of a pod the watch does not follow (the cluster's other work), preempted by ``by``."""
    victim = event("Preempted", f"Preempted by pod {by} on node gpu-b", uid="filler-uid", name=name)
    victim["involvedObject"].update(name="filler-0", namespace="team")
    return victim


def test_a_watched_pod_that_preempts_other_work_says_so() -> None:
    timeline = PodTimeline()
    timeline.pod(pod())
    [got] = timeline.event(other_work_preempted("u1"))
    assert (got.kind, got.pod, got.node) == ("preempting", "bench-llm-0", "gpu-b")
    assert got.message == "preempted pod team/filler-0 on node gpu-b" and got.t == pytest.approx(T + 0.075648)
    assert timeline.event(other_work_preempted("u1", name="e6")) == []  # the same victim, recorded twice
    assert timeline.event(other_work_preempted("not-watched", name="e7")) == []  # neither side is ours


def test_a_preemption_seen_before_its_preemptor_waits_for_it() -> None:
    timeline = PodTimeline()
    assert timeline.event(other_work_preempted("u1")) == []
    assert kinds(timeline.pod(pod())) == ["created", "preempting"]
    assert not timeline.known("filler-uid")


def test_a_pod_gone_without_a_deletion_time_is_dated_when_seen_gone() -> None:
    timeline = PodTimeline(clock=lambda: T + 99)
    timeline.pod(pod())
    [gone] = timeline.pod(pod(), deleted=True)
    assert (gone.kind, gone.t) == ("deleted", T + 99)


def test_events_wait_for_their_pod_and_others_are_never_recorded() -> None:
    timeline = PodTimeline()
    assert timeline.event(event("FailedScheduling", TOO_BIG)) == []  # its pod is not known yet
    assert timeline.event(event("FailedScheduling", TOO_BIG, uid="unlabelled", name="e9")) == []
    got = timeline.pod(pod())
    assert kinds(got) == ["created", "failed_scheduling"] and got[1].message == TOO_BIG
    assert got[1].t == pytest.approx(T + 0.075648)
    assert not timeline.known("unlabelled")
    assert timeline.event(event("Scheduled", "Successfully assigned bench/bench-llm-0 to gpu-a")) == []
    not_a_pod = event("FailedScheduling", TOO_BIG, name="e3")
    not_a_pod["involvedObject"]["kind"] = "Deployment"
    assert timeline.event(not_a_pod) == []


def test_an_event_series_counts_each_attempt_once() -> None:
    timeline = PodTimeline()
    timeline.pod(pod())
    assert [e.count for e in timeline.event(event("FailedScheduling", TOO_BIG))] == [1]
    again = event("FailedScheduling", TOO_BIG, series={"count": 2, "lastObservedTime": "2026-12-01T15:59:32.1Z"})
    [second] = timeline.event(again)
    assert (second.count, second.t) == (1, pytest.approx(T + 3.1))
    assert timeline.event(again) == []  # the list after a relist repeats it
    later = event("FailedScheduling", TOO_BIG, series={"count": 5, "lastObservedTime": "2026-12-01T15:59:40.5Z"})
    assert [e.count for e in timeline.event(later)] == [3]
    # an older recorder's Event: count and lastTimestamp, whole seconds; first seen with its count
    old = {"metadata": {"name": "e7", "uid": "event-e7"}, "reason": "FailedScheduling", "message": TOO_BIG,
           "involvedObject": {"kind": "Pod", "uid": "u1"}, "count": 2,
           "firstTimestamp": "2026-12-01T15:59:41Z", "lastTimestamp": "2026-12-01T15:59:45Z"}
    assert [(e.t - T, e.count) for e in timeline.event(old)] == [(12, 1), (16, 1)]


def test_in_order_sorts_by_time_then_lifecycle() -> None:
    same = [PodEvent(T, kind, "p", "u") for kind in ("ready", "scheduled", "created")]
    assert kinds(in_order([PodEvent(T + 1, "deleted", "p", "u"), *same])) == [
        "created", "scheduled", "ready", "deleted"]


def test_a_pod_missing_from_a_new_list_went_while_the_watch_was_away() -> None:
    timeline = PodTimeline(clock=lambda: T + 50)
    timeline.pod(pod("u1"))
    timeline.pod(pod("u2", "bench-asr-0", meta={"deletionTimestamp": "2026-12-01T15:59:39Z",
                                                "deletionGracePeriodSeconds": 0}))
    [gone] = timeline.missing({"u3"})  # u2's deletion is known already
    assert (gone.uid, gone.kind, gone.t, gone.message) == ("u1", "deleted", T + 50, "gone while the watch was away")
    assert timeline.missing(set()) == []
