"""Disruptions through the API: a rollout restart, a node drain, a node failure and rejoin, each recorded.

- ``rollout-restart`` patches each class's Deployment's pod template with the annotation
  ``kubectl.kubernetes.io/restartedAt`` (what ``kubectl rollout restart`` does), then follows the rollout
  until a new pod is Ready.
- ``drain`` cordons the node of each class's pod (``spec.unschedulable: true``; a node already cordoned is
  left as it is) and evicts the campaign's pods there through the eviction API (``policy/v1`` Eviction). An
  eviction a PodDisruptionBudget refuses (HTTP 429) is retried until ``eviction_timeout_s``, then recorded
  as blocked by that budget, never waited on longer. Only the campaign's own pods are evicted: other work
  on the node keeps running. :meth:`Disruptor.end` uncordons (at the stage's end, and at restore).
- ``node-failure`` runs ``command``, waits ``rejoin_after_s``, runs ``rejoin_command``; the node's Ready
  condition is recorded before the rejoin and once it is Ready again. A rejoin not run yet (the run was
  stopped) is run by :meth:`Disruptor.end`.

Every step and its outcome goes to ``record`` (the conductor makes it a ``disruption`` event of the trial):
``action``, ``target`` (pod or node), ``result`` and, for the start, ``t`` (epoch seconds).
"""

from __future__ import annotations

import logging
import subprocess
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from bench_plugin.scenario import Disruption
from bench_plugin.sharing.kubernetes import api as k8s
from bench_plugin.sharing.kubernetes import manifests as m
from bench_plugin.sharing.kubernetes.api import Api, Json, KubeError
from bench_plugin.sharing.kubernetes.rollout import poll

logger = logging.getLogger(__name__)

RESTARTED_AT = "kubectl.kubernetes.io/restartedAt"
RETRY_S = 1.0
"""How often a refused eviction is tried again."""

Record = Callable[..., None]


def evictions(namespace: str, pod: str) -> str:
    """The eviction subresource of ``pod``."""
    return f"{k8s.name_path(k8s.pods(namespace), pod)}/eviction"


def disruption_budgets(namespace: str) -> str:
    return k8s.namespaced("policy/v1", namespace, "poddisruptionbudgets")


def _ready(pod: Json) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


def node_ready(node: Json | None) -> str:
    """The node's Ready condition status (True, False, Unknown), or ``gone``."""
    if node is None:
        return "gone"
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return str(condition.get("status"))
    return "Unknown"


def _matches(selector: Json, labels: dict[str, str]) -> bool:
    """Whether a label selector (matchLabels, matchExpressions) selects ``labels``."""
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if (op == "In" and labels.get(key) not in values) or (op == "NotIn" and labels.get(key) in values) \
                or (op == "Exists" and key not in labels) or (op == "DoesNotExist" and key in labels):
            return False
    return True


