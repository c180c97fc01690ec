"""How Kubernetes reads the fields the preflight judges, restated in Python from its v1.34 sources.

Each function here mirrors one rule of the API server, the scheduler or a controller, on the objects'
JSON form (camelCase dicts, as ``kubectl get -o json`` shows them), so that the preflight can say what
the cluster would do without asking it:

- quantities (k8s.io/apimachinery resource.Quantity): ``500m``, ``1.5Gi``, ``2e3``;
- which resources may be overcommitted (core/helper IsOvercommitAllowed: native resources other than
  hugepages; extended resources such as nvidia.com/gpu need requests equal to limits);
- label selectors (metav1.LabelSelector, used by PodDisruptionBudgets: a missing selector selects
  nothing, an empty one everything) and node selector terms (component-helpers nodeaffinity: terms are
  ORed, expressions and fields in a term ANDed, an empty term matches nothing; Gt and Lt compare labels
  as integers; NotIn and DoesNotExist match a node without the label);
- taints and tolerations (core/v1 Toleration.ToleratesTaint; the scheduler's TaintToleration filter
  counts NoSchedule and NoExecute taints; NodeUnschedulable refuses a cordoned node unless the pod
  tolerates node.kubernetes.io/unschedulable:NoSchedule), with the two NoExecute tolerations that the
  DefaultTolerationSeconds admission plugin (on by default) adds to every pod;
- which nodes a pod may land on (``choose_nodes``: the scheduler's NodeAffinity, NodeUnschedulable and
  TaintToleration filters; resources and everything else are left to the scheduler) and what one pod
  asks of an extended resource (``pod_requests``: containers add up, init containers count by their
  largest);
- int-or-percent values (intstr.GetScaledValueFromIntOrPercent), as the disruption controller scales
  a PodDisruptionBudget's minAvailable and maxUnavailable.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

Json = Mapping[str, Any]
"""An API object, or part of one, in its JSON form."""

_QUANTITY = re.compile(r"^([+-]?(?:\d+(?:\.\d*)?|\.\d+))(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d+)?$")
_SUFFIXES = {
    "Ki": Fraction(2**10), "Mi": Fraction(2**20), "Gi": Fraction(2**30), "Ti": Fraction(2**40),
    "Pi": Fraction(2**50), "Ei": Fraction(2**60),
    "n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000), "k": Fraction(10**3),
    "M": Fraction(10**6), "G": Fraction(10**9), "T": Fraction(10**12), "P": Fraction(10**15), "E": Fraction(10**18),
}
DO_NOT_SCHEDULE = ("NoSchedule", "NoExecute")
"""The taint effects the scheduler's filter honours (PreferNoSchedule only lowers a node's score)."""
UNSCHEDULABLE_TAINT: Json = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
"""A cordoned node (spec.unschedulable) is refused unless the pod tolerates this taint."""
DEFAULT_TOLERATIONS: tuple[Json, ...] = tuple(
    {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
    for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"))
"""What the DefaultTolerationSeconds admission plugin adds to a pod that has no toleration for them."""


def parse_quantity(value: str | int | float) -> Fraction:
    """A resource quantity (``"500m"``, ``"1.5Gi"``, ``2``) as an exact number; ValueError if malformed."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a quantity")
    if isinstance(value, int | float):
        return Fraction(value)
    found = _QUANTITY.match(value.strip())
    if not found:
        raise ValueError(f"{value!r} is not a quantity (a number with an optional suffix such as m, Ki, Gi, k, G)")
    number, suffix = Fraction(found.group(1)), found.group(2)
    if suffix is None:
        return number
    if suffix[0] in "eE":
        return number * Fraction(10) ** int(suffix[1:])
    return number * _SUFFIXES[suffix]


def format_amount(value: Fraction) -> str:
    """An amount as a person writes it: ``3``, ``0.5``."""
    if value.denominator == 1:
        return str(value.numerator)
    return f"{float(value):g}"


def is_native_resource(name: str) -> bool:
    """cpu, memory, hugepages-*, ephemeral-storage and anything under kubernetes.io/ (core/helper)."""
    return "/" not in name or "kubernetes.io/" in name


def is_extended_resource(name: str) -> bool:
    """A resource a device plugin advertises (nvidia.com/gpu, nvidia.com/mig-1g.18gb, ...)."""
    return not is_native_resource(name) and not name.startswith("requests.")


def overcommit_allowed(name: str) -> bool:
    """Whether a request may be below its limit: native resources except hugepages."""
    return is_native_resource(name) and not name.startswith("hugepages-")


def name_of(obj: Json) -> str:
    """metadata.name of an object."""
    return str((obj.get("metadata") or {}).get("name", ""))


