"""The Kubernetes preflight: refuse an arm whose objects the cluster could never run, before any load.

The backend builds every object of an arm (Deployments, Services, the PriorityClasses and
PodDisruptionBudgets it may create) as JSON-form dicts, reads the cluster once (``read_cluster``: nodes,
PriorityClasses, the namespace's PodDisruptionBudgets; nothing is written), and asks ``check`` whether
they fit together. Reading and judging are apart: ``check`` is a pure function of the objects and a
``ClusterView``, so every rule is testable on plain dicts and the backend can show all conflicts at once.

What is judged, in this order (docs/kubernetes.md, "Preflight", has an example line for each):

1. requests vs limits per container: an extended resource (nvidia.com/gpu, nvidia.com/gpu.shared,
   nvidia.com/mig-*) needs a limit equal to its request; a cpu or memory request may not exceed its limit;
2. placement: the pod's nodeSelector and required node affinity match some node, and not every such node
   has a NoSchedule/NoExecute taint the pod does not tolerate (a cordoned node counts as tainted
   node.kubernetes.io/unschedulable:NoSchedule, as the scheduler's NodeUnschedulable filter does);
3. priority: the priorityClassName exists in the cluster or among the objects; a PriorityClass the arm
   would create has the value and preemptionPolicy of the one of that name already in the cluster
   (both are immutable); the policy is the one the arm means (``expected_preemption``); a pod template's
   own priority or preemptionPolicy agrees with its class (admission refuses the pods otherwise);
4. readiness: every container with a containerPort has a readinessProbe, and not a bare tcpSocket one
   (an open port is Ready before the model is loaded). Any httpGet path, exec or grpc probe is accepted:
   the preflight cannot know where a server reports its model loaded, and the campaign waits for a real
   answer anyway (Running is not Ready); a missing or TCP-only probe is always wrong;
5. PodDisruptionBudgets (among the objects or in the namespace) against the replicas of the Deployments
   they select: a budget that allows no disruption while every pod is healthy makes a drain hang, one
   with minAvailable above the pods it selects can never be met, and a pod selected by two budgets
   cannot be evicted at all (the eviction API refuses it);
6. capacity, per extended resource: one pod's request must fit the largest node it may use, and
   requests x replicas (per Deployment, then over all Deployments asking that resource) must fit the
   ALLOCATABLE total of the nodes they may use (placement and taints as in 2).

Capacity is judged against allocatable, not free, capacity on purpose: GPUs that other pods hold now are
the scheduler's business (preemption may free them, or the pods go Pending and the run records the
FailedScheduling message on its timeline, which is a result, not a preflight error). So is packing
several pods onto few nodes: only "one pod fits the largest node" and the totals are judged.

``refuse(conflicts)`` raises ``PreflightError`` (an ``ApplyError``, so the plugin stops the run with its
one-line message): ``str()`` is the first conflict's line plus "(and N more)"; ``.conflicts`` keeps all
of them for a caller that prints every line.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from bench_plugin.sharing.base import ApplyError
from bench_plugin.sharing.kubernetes.clusterview import ClusterReadError, ClusterView, read_cluster
from bench_plugin.sharing.kubernetes.semantics import (
    Json,
    allocatable,
    choose_nodes,
    describe_taint,
    describe_term,
    format_amount,
    is_extended_resource,
    label_selector_matches,
    name_of,
    namespace_of,
    overcommit_allowed,
    parse_quantity,
    pod_requests,
    required_node_affinity,
    scaled_int_or_percent,
)

__all__ = ["ClusterReadError", "ClusterView", "Conflict", "PreflightError", "check", "read_cluster", "refuse"]

POD_SPEC = "spec.template.spec"
AFFINITY = f"{POD_SPEC}.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
DEFAULT_PREEMPTION = "PreemptLowerPriority"
"""What a PriorityClass without preemptionPolicy gets (the API server's default)."""
LISTED_NODES = 6
"""Nodes named in one line; more are counted."""


@dataclass(frozen=True)
class Conflict:
    """One reason the arm's objects and the cluster do not fit, on one object's field."""

    kind: str
    namespace: str
    """Empty for a cluster-scoped object (a PriorityClass)."""
    name: str
    field: str
    """The field path in the object, e.g. ``spec.template.spec.containers[0].resources``."""
    message: str

    def line(self) -> str:
        """``Deployment bench/bench-llm: spec.template.spec.nodeSelector: no node of 3 has ...``"""
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.kind} {where}: {self.field}: {self.message}"


