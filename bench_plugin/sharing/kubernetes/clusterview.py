"""What the preflight reads of the cluster (nodes, PriorityClasses, PodDisruptionBudgets), read once.

``read_cluster`` lists them through the official client and keeps their JSON form (the API's own
camelCase keys, as ``kubectl get -o json`` shows them), so the judging in preflight.py works on plain
dicts and never talks to the cluster. Only list calls are made; the identity needs ``list`` on nodes,
priorityclasses.scheduling.k8s.io (cluster-wide) and poddisruptionbudgets.policy (in the namespace).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bench_plugin.sharing.base import ApplyError
from bench_plugin.sharing.kubernetes.semantics import Json, name_of

PAGE = 500
"""Items per list call (the API server pages with ``continue``)."""


class ClusterReadError(ApplyError):
    """The cluster could not be read for the preflight; the message names what and why, in one line."""


@dataclass(frozen=True)
class ClusterView:
    """The cluster as the preflight sees it: JSON-form dicts, no client objects.

    There are no pods here on purpose: capacity is judged against allocatable, not free, GPUs.
    """

    namespace: str
    """Where the arm's namespaced objects go when they name none; the budgets are this namespace's."""
    nodes: tuple[Json, ...] = ()
    priority_classes: tuple[Json, ...] = ()
    pod_disruption_budgets: tuple[Json, ...] = ()

    def priority_class(self, name: str) -> Json | None:
        """The cluster's PriorityClass ``name``, or None."""
        return next((pc for pc in self.priority_classes if name_of(pc) == name), None)


def read_cluster(api_client: Any, namespace: str) -> ClusterView:
    """List nodes, PriorityClasses and ``namespace``'s PodDisruptionBudgets through the official client.

    ``api_client`` is a ``kubernetes.client.ApiClient``. Raises ClusterReadError, naming the resource
    and the API's reason, when a list fails.
    """
    from kubernetes import client as k8s  # the kubernetes extra, needed only here

    def listed(what: str, call: Callable[..., Any]) -> tuple[Json, ...]:
        from urllib3.exceptions import HTTPError

        from kubernetes.client.rest import ApiException

        items: list[Json] = []
        token: str | None = None
        try:
            while True:
                page = call(limit=PAGE, _continue=token) if token else call(limit=PAGE)
                items += [dict(api_client.sanitize_for_serialization(item)) for item in page.items]
                token = page.metadata._continue if page.metadata else None
                if not token:
                    return tuple(items)
        except ApiException as error:
            raise ClusterReadError(f"preflight: cannot list {what}: {api_reason(error)}") from None
        except HTTPError as error:
            raise ClusterReadError(f"preflight: cannot reach the API server to list {what}: {error}") from None

    policy = k8s.PolicyV1Api(api_client)
    return ClusterView(
        namespace=namespace,
        nodes=listed("nodes", k8s.CoreV1Api(api_client).list_node),
        priority_classes=listed("priorityclasses", k8s.SchedulingV1Api(api_client).list_priority_class),
        pod_disruption_budgets=listed(
            f"poddisruptionbudgets in namespace {namespace}",
            lambda **kw: policy.list_namespaced_pod_disruption_budget(namespace, **kw)))


def api_reason(error: Any) -> str:
    """``403 Forbidden: nodes is forbidden: User ...`` from an ApiException, in one line."""
    try:
        detail = str(json.loads(error.body or "{}").get("message") or "")
    except (ValueError, AttributeError):
        detail = str(error.body or "")
    reason = f"{error.status} {error.reason}".strip()
    return f"{reason}: {detail}".replace("\n", " ") if detail else reason
