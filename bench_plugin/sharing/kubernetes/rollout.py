"""Waiting on the cluster: a Deployment's pod Ready, the campaign's pods gone, nodes advertising a resource;
and, when a wait runs out, why, in the cluster's own words.

A pod that never became Ready is explained from what the cluster says about it: the scheduler's latest
FailedScheduling message (the pod's PodScheduled condition, else its newest event), a container's
waiting reason (image pulls, crash loops), or the readiness probe's last failure. Every wait polls with a
deadline; the line it raises names the class, the pod (namespace/name) and its phase.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import TypeVar

from bench_plugin.sharing.kubernetes import api as k8s
from bench_plugin.sharing.kubernetes.api import Api, Json

POLL_S = 0.25
T = TypeVar("T")


class WaitTimeout(Exception):
    """A wait that ran out; the message says what was still missing."""


def poll(condition: Callable[[], T | None], timeout_s: float, interval_s: float = POLL_S) -> T | None:
    """Call ``condition`` until it returns something other than None, or ``timeout_s`` passes (then None)."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value is not None:
            return value
        if time.monotonic() >= deadline:
            return None
        time.sleep(interval_s)


def condition(obj: Json, kind: str) -> Json | None:
    """The status condition ``kind`` of a pod or Deployment dict, or None."""
    return next((c for c in obj.get("status", {}).get("conditions") or [] if c.get("type") == kind), None)


def is_ready(pod: Json) -> bool:
    """Whether ``pod`` is Ready and not on its way out."""
    ready = condition(pod, "Ready")
    return bool(ready and ready.get("status") == "True" and not pod["metadata"].get("deletionTimestamp"))


def pod_name(pod: Json) -> str:
    """``namespace/name`` of a pod."""
    return f"{pod['metadata'].get('namespace')}/{pod['metadata']['name']}"


def wait_ready(api: Api, namespace: str, selectors: Mapping[str, str], timeout_s: float) -> dict[str, Json]:
    """Class -> its Ready pod, for every class of ``selectors`` (class -> its pods' label selector).

    Raises WaitTimeout with one part per class still without a Ready pod after ``timeout_s``, naming
    the pod and why (see :func:`why_not_ready`).
    """
    ready: dict[str, Json] = {}

    def all_ready() -> dict[str, Json] | None:
        for name, labels in selectors.items():
            if name not in ready:
                found = [p for p in api.list(k8s.pods(namespace), labels=labels) if is_ready(p)]
                if found:
                    ready[name] = found[0]
        return ready if len(ready) == len(selectors) else None

    if poll(all_ready, timeout_s) is None:
        waiting = [name for name in selectors if name not in ready]
        raise WaitTimeout("; ".join(f"{name}: {why_not_ready(api, namespace, selectors[name])}" for name in waiting))
    return ready


def why_not_ready(api: Api, namespace: str, labels: str) -> str:
    """What keeps the pods of ``labels`` from being Ready, in the cluster's words (one line)."""
    pods = [p for p in api.list(k8s.pods(namespace), labels=labels) if not p["metadata"].get("deletionTimestamp")]
    if not pods:
        return _no_pod(api, namespace, labels)
    pod = max(pods, key=lambda p: p["metadata"].get("creationTimestamp") or "")
    phase = pod.get("status", {}).get("phase") or "Pending"
    node = pod.get("spec", {}).get("nodeName")
    where = f"pod {pod_name(pod)} {phase}" + (f" on node {node}" if node else "")
    scheduled = condition(pod, "PodScheduled")
    if not node and (scheduled is None or scheduled.get("status") != "True"):
        message = (scheduled or {}).get("message") or latest_event(api, namespace, pod, "FailedScheduling")
        return f"{where}: {message or 'not scheduled yet (no FailedScheduling message)'}"
    for status in pod.get("status", {}).get("containerStatuses") or []:
        waiting = (status.get("state") or {}).get("waiting")
        if waiting:
            detail = f": {waiting['message']}" if waiting.get("message") else ""
            return f"{where}: container {status.get('name')} waiting: {waiting.get('reason')}{detail}"
        terminated = (status.get("state") or {}).get("terminated")
        if terminated:
            return f"{where}: container {status.get('name')} terminated: {describe_exit(terminated)}"
    probe = latest_event(api, namespace, pod, "Unhealthy")
    return f"{where}, not Ready" + (f": {probe}" if probe else " (readiness probe not passed yet)")


def describe_exit(terminated: Json) -> str:
    """``exit code N (reason): message`` of a terminated container state."""
    out = f"exit code {terminated.get('exitCode')}"
    if terminated.get("reason"):
        out += f" ({terminated['reason']})"
    if terminated.get("message"):
        out += f": {str(terminated['message']).strip()[:200]}"
    return out


def _no_pod(api: Api, namespace: str, labels: str) -> str:
    """Why a Deployment has no pod: its ReplicaSet's or its own failure condition (quota, admission, ...)."""
    for kind, path in (("ReplicaSet", k8s.replica_sets(namespace)), ("Deployment", k8s.deployments(namespace))):
        for obj in api.list(path, labels=labels):
            failure = condition(obj, "ReplicaFailure")
            if failure and failure.get("message"):
                return f"no pod: {kind} {namespace}/{obj['metadata']['name']}: {failure['message']}"
    return "no pod was created"


def latest_event(api: Api, namespace: str, pod: Json, reason: str) -> str | None:
    """The message of the newest event ``reason`` about ``pod``, or None."""
    found = api.list(k8s.events(namespace),
                     fields=f"involvedObject.name={pod['metadata']['name']},reason={reason}")
    if not found:
        return None

    def when(event: Json) -> str:
        return str(event.get("lastTimestamp") or event.get("eventTime") or event["metadata"].get("creationTimestamp")
                   or "")

    return str(max(found, key=when).get("message") or "").strip() or None


def wait_gone(api: Api, namespace: str, labels: str, timeout_s: float) -> None:
    """Wait until no Deployment, ReplicaSet, pod or Service of ``labels`` is left; WaitTimeout names what is."""
    paths = (("Deployment", k8s.deployments(namespace)), ("ReplicaSet", k8s.replica_sets(namespace)),
             ("Pod", k8s.pods(namespace)), ("Service", k8s.services(namespace)))

    def left() -> list[str]:
        return [f"{kind} {namespace}/{obj['metadata']['name']}"
                for kind, path in paths for obj in api.list(path, labels=labels)]

    if poll(lambda: True if not left() else None, timeout_s) is None:
        raise WaitTimeout(f"still there after {timeout_s:g} s: {', '.join(left())}")