class PreflightError(ApplyError):
    """The arm was refused: ``str()`` is the first conflict's line and how many more; ``.conflicts`` all."""

    def __init__(self, conflicts: Sequence[Conflict]) -> None:
        if not conflicts:
            raise ValueError("PreflightError needs at least one conflict")
        self.conflicts = tuple(conflicts)
        more = len(self.conflicts) - 1
        super().__init__(self.conflicts[0].line() + (f" (and {more} more)" if more else ""))


def refuse(conflicts: Sequence[Conflict]) -> None:
    """Raise PreflightError if there is any conflict; return quietly otherwise."""
    if conflicts:
        raise PreflightError(conflicts)


def check(objects: Iterable[Json], view: ClusterView,
          expected_preemption: Mapping[str, str] | None = None) -> list[Conflict]:
    """Every conflict between ``objects`` (what the backend would apply) and the cluster in ``view``.

    ``expected_preemption`` maps a priorityClassName to the preemptionPolicy the arm means
    (PreemptLowerPriority or Never). Objects of kinds other than Deployment, PriorityClass and
    PodDisruptionBudget are not judged. Writes nothing, reads nothing but its arguments.
    """
    objects = list(objects)
    workloads = [Workload.of(obj, view.namespace) for obj in objects if obj.get("kind") == "Deployment"]
    own_classes = {name_of(obj): obj for obj in objects if obj.get("kind") == "PriorityClass"}
    budgets = {(namespace_of(pdb, view.namespace), name_of(pdb)): pdb for pdb in view.pod_disruption_budgets}
    budgets.update({(namespace_of(obj, view.namespace), name_of(obj)): obj
                    for obj in objects if obj.get("kind") == "PodDisruptionBudget"})

    conflicts = [c for w in workloads for c in check_resources(w)]
    available: dict[str, tuple[Json, ...]] = {}
    for w in workloads:
        placement_conflicts, available[w.key] = check_placement(w, view.nodes)
        conflicts += placement_conflicts
    conflicts += [c for w in workloads for c in check_priority(w, own_classes, view, expected_preemption or {})]
    conflicts += check_priority_classes(own_classes.values(), view)
    conflicts += [c for w in workloads for c in check_readiness(w)]
    conflicts += check_disruption_budgets(workloads, list(budgets.values()), view.namespace)
    conflicts += check_capacity([(w, available[w.key]) for w in workloads if available[w.key]])
    return conflicts


@dataclass(frozen=True)
class Workload:
    """A Deployment as the preflight reads it: where it goes, how many pods, their spec and labels."""

    namespace: str
    name: str
    replicas: int
    pod_spec: Json
    pod_labels: Mapping[str, str]
    kind: str = "Deployment"
    containers: tuple[tuple[str, Json], ...] = field(default=())
    """(field path, container) for every container and init container."""

    @classmethod
    def of(cls, obj: Json, default_namespace: str) -> Workload:
        spec = obj.get("spec") or {}
        template = spec.get("template") or {}
        pod_spec = template.get("spec") or {}
        containers = tuple((f"{POD_SPEC}.{group}[{i}]", c) for group in ("containers", "initContainers")
                           for i, c in enumerate(pod_spec.get(group) or []))
        replicas = spec.get("replicas")
        return cls(namespace=namespace_of(obj, default_namespace), name=name_of(obj),
                   replicas=1 if replicas is None else int(replicas), pod_spec=pod_spec,
                   pod_labels=dict((template.get("metadata") or {}).get("labels") or {}), containers=containers)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def conflict(self, field_path: str, message: str) -> Conflict:
        return Conflict(self.kind, self.namespace, self.name, field_path, message)


# -- 1. requests vs limits --------------------------------------------------------------------------