def namespace_of(obj: Json, default: str) -> str:
    """metadata.namespace of an object, ``default`` when it names none."""
    return str((obj.get("metadata") or {}).get("namespace") or default)


def labels_of(obj: Json) -> Mapping[str, str]:
    """metadata.labels of an object, empty when it has none."""
    return dict((obj.get("metadata") or {}).get("labels") or {})


def _requirement_matches(key: str, operator: str, values: Sequence[str], labels: Mapping[str, str]) -> bool:
    present = key in labels
    if operator == "In":
        return present and labels[key] in values
    if operator == "NotIn":
        return not present or labels[key] not in values
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    if operator in ("Gt", "Lt"):
        if not present or len(values) != 1:
            return False
        try:
            have, bound = int(labels[key]), int(values[0])
        except ValueError:
            return False
        return have > bound if operator == "Gt" else have < bound
    return False  # an unknown operator matches nothing, as the scheduler's parse error does


def label_selector_matches(selector: Json | None, labels: Mapping[str, str]) -> bool:
    """Whether a metav1.LabelSelector selects ``labels``: None selects nothing, ``{}`` everything."""
    if selector is None:
        return False
    if any(labels.get(key) != value for key, value in (selector.get("matchLabels") or {}).items()):
        return False
    return all(_requirement_matches(e["key"], e["operator"], e.get("values") or [], labels)
               for e in selector.get("matchExpressions") or [])


def node_selector_term_matches(term: Json, node: Json) -> bool:
    """Whether one nodeSelectorTerm matches ``node``: its expressions (labels) and fields (metadata.name)
    all hold; a term with neither matches no node."""
    expressions, fields = term.get("matchExpressions") or [], term.get("matchFields") or []
    if not expressions and not fields:
        return False
    labels = labels_of(node)
    if not all(_requirement_matches(e["key"], e["operator"], e.get("values") or [], labels) for e in expressions):
        return False
    name = (node.get("metadata") or {}).get("name", "")
    node_fields = {"metadata.name": name} if name else {}
    return all(_requirement_matches(f["key"], f["operator"], f.get("values") or [], node_fields) for f in fields)


def node_selector_matches(node_selector: Json, node: Json) -> bool:
    """Whether a NodeSelector (requiredDuringSchedulingIgnoredDuringExecution) matches: any of its terms."""
    return any(node_selector_term_matches(term, node) for term in node_selector.get("nodeSelectorTerms") or [])


def labels_match(wanted: Mapping[str, str], node: Json) -> bool:
    """Whether a pod's nodeSelector (a plain map) holds for ``node``'s labels."""
    labels = labels_of(node)
    return all(labels.get(key) == value for key, value in wanted.items())


def required_node_affinity(pod_spec: Json) -> Json | None:
    """The pod's requiredDuringSchedulingIgnoredDuringExecution node selector, or None."""
    return (((pod_spec.get("affinity") or {}).get("nodeAffinity") or {})
            .get("requiredDuringSchedulingIgnoredDuringExecution"))


def tolerates(toleration: Json, taint: Json) -> bool:
    """core/v1 Toleration.ToleratesTaint: effect and key match when set; Equal compares values, Exists not."""
    effect, key = toleration.get("effect") or "", toleration.get("key") or ""
    if effect and effect != taint.get("effect"):
        return False
    if key and key != taint.get("key"):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Equal":
        return (toleration.get("value") or "") == (taint.get("value") or "")
    return operator == "Exists"


def admitted_tolerations(pod_spec: Json) -> list[Json]:
    """The pod's tolerations as admission leaves them: its own plus DefaultTolerationSeconds' two."""
    own = list(pod_spec.get("tolerations") or [])
    # the plugin looks at key and effect only (an empty one counts as any), not at operator or value
    added = [t for t in DEFAULT_TOLERATIONS
             if not any((o.get("key") or t["key"]) == t["key"] and (o.get("effect") or "NoExecute") == "NoExecute"
                        for o in own)]
    return own + added


def untolerated_taint(node: Json, tolerations: Iterable[Json]) -> Json | None:
    """The first taint that keeps a pod with ``tolerations`` off ``node`` (the scheduler's filters), or None.

    A cordoned node counts as carrying node.kubernetes.io/unschedulable:NoSchedule (NodeUnschedulable),
    whether or not the node lifecycle controller has added that taint yet.
    """
    tolerations = list(tolerations)
    spec = node.get("spec") or {}
    if spec.get("unschedulable") and not any(tolerates(t, UNSCHEDULABLE_TAINT) for t in tolerations):
        return UNSCHEDULABLE_TAINT
    for taint in spec.get("taints") or []:
        if taint.get("effect") in DO_NOT_SCHEDULE and not any(tolerates(t, taint) for t in tolerations):
            return dict(taint)
    return None


