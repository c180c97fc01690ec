"""Kubernetes' own matching rules as the preflight restates them (bench_plugin.sharing.kubernetes.semantics).

Table tests on plain dicts, no cluster: each row is a case read off the v1.34 sources (apimachinery's
Quantity and label Requirement, component-helpers' nodeaffinity, core/v1 ToleratesTaint, the scheduler's
NodeUnschedulable filter, intstr scaling). Quantities are also checked against the official client's
parser. test_preflight.py shows the same rules holding against the real control plane.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from bench_plugin.sharing.kubernetes.semantics import (
    UNSCHEDULABLE_TAINT,
    admitted_tolerations,
    choose_nodes,
    describe_requirement,
    describe_taint,
    is_extended_resource,
    label_selector_matches,
    node_selector_matches,
    overcommit_allowed,
    parse_quantity,
    pod_requests,
    scaled_int_or_percent,
    tolerates,
    untolerated_taint,
)


def node(name: str, labels: dict[str, str] | None = None, taints: list[dict[str, str]] | None = None,
         unschedulable: bool = False) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels or {}},
            "spec": {"taints": taints or [], "unschedulable": unschedulable}}


@pytest.mark.parametrize(("text", "value"), [
    ("1", Fraction(1)), ("0", Fraction(0)), ("500m", Fraction(1, 2)), ("1.5", Fraction(3, 2)),
    ("1Ki", Fraction(1024)), ("1.5Gi", Fraction(3 * 2**29)), ("2k", Fraction(2000)), ("1M", Fraction(10**6)),
    ("1e3", Fraction(1000)), ("1E-3", Fraction(1, 1000)), ("100n", Fraction(1, 10**7)), (".5", Fraction(1, 2)),
    ("5.", Fraction(5)), ("+2", Fraction(2)), ("-1", Fraction(-1)), (3, Fraction(3)),
])
def test_quantities_agree_with_the_official_client(text: str | int, value: Fraction) -> None:
    from kubernetes.utils import parse_quantity as official

    assert parse_quantity(text) == value
    assert Fraction(official(text)) == value


@pytest.mark.parametrize("text", ["", "one", "1ki", "1 Gi", "1Gb", "--1", "1e", "1e1.5", "Gi"])
def test_malformed_quantities_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="is not a quantity"):
        parse_quantity(text)


@pytest.mark.parametrize(("name", "extended", "overcommit"), [
    ("nvidia.com/gpu", True, False), ("nvidia.com/gpu.shared", True, False), ("nvidia.com/mig-1g.18gb", True, False),
    ("cpu", False, True), ("memory", False, True), ("ephemeral-storage", False, True),
    ("hugepages-2Mi", False, False), ("kubernetes.io/something", False, True),
    ("requests.nvidia.com/gpu", False, False),
])
def test_which_resources_may_be_overcommitted(name: str, extended: bool, overcommit: bool) -> None:
    assert is_extended_resource(name) is extended
    assert overcommit_allowed(name) is overcommit


LABELS = {"app": "bench-llm", "tier": "gpu"}


@pytest.mark.parametrize(("selector", "matches"), [
    (None, False),  # a missing selector selects nothing
    ({}, True),  # an empty one everything (policy/v1)
    ({"matchLabels": {"app": "bench-llm"}}, True),
    ({"matchLabels": {"app": "bench-asr"}}, False),
    ({"matchLabels": {"app": "bench-llm", "missing": "x"}}, False),
    ({"matchExpressions": [{"key": "app", "operator": "In", "values": ["bench-llm", "bench-asr"]}]}, True),
    ({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["bench-llm"]}]}, False),
    ({"matchExpressions": [{"key": "absent", "operator": "NotIn", "values": ["x"]}]}, True),
    ({"matchExpressions": [{"key": "tier", "operator": "Exists"}]}, True),
    ({"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}, False),
    ({"matchLabels": {"app": "bench-llm"}, "matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}, False),
])
def test_label_selectors(selector: dict[str, Any] | None, matches: bool) -> None:
    assert label_selector_matches(selector, LABELS) is matches


GPU_NODE = node("gpu-a", {"nvidia.com/gpu.product": "NVIDIA-H200", "nvidia.com/gpu.count": "8", "pool": "inference"})


def term(*expressions: dict[str, Any], fields: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"matchExpressions": list(expressions), **({"matchFields": fields} if fields else {})}


def expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": operator, **({"values": list(values)} if values else {})}


@pytest.mark.parametrize(("terms", "matches"), [
    ([term(expr("nvidia.com/gpu.product", "In", "NVIDIA-H200", "NVIDIA-A100"))], True),
    ([term(expr("nvidia.com/gpu.product", "In", "NVIDIA-A100"))], False),
    ([term(expr("nvidia.com/gpu.product", "NotIn", "NVIDIA-A100"))], True),
    ([term(expr("zone", "NotIn", "a"))], True),  # NotIn holds for a node without the label
    ([term(expr("pool", "Exists"))], True),
    ([term(expr("pool", "DoesNotExist"))], False),
    ([term(expr("zone", "DoesNotExist"))], True),
    ([term(expr("nvidia.com/gpu.count", "Gt", "4"))], True),
    ([term(expr("nvidia.com/gpu.count", "Gt", "8"))], False),
    ([term(expr("nvidia.com/gpu.count", "Lt", "9"))], True),
    ([term(expr("pool", "Gt", "1"))], False),  # a label that is no integer never compares
    ([term(expr("zone", "Lt", "1"))], False),  # nor one that is missing
    ([term(expr("pool", "Exists"), expr("nvidia.com/gpu.product", "In", "NVIDIA-A100"))], False),  # ANDed
    ([term(expr("nvidia.com/gpu.product", "In", "NVIDIA-A100")), term(expr("pool", "In", "inference"))], True),  # ORed
    ([term()], False),  # an empty term matches no node
    ([], False),
    ([term(fields=[expr("metadata.name", "In", "gpu-a")])], True),
    ([term(fields=[expr("metadata.name", "NotIn", "gpu-a")])], False),
    ([term(expr("pool", "Exists"), fields=[expr("metadata.name", "In", "gpu-b")])], False),
])
def test_node_selector_terms(terms: list[dict[str, Any]], matches: bool) -> None:
    assert node_selector_matches({"nodeSelectorTerms": terms}, GPU_NODE) is matches


NO_SCHEDULE = {"key": "dedicated", "value": "llm", "effect": "NoSchedule"}


@pytest.mark.parametrize(("toleration", "tolerated"), [
    ({"key": "dedicated", "operator": "Equal", "value": "llm", "effect": "NoSchedule"}, True),
    ({"key": "dedicated", "value": "llm"}, True),  # no operator is Equal; no effect is any effect
    ({"key": "dedicated", "operator": "Equal", "value": "asr"}, False),
    ({"key": "dedicated", "operator": "Exists"}, True),
    ({"key": "dedicated", "operator": "Exists", "effect": "NoExecute"}, False),
    ({"operator": "Exists"}, True),  # no key with Exists tolerates every taint
    ({"key": "other", "operator": "Exists"}, False),
    ({"key": "dedicated", "operator": "Gt", "value": "1"}, False),  # not an operator of 1.34
])
def test_tolerations(toleration: dict[str, str], tolerated: bool) -> None:
    assert tolerates(toleration, NO_SCHEDULE) is tolerated


def test_admission_adds_the_default_not_ready_and_unreachable_tolerations() -> None:
    added = admitted_tolerations({})
    assert [(t["key"], t["effect"]) for t in added] == [
        ("node.kubernetes.io/not-ready", "NoExecute"), ("node.kubernetes.io/unreachable", "NoExecute")]
    # a pod that tolerates everything (no key) gets neither
    assert admitted_tolerations({"tolerations": [{"operator": "Exists"}]}) == [{"operator": "Exists"}]


@pytest.mark.parametrize(("candidate", "tolerations", "blocking"), [
    (node("n"), [], None),
    (node("n", taints=[NO_SCHEDULE]), [], NO_SCHEDULE),
    (node("n", taints=[{**NO_SCHEDULE, "effect": "NoExecute"}]), [], {**NO_SCHEDULE, "effect": "NoExecute"}),
    (node("n", taints=[{**NO_SCHEDULE, "effect": "PreferNoSchedule"}]), [], None),  # only lowers the score
    (node("n", taints=[NO_SCHEDULE]), [{"key": "dedicated", "operator": "Exists"}], None),
    (node("n", unschedulable=True), [], UNSCHEDULABLE_TAINT),  # cordoned, tainted or not yet
    (node("n", unschedulable=True), [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}], None),
    # the default NoExecute tolerations let a pod onto a node that only has the NoExecute not-ready taint
    (node("n", taints=[{"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}]), admitted_tolerations({}),
     None),
    (node("n", taints=[{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]), admitted_tolerations({}),
     {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}),
])
def test_untolerated_taints(candidate: dict[str, Any], tolerations: list[dict[str, Any]],
                            blocking: dict[str, str] | None) -> None:
    assert untolerated_taint(candidate, tolerations) == blocking


def test_choosing_nodes_applies_selector_affinity_and_taints() -> None:
    free = node("free", {"pool": "inference"})
    tainted = node("tainted", {"pool": "inference"}, [NO_SCHEDULE])
    elsewhere = node("elsewhere", {"pool": "batch"})
    spec = {"nodeSelector": {"pool": "inference"},
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [term(expr("pool", "Exists"))]}}}}
    choice = choose_nodes(spec, [free, tainted, elsewhere])
    assert [n["metadata"]["name"] for n in choice.matched] == ["free", "tainted"]
    assert [n["metadata"]["name"] for n in choice.available] == ["free"]
    assert [(n["metadata"]["name"], t) for n, t in choice.blocked] == [("tainted", NO_SCHEDULE)]


@pytest.mark.parametrize(("value", "total", "up", "down"), [
    (2, 5, 2, 2), ("50%", 3, 2, 1), ("100%", 2, 2, 2), ("0%", 4, 0, 0), ("10%", 1, 1, 0), ("34%", 3, 2, 1),
])
def test_int_or_percent_scaling(value: int | str, total: int, up: int, down: int) -> None:
    assert scaled_int_or_percent(value, total, round_up=True) == up
    assert scaled_int_or_percent(value, total, round_up=False) == down


@pytest.mark.parametrize("value", ["50", "half%", "1.5%", True])
def test_int_or_percent_refuses_other_values(value: Any) -> None:
    with pytest.raises(ValueError, match="neither an int nor a percent"):
        scaled_int_or_percent(value, 3, round_up=True)


def test_pod_requests_add_containers_and_take_the_largest_init_container() -> None:
    def container(gpus: str, mig: str | None = None, **extra: Any) -> dict[str, Any]:
        limits = {"nvidia.com/gpu": gpus, **({"nvidia.com/mig-1g.18gb": mig} if mig else {})}
        return {"name": "c", "resources": {"limits": limits}, **extra}

    spec = {"containers": [container("1"), container("1", mig="2"), {"name": "cpu-only"}],
            "initContainers": [container("3"), container("1", restartPolicy="Always")]}
    # containers 1 + 1 + the sidecar 1 = 3, the regular init container alone 3: the pod asks 3
    assert pod_requests(spec) == {"nvidia.com/gpu": Fraction(3), "nvidia.com/mig-1g.18gb": Fraction(2)}
    # requests win over limits (they differ only in an object the preflight refuses anyway)
    assert pod_requests({"containers": [{"resources": {"requests": {"nvidia.com/gpu": "1"},
                                                       "limits": {"nvidia.com/gpu": "2", "cpu": "4"}}}]}) == {
        "nvidia.com/gpu": Fraction(1)}


def test_descriptions_read_like_kubectl() -> None:
    assert describe_taint(NO_SCHEDULE) == "dedicated=llm:NoSchedule"
    assert describe_taint(UNSCHEDULABLE_TAINT) == "node.kubernetes.io/unschedulable:NoSchedule"
    assert describe_requirement(expr("pool", "In", "a", "b")) == "pool In (a, b)"
    assert describe_requirement(expr("pool", "DoesNotExist")) == "pool DoesNotExist"
    assert describe_requirement(expr("nvidia.com/gpu.count", "Gt", "3")) == "nvidia.com/gpu.count Gt 3"