def check_resources(workload: Workload) -> list[Conflict]:
    """Extended resources (and hugepages) need limits equal to requests; other requests may not exceed limits."""
    conflicts = []
    for path, container in workload.containers:
        resources = container.get("resources") or {}
        requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
        for resource, raw in requests.items():
            message = _request_against_limit(resource, raw, limits.get(resource))
            if message:
                conflicts.append(workload.conflict(f"{path}.resources", message))
    return conflicts


def _request_against_limit(resource: str, raw: Any, raw_limit: Any) -> str | None:
    rule = ("extended resources must have requests equal to limits" if is_extended_resource(resource)
            else f"{resource} must have requests equal to limits")
    try:
        request = parse_quantity(raw)
        limit = None if raw_limit is None else parse_quantity(raw_limit)
    except ValueError as error:
        return f"{resource}: {error}"
    if not overcommit_allowed(resource):
        if limit is None:
            return f"{resource} requests {raw} with no limit ({rule})"
        if request != limit:
            return f"{resource} requests {raw} but limits {raw_limit} ({rule})"
    elif limit is not None and request > limit:
        return f"{resource} requests {raw} but limits {raw_limit} (a request may not exceed its limit)"
    return None


# -- 2. placement -----------------------------------------------------------------------------------

def check_placement(workload: Workload, nodes: Sequence[Json]) -> tuple[list[Conflict], tuple[Json, ...]]:
    """Conflicts of the pod's node selection and tolerations with ``nodes``; the nodes its pods may use."""
    if not nodes:
        return [workload.conflict(POD_SPEC, "the cluster has no nodes")], ()
    choice = choose_nodes(workload.pod_spec, nodes)
    asked = ", ".join(f"{k}={v}" for k, v in (workload.pod_spec.get("nodeSelector") or {}).items())
    terms = " or ".join(f"nodeSelectorTerms[{i}] ({describe_term(t)})" for i, t in
                        enumerate((required_node_affinity(workload.pod_spec) or {}).get("nodeSelectorTerms") or []))
    of_all = f"no node of {len(nodes)}"
    conflicts = []
    if not choice.by_labels:
        conflicts.append(workload.conflict(f"{POD_SPEC}.nodeSelector", f"{of_all} has the labels {asked}"))
    if not choice.by_affinity:
        conflicts.append(workload.conflict(AFFINITY, f"{of_all} matches {terms or 'an empty nodeSelectorTerms'}"))
    if choice.by_labels and choice.by_affinity and not choice.matched:
        conflicts.append(workload.conflict(
            POD_SPEC, f"{of_all} has both the nodeSelector labels {asked} and node affinity {terms}"))
    if choice.matched and not choice.available:
        named = [f"{name_of(n)} {describe_taint(t)}" + (" (cordoned)" if _cordoned(n) else "")
                 for n, t in sorted(choice.blocked, key=lambda b: name_of(b[0]))]
        conflicts.append(workload.conflict(
            f"{POD_SPEC}.tolerations",
            f"every node its placement allows has a taint it does not tolerate: {_listed(named)}"))
    return conflicts, choice.available


def _cordoned(node: Json) -> bool:
    return bool((node.get("spec") or {}).get("unschedulable"))


def _listed(items: Sequence[str]) -> str:
    shown = ", ".join(items[:LISTED_NODES])
    return f"{shown}, and {len(items) - LISTED_NODES} more" if len(items) > LISTED_NODES else shown


# -- 3. priority ------------------------------------------------------------------------------------

def _policy(priority_class: Json) -> str:
    return str(priority_class.get("preemptionPolicy") or DEFAULT_PREEMPTION)


