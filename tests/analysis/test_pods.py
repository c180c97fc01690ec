"""Pods' scheduling from pod events (bench_plugin.analysis.pods), by hand: every answer is known."""

from __future__ import annotations

import pytest

from bench_plugin.analysis.pods import arm_pods, pod_summaries
from bench_plugin.results.pod_events import PodEvent
from bench_plugin.results.summary import TrialSummary

T = 1000.0
FULL = "0/2 nodes are available: 1 Insufficient nvidia.com/gpu, 1 node(s) were unschedulable. preemption: ..."
TAINT = "0/2 nodes are available: 2 node(s) had untolerated taint {dedicated: llm}."


def ev(t: float, kind: str, pod: str, workload: str = "llm", **fields: object) -> PodEvent:
    return PodEvent(T + t, kind, pod, f"uid-{pod}", workload, **fields)  # type: ignore[arg-type]


def test_pending_until_scheduled_deleted_or_the_trial_end() -> None:
    events = [ev(0, "created", "a"), ev(3, "scheduled", "a", node="gpu-a", requests={"nvidia.com/gpu": "1"}),
              ev(4, "ready", "a", node="gpu-a"),
              ev(1, "created", "b", "asr"), ev(6, "deleted", "b", "asr"),
              ev(2, "created", "c", "embedding")]
    a, b, c = pod_summaries(events, trial_end_s=T + 12)
    assert (a.pod, a.node, a.requests, a.pending_s, a.pending_until, a.ready_s) == (
        "a", "gpu-a", {"nvidia.com/gpu": "1"}, 3.0, "scheduled", T + 4)
    assert (b.pending_s, b.pending_until, b.deleted_s, b.node) == (5.0, "deleted", T + 6, None)
    assert (c.pending_s, c.pending_until) == (10.0, "trial end")
    # a trial that never closed: until the last pod event
    assert pod_summaries(events, trial_end_s=None)[2].pending_s == 4.0


def test_reasons_count_every_attempt_and_the_first_message_is_kept() -> None:
    events = [ev(0, "created", "a"), ev(1, "failed_scheduling", "a", message=FULL),
              ev(2, "failed_scheduling", "a", message=FULL, count=4), ev(3, "failed_scheduling", "a", message=TAINT),
              ev(9, "scheduled", "a", node="gpu-b")]
    [a] = pod_summaries(events, T + 10)
    assert a.failed_scheduling == {"Insufficient nvidia.com/gpu": 5, "node(s) were unschedulable": 5,
                                   "node(s) had untolerated taint {dedicated: llm}": 1}
    assert a.first_failed_scheduling == FULL and a.pending_s == 9.0


def test_preemptor_named_where_it_was_watched_and_evictions() -> None:
    events = [ev(0, "created", "victim", "embedding"), ev(0, "scheduled", "victim", "embedding", node="gpu-a"),
              ev(5, "created", "urgent"), ev(5.5, "scheduled", "urgent", node="gpu-a"),
              ev(5.2, "preempted", "victim", "embedding", message="Preempted by pod uid-urgent on node gpu-a"),
              ev(0, "created", "other"), ev(1, "preempted", "other", message="Preempted by pod x-9 on node gpu-a"),
              ev(7, "evicted", "urgent", message="EvictionByEvictionAPI: Eviction API: evicting")]
    pods = {p.pod: p for p in pod_summaries(events, T + 10)}
    assert (pods["victim"].preempted_by, pods["victim"].preempted_s) == ("urgent", T + 5.2)
    assert pods["other"].preempted_by == "x-9"  # the preemptor was not watched: its uid
    assert (pods["urgent"].evicted, pods["urgent"].evicted_s) == ("EvictionByEvictionAPI: Eviction API: evicting",
                                                                  T + 7)
    assert list(pods) == ["other", "victim", "urgent"]  # by creation, then class (llm first), then name


def trial(repeat: int, events: list[PodEvent] | None, end: float = 20) -> TrialSummary:
    return TrialSummary(id=repeat, arm="shared", repeat=repeat, status="completed", reason=None, placement={},
                        stages=[], pods=pod_summaries(events, T + end) if events is not None else None)


def test_an_arm_over_its_repeats() -> None:
    first = trial(1, [ev(0, "created", "l1"), ev(2, "scheduled", "l1"),
                      ev(0, "created", "a1", "asr"), ev(6, "scheduled", "a1", "asr"),
                      ev(1, "failed_scheduling", "a1", "asr", message=FULL, count=2)])
    second = trial(2, [ev(0, "created", "l2"), ev(4, "scheduled", "l2"), ev(0, "created", "a2", "asr"),
                       ev(3, "failed_scheduling", "a2", "asr", message=TAINT),
                       ev(1, "evicted", "l2", message="EvictionByEvictionAPI: ...")], end=8)
    pods = arm_pods([first, second, trial(3, None)])  # the third was not watched
    assert pods is not None and pods.trials == 2
    assert pods.pending.spread.values == [6.0, 8.0] and pods.pending.spread.mean == 7.0
    assert pods.pending.spread.ci95 == pytest.approx(12.706 * 1.0, rel=1e-3)  # t(0.975, 1) * sd / sqrt(2)
    assert pods.pending.max_s == 8.0
    assert list(pods.classes) == ["llm", "asr"]
    assert (pods.classes["llm"].spread.values, pods.classes["asr"].max_s) == ([2.0, 4.0], 8.0)
    assert pods.reasons == {"Insufficient nvidia.com/gpu": 2, "node(s) were unschedulable": 2,
                            "node(s) had untolerated taint {dedicated: llm}": 1}
    assert (pods.preempted, pods.evicted) == (0, 1)
    assert arm_pods([trial(1, None)]) is None