class Disruptor:
    """One disruption of one stage: :meth:`run` does it (blocking), :meth:`end` puts the nodes back."""

    def __init__(self, api: Api, namespace: str, campaign: str, spec: Disruption, record: Record,
                 ready_timeout_s: float) -> None:
        self.api = api
        self.namespace = namespace
        self.campaign = campaign
        self.spec = spec
        self.record = record
        self.ready_timeout_s = ready_timeout_s
        self.cordoned: list[str] = []
        """Nodes this disruption cordoned (and must uncordon)."""
        self.rejoin_pending = False
        self.ended = False

    def _selector(self, name: str) -> str:
        return k8s.selector({m.NAME_LABEL: m.object_name(name), m.CAMPAIGN_LABEL: self.campaign})

    def _pods(self, name: str) -> list[Json]:
        return [p for p in self.api.list(k8s.pods(self.namespace), labels=self._selector(name))
                if not p["metadata"].get("deletionTimestamp")]

    def run(self, classes: list[str]) -> None:
        """Do the disruption to ``classes``; every outcome, a failure's included, is recorded, none raised."""
        self.record(action="start", target=",".join(classes), result="started", t=time.time())
        try:
            if self.spec.kind == "rollout-restart":
                self._rollout_restart(classes)
            elif self.spec.kind == "drain":
                self._drain(classes)
            else:
                self._node_failure(classes)
        except KubeError as exc:
            logger.error("disruption %s: %s", self.spec.kind, exc)
            self.record(action="error", target=",".join(classes), result=str(exc))

    # -- rollout restart ---------------------------------------------------------------------------

    def _rollout_restart(self, classes: list[str]) -> None:
        before = {name: {p["metadata"]["name"] for p in self._pods(name)} for name in classes}
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        for name in classes:
            path = k8s.name_path(k8s.deployments(self.namespace), m.object_name(name))
            self.api.merge_patch(path, {"spec": {"template": {"metadata": {"annotations": {RESTARTED_AT: stamp}}}}})
            self.record(action="rollout-restart", target=f"deployment/{m.object_name(name)}",
                        result=f"patched {RESTARTED_AT}={stamp}", old_pods=sorted(before[name]))
        for name in classes:
            self._await_replacement(name, before[name], "rollout-restart")

    def _await_replacement(self, name: str, old: set[str], action: str) -> None:
        """Record the first Ready pod of class ``name`` not in ``old`` (or that none came in time)."""
        found: dict[str, str] = {}

        def replaced() -> bool | None:
            for pod in self._pods(name):
                if pod["metadata"]["name"] not in old and _ready(pod):
                    found["pod"] = pod["metadata"]["name"]
                    found["node"] = (pod.get("spec") or {}).get("nodeName") or ""
                    return True
            return None

        if poll(replaced, self.ready_timeout_s) is None:
            self.record(action=f"{action}-ready", target=f"class/{name}",
                        result=f"no new pod Ready within {self.ready_timeout_s:g} s")
            return
        self.record(action=f"{action}-ready", target=f"pod/{found['pod']}", result="Ready",
                    node=found["node"], t=time.time())

    # -- drain -------------------------------------------------------------------------------------

    def _drain(self, classes: list[str]) -> None:
        nodes: dict[str, list[str]] = {}
        for name in classes:
            for pod in self._pods(name):
                node = (pod.get("spec") or {}).get("nodeName")
                if node:
                    nodes.setdefault(node, []).append(name)
        for node in nodes:
            self._cordon(node)
        for node, names in nodes.items():
            on_node = [p for p in self.api.list(k8s.pods(self.namespace), labels=k8s.selector(
                m.campaign_labels(self.campaign)), fields=f"spec.nodeName={node}")
                if not p["metadata"].get("deletionTimestamp")]
            old = {p["metadata"]["name"] for p in on_node}
            evicted = {p["metadata"]["name"] for p in on_node if self._evict(p, node)}
            for name in names:
                if any((p["metadata"].get("labels") or {}).get(m.NAME_LABEL) == m.object_name(name)
                       and p["metadata"]["name"] in evicted for p in on_node):
                    self._await_replacement(name, old, "drain")

    def _cordon(self, node: str) -> None:
        path = k8s.name_path(k8s.NODES, node)
        found = self.api.get(path)
        if found is None:
            self.record(action="cordon", target=f"node/{node}", result="node not found")
            return
        if (found.get("spec") or {}).get("unschedulable"):
            self.record(action="cordon", target=f"node/{node}", result="already unschedulable: left as it was")
            return
        self.api.merge_patch(path, {"spec": {"unschedulable": True}})
        self.cordoned.append(node)
        self.record(action="cordon", target=f"node/{node}", result="cordoned")

    def _evict(self, pod: Json, node: str) -> bool:
        """Evict ``pod``; whether it went (False: a budget blocked it past the deadline)."""
        name = pod["metadata"]["name"]
        body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": self.namespace}}
        deadline = time.monotonic() + self.spec.eviction_timeout_s
        refused = 0
        while True:
            try:
                self.api.create(evictions(self.namespace, name), body)
            except KubeError as exc:
                if exc.status == 404:
                    self.record(action="evict", target=f"pod/{name}", result="already gone", node=node)
                    return True
                if exc.status != 429:
                    raise
                refused += 1
                if time.monotonic() >= deadline:
                    budget = self._budget_of(pod)
                    self.record(action="evict", target=f"pod/{name}", node=node, refusals=refused,
                                result=f"blocked by PodDisruptionBudget {budget} for "
                                       f"{self.spec.eviction_timeout_s:g} s")
                    return False
                time.sleep(RETRY_S)
                continue
            self.record(action="evict", target=f"pod/{name}", node=node, refusals=refused, result="evicted")
            return True

    def _budget_of(self, pod: Json) -> str:
        labels = pod["metadata"].get("labels") or {}
        try:
            budgets = self.api.list(disruption_budgets(self.namespace))
        except KubeError:
            return "(unknown: the budgets could not be listed)"
        names = [b["metadata"]["name"] for b in budgets if _matches((b.get("spec") or {}).get("selector") or {},
                                                                    labels)]
        return ", ".join(f"{self.namespace}/{n}" for n in names) or "(none found matching the pod)"

    def _uncordon(self) -> None:
        while self.cordoned:
            node = self.cordoned[0]
            try:
                self.api.merge_patch(k8s.name_path(k8s.NODES, node), {"spec": {"unschedulable": None}})
            except KubeError as exc:
                if exc.status != 404:
                    self.record(action="uncordon", target=f"node/{node}", result=f"failed: {exc}")
                    raise
            self.cordoned.pop(0)
            self.record(action="uncordon", target=f"node/{node}", result="uncordoned")

    # -- node failure ------------------------------------------------------------------------------

    def _node_failure(self, classes: list[str]) -> None:
        nodes = sorted({(p.get("spec") or {}).get("nodeName") or "" for name in classes for p in self._pods(name)}
                       - {""})
        target = ",".join(f"node/{n}" for n in nodes) or "(no node)"
        assert self.spec.command is not None and self.spec.rejoin_after_s is not None
        self.rejoin_pending = True
        self.record(action="fail-node", target=target, **self._run(self.spec.command))
        time.sleep(self.spec.rejoin_after_s)
        self.record(action="node-state", target=target, result=self._states(nodes))
        self._rejoin(target)
        ready: dict[str, str] = {}

        def all_ready() -> bool | None:  # one read of each node gives both the record and the answer
            states = {n: node_ready(self.api.get(k8s.name_path(k8s.NODES, n))) for n in nodes}
            ready["states"] = self._joined(states)
            return True if all(state == "True" for state in states.values()) else None

        ok = poll(all_ready, self.ready_timeout_s) is not None
        self.record(action="node-state", target=target, t=time.time(),
                    result=ready.get("states", "") if ok else
                    f"not Ready {self.ready_timeout_s:g} s after the rejoin: {ready.get('states', '')}")

    def _states(self, nodes: list[str]) -> str:
        return self._joined({n: node_ready(self.api.get(k8s.name_path(k8s.NODES, n))) for n in nodes})

    @staticmethod
    def _joined(states: dict[str, str]) -> str:
        return ", ".join(f"{n} Ready={state}" for n, state in states.items())

    def _rejoin(self, target: str) -> None:
        assert self.spec.rejoin_command is not None
        self.rejoin_pending = False
        self.record(action="rejoin-node", target=target, **self._run(self.spec.rejoin_command))

    def _run(self, argv: list[str]) -> dict[str, Any]:
        """Run ``argv``; its outcome as event fields (never raises)."""
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=self.spec.command_timeout_s,
                                  check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return {"command": argv, "result": f"failed: {exc}"}
        tail = (done.stderr or done.stdout or "").strip().splitlines()[-3:]
        return {"command": argv, "result": f"exit {done.returncode}", "output": " | ".join(tail)}

    # -- the end -----------------------------------------------------------------------------------

    def end(self) -> None:
        """Rejoin a failed node not rejoined yet, uncordon what was cordoned; safe to call more than once."""
        if self.rejoin_pending:
            self._rejoin("(stopped before the rejoin)")
        self._uncordon()
        if not self.ended:
            self.ended = True
            self.record(action="end", target=self.spec.kind, result="nodes put back")