def check_priority(workload: Workload, own_classes: Mapping[str, Json], view: ClusterView,
                   expected: Mapping[str, str]) -> list[Conflict]:
    """The pod's priorityClassName resolves, means the preemption the arm means, and agrees with the pod."""
    name = workload.pod_spec.get("priorityClassName")
    if not name:
        return []
    field_path = f"{POD_SPEC}.priorityClassName"
    chosen = own_classes.get(name) or view.priority_class(name)
    if chosen is None:
        return [workload.conflict(field_path, f"no PriorityClass {name} in the cluster or in this arm "
                                              "(the pods would be refused at admission)")]
    conflicts = []
    policy, value = _policy(chosen), chosen.get("value")
    if name in expected and expected[name] != policy:
        conflicts.append(workload.conflict(
            field_path, f"PriorityClass {name} has preemptionPolicy {policy} but the arm means {expected[name]}"))
    own_priority = workload.pod_spec.get("priority")
    if own_priority is not None and own_priority != value:
        conflicts.append(workload.conflict(
            f"{POD_SPEC}.priority", f"is {own_priority} but PriorityClass {name} has value {value} "
                                    "(admission refuses such pods)"))
    own_policy = workload.pod_spec.get("preemptionPolicy")
    if own_policy is not None and own_policy != policy:
        conflicts.append(workload.conflict(
            f"{POD_SPEC}.preemptionPolicy", f"is {own_policy} but PriorityClass {name} has {policy} "
                                            "(admission refuses such pods)"))
    return conflicts


def check_priority_classes(own_classes: Iterable[Json], view: ClusterView) -> list[Conflict]:
    """A PriorityClass the arm would create agrees with the cluster's one of that name (value and
    preemptionPolicy are immutable, so the existing one would stay and mean something else)."""
    conflicts = []
    for own in own_classes:
        theirs = view.priority_class(name_of(own))
        if theirs is None:
            continue
        for key, mine, existing in (("value", own.get("value"), theirs.get("value")),
                                    ("preemptionPolicy", _policy(own), _policy(theirs))):
            if mine != existing:
                conflicts.append(Conflict(
                    "PriorityClass", "", name_of(own), key,
                    f"this arm means {mine} but the cluster's PriorityClass of that name has {existing} "
                    f"({key} cannot be changed: delete that PriorityClass or use another name)"))
    return conflicts


# -- 4. readiness -----------------------------------------------------------------------------------

def check_readiness(workload: Workload) -> list[Conflict]:
    """Every container that serves a port has a readinessProbe that is more than a TCP connect."""
    conflicts = []
    for path, container in workload.containers:
        ports = [p["containerPort"] for p in container.get("ports") or [] if p.get("containerPort")]
        if not ports or ".initContainers[" in path:
            continue
        probe = container.get("readinessProbe")
        if not probe:
            conflicts.append(workload.conflict(
                f"{path}.readinessProbe",
                f"container {container.get('name', '')} serves port {ports[0]} but has no readinessProbe: it turns "
                "Ready before the model is loaded; use httpGet on the model's health path"))
        elif probe.get("tcpSocket") and not any(probe.get(k) for k in ("httpGet", "grpc", "exec")):
            conflicts.append(workload.conflict(
                f"{path}.readinessProbe",
                "a TCP check turns Ready before the model is loaded; use httpGet on the model's health path"))
    return conflicts


# -- 5. disruption budgets --------------------------------------------------------------------------

def check_disruption_budgets(workloads: Sequence[Workload], budgets: Sequence[Json],
                             default_namespace: str) -> list[Conflict]:
    """Budgets that let no pod of the Deployments they select be evicted, and pods under two budgets."""
    conflicts = []
    covering: dict[str, list[str]] = {}
    for pdb in budgets:
        namespace = namespace_of(pdb, default_namespace)
        selector = (pdb.get("spec") or {}).get("selector")
        selected = [w for w in workloads if w.namespace == namespace and label_selector_matches(selector, w.pod_labels)]
        for w in selected:
            covering.setdefault(w.key, []).append(name_of(pdb))
        problem = _budget_problem(pdb, selected)
        if problem:
            conflicts.append(Conflict("PodDisruptionBudget", namespace, name_of(pdb), *problem))
    for w in workloads:
        names = covering.get(w.key, [])
        if len(names) > 1:
            conflicts.append(w.conflict(
                "spec.template.metadata.labels",
                f"its pods are selected by {len(names)} PodDisruptionBudgets ({', '.join(sorted(names))}); "
                "the eviction API refuses to evict such pods: a drain would hang"))
    return conflicts