def describe_taint(taint: Json) -> str:
    """A taint as kubectl writes it: ``key=value:Effect`` (``key:Effect`` without a value)."""
    value = taint.get("value") or ""
    return f"{taint.get('key', '')}{'=' + value if value else ''}:{taint.get('effect', '')}"


def describe_requirement(expression: Json) -> str:
    """A node selector requirement in a line: ``pool In (a, b)``, ``gpu Exists``, ``gpu.count Gt 3``."""
    key, operator, values = expression.get("key", ""), expression.get("operator", ""), expression.get("values") or []
    if operator in ("Exists", "DoesNotExist"):
        return f"{key} {operator}"
    if operator in ("Gt", "Lt") and len(values) == 1:
        return f"{key} {operator} {values[0]}"
    return f"{key} {operator} ({', '.join(values)})"


def describe_term(term: Json) -> str:
    """A nodeSelectorTerm in a line: its requirements joined by ``and``; ``(empty term)`` for none."""
    parts = [describe_requirement(e) for e in term.get("matchExpressions") or []]
    parts += [describe_requirement(f) for f in term.get("matchFields") or []]
    return " and ".join(parts) if parts else "(empty term)"


def scaled_int_or_percent(value: int | str, total: int, *, round_up: bool) -> int:
    """intstr.GetScaledValueFromIntOrPercent: an int as is; ``"N%"`` as N% of ``total``, rounded up or down.

    ValueError for a string that is not a whole percent.
    """
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is neither an int nor a percent")
    if isinstance(value, int):
        return value
    if not value.endswith("%") or not value[:-1].isdigit():
        raise ValueError(f"{value!r} is neither an int nor a percent such as '50%'")
    scaled = Fraction(int(value[:-1]) * total, 100)
    return math.ceil(scaled) if round_up else math.floor(scaled)


@dataclass(frozen=True)
class NodeChoice:
    """Which of the cluster's nodes a pod spec may land on, and why the others are out."""

    by_labels: tuple[Json, ...]
    """The nodes its nodeSelector allows (all of them without one)."""
    by_affinity: tuple[Json, ...]
    """The nodes its required node affinity allows (all of them without one)."""
    matched: tuple[Json, ...]
    """The nodes both allow."""
    blocked: tuple[tuple[Json, Json], ...]
    """(node, the taint that keeps the pod off it) for each matched node it cannot use."""
    available: tuple[Json, ...]
    """The matched nodes it can use."""


def choose_nodes(pod_spec: Json, nodes: Sequence[Json]) -> NodeChoice:
    """Apply the scheduler's node selection, cordon and taint filters of ``pod_spec`` to ``nodes``."""
    wanted: Mapping[str, str] = pod_spec.get("nodeSelector") or {}
    required = required_node_affinity(pod_spec)
    by_labels = tuple(n for n in nodes if labels_match(wanted, n))
    by_affinity = tuple(n for n in nodes if required is None or node_selector_matches(required, n))
    matched = tuple(n for n in by_labels if any(n is m for m in by_affinity))
    tolerations = admitted_tolerations(pod_spec)
    taints = [(n, untolerated_taint(n, tolerations)) for n in matched]
    return NodeChoice(by_labels, by_affinity, matched,
                      blocked=tuple((n, t) for n, t in taints if t is not None),
                      available=tuple(n for n, t in taints if t is None))


def pod_requests(pod_spec: Json) -> dict[str, Fraction]:
    """Extended resource -> what one pod of ``pod_spec`` asks of it (a request, or the limit it defaults to).

    Containers add up; a regular init container runs alone, so the pod asks the largest of them if that
    is more (a sidecar, restartPolicy Always, runs beside the containers and adds up with them).
    Unparsable amounts are left out.
    """
    total: dict[str, Fraction] = {}
    init: dict[str, Fraction] = {}
    for group in ("containers", "initContainers"):
        for container in pod_spec.get(group) or []:
            resources = container.get("resources") or {}
            asked = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
            alone = group == "initContainers" and container.get("restartPolicy") != "Always"
            for resource, raw in asked.items():
                if not is_extended_resource(resource):
                    continue
                try:
                    amount = parse_quantity(raw)
                except ValueError:
                    continue
                if alone:
                    init[resource] = max(init.get(resource, Fraction(0)), amount)
                else:
                    total[resource] = total.get(resource, Fraction(0)) + amount
    return {r: max(total.get(r, Fraction(0)), init.get(r, Fraction(0))) for r in {*total, *init}}


def allocatable(node: Json, resource: str) -> Fraction:
    """status.allocatable[resource] of a node; 0 when it has none (or an unparsable amount)."""
    try:
        return parse_quantity(((node.get("status") or {}).get("allocatable") or {}).get(resource, 0))
    except ValueError:
        return Fraction(0)