def _budget_problem(pdb: Json, selected: Sequence[Workload]) -> tuple[str, str] | None:
    """(field, message) when the budget allows no eviction of the ``selected`` Deployments' pods."""
    expected = sum(w.replicas for w in selected)
    if expected <= 0:
        return None
    spec = pdb.get("spec") or {}
    key = "maxUnavailable" if spec.get("maxUnavailable") is not None else "minAvailable"
    raw = spec.get(key)
    if raw is None:
        return None
    counts = ", ".join(f"{w.name}: {w.replicas}" for w in selected)
    pods = f"the {expected} pod{'s' if expected != 1 else ''} it selects ({counts})"
    try:
        scaled = scaled_int_or_percent(raw, expected, round_up=True)
    except ValueError as error:
        return f"spec.{key}", str(error)
    desired = max(expected - scaled, 0) if key == "maxUnavailable" else scaled
    if key == "minAvailable" and desired > expected:
        return (f"spec.{key}", f"minAvailable {raw} is more than {pods}: it can never be met and no pod can be "
                               "evicted: a drain would hang")
    if desired >= expected:
        return f"spec.{key}", f"{key} {raw} allows no eviction of {pods}: a drain would hang"
    return None


# -- 6. capacity ------------------------------------------------------------------------------------

def _asking(workload: Workload, resource: str) -> str:
    """The resources field of the first container that asks ``resource``."""
    for path, container in workload.containers:
        resources = container.get("resources") or {}
        if resource in (resources.get("requests") or {}) or resource in (resources.get("limits") or {}):
            return f"{path}.resources"
    return f"{POD_SPEC}.containers"


def _offer(nodes: Iterable[Json], resource: str) -> tuple[Fraction, str]:
    """The total of ``resource`` over ``nodes`` and the ones offering any, as ``(a: 1, b: 1)``."""
    amounts = sorted((name_of(n), allocatable(n, resource)) for n in nodes)
    offering = [f"{name}: {format_amount(a)}" for name, a in amounts if a > 0]
    return sum((a for _, a in amounts), Fraction(0)), f" ({_listed(offering)})" if offering else ""


def check_capacity(placed: Sequence[tuple[Workload, Sequence[Json]]]) -> list[Conflict]:
    """Each pod fits its largest node; the requests of all replicas fit the nodes' allocatable totals."""
    conflicts = []
    demand: dict[str, list[tuple[Workload, Fraction]]] = {}
    nodes_for: dict[str, dict[str, Json]] = {}
    failed: set[str] = set()
    for workload, nodes in placed:
        for resource, per_pod in sorted(pod_requests(workload.pod_spec).items()):
            if per_pod <= 0 or workload.replicas <= 0:
                continue
            asked = per_pod * workload.replicas
            demand.setdefault(resource, []).append((workload, asked))
            nodes_for.setdefault(resource, {}).update({name_of(n): n for n in nodes})
            largest = max(allocatable(n, resource) for n in nodes)
            total, offering = _offer(nodes, resource)
            one_pod = f"one pod asks {format_amount(per_pod)} {resource}"
            if per_pod > largest:
                message = (f"{one_pod}; the most a node it may use allocates is {format_amount(largest)}{offering}"
                           if largest > 0 else f"{one_pod}; none of the {len(nodes)} nodes it may use allocates any")
            elif asked > total:
                message = (f"asks {format_amount(asked)} {resource} in total ({workload.replicas} replicas x "
                           f"{format_amount(per_pod)}); the nodes it may use allocate {format_amount(total)}{offering}")
            else:
                continue
            failed.add(resource)
            conflicts.append(workload.conflict(_asking(workload, resource), message))
    for resource, asking in demand.items():
        asked = sum((a for _, a in asking), Fraction(0))
        total, offering = _offer(nodes_for[resource].values(), resource)
        if len(asking) > 1 and resource not in failed and asked > total:
            (first, first_asked), others = asking[0], asking[1:]
            with_others = ", ".join(f"{w.name} ({format_amount(a)})" for w, a in others)
            conflicts.append(first.conflict(_asking(first, resource), (
                f"asks {format_amount(first_asked)} {resource}, {format_amount(asked)} in total with {with_others}; "
                f"the nodes they may use allocate {format_amount(total)}{offering}")))
    return conflicts
