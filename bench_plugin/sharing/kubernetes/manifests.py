"""The Kubernetes objects of an arm, as plain JSON-form dicts: a Deployment and a Service per class, and the
PriorityClasses the arm's priorities name.

Pure functions of the scenario, the arm and the campaign, so what the backend creates, what the
preflight judges and what the tests read are the same dicts. The names and labels are fixed (one
Deployment and one ClusterIP Service ``bench-<class>``, container port 8000 named ``http``; every
object labelled with the plugin, class, arm and campaign) so that release and restore find exactly
what the campaign made. GPU requests equal their limits: a whole GPU ``nvidia.com/gpu``, a shared
replica ``nvidia.com/gpu.shared`` (time-slicing, MPS), a MIG instance ``nvidia.com/mig-<profile>``.
"""

from __future__ import annotations

from typing import Any

from bench_plugin.scenario import Arm, ClassSettings, Scenario
from bench_plugin.scenario.kubernetes import ClassKubernetes, KubernetesSettings
from bench_plugin.sharing.kubernetes.deviceplugin import SHARED_RESOURCE, WHOLE_RESOURCE

Json = dict[str, Any]

MANAGED_BY = ("app.kubernetes.io/managed-by", "bench-plugin")
NAME_LABEL = "app.kubernetes.io/name"
CLASS_LABEL = "bench-plugin/class"
ARM_LABEL = "bench-plugin/arm"
CAMPAIGN_LABEL = "bench-plugin/campaign"
CONTAINER = "server"
PORT_NAME = "http"
REFERENCE_HOST = "0.0.0.0"
"""The reference server listens on every address of its pod, so the Service reaches it."""
REFERENCE_DEVICE = "cuda:0"
"""A pod sees only the GPU (or replica, or MIG instance) it was given, which is therefore its cuda:0."""

PRIORITY_CLASSES: dict[str, tuple[str, int, str]] = {
    "high": ("bench-plugin-high", 1_000_000, "PreemptLowerPriority"),
    "low": ("bench-plugin-low", -1000, "Never"),
}
"""Class priority -> (PriorityClass name, value, preemptionPolicy); ``normal`` is no priorityClassName."""

MIG_PREFIX = "nvidia.com/mig-"


def object_name(name: str) -> str:
    """The Deployment and Service of class ``name``."""
    return f"bench-{name}"


def settings_of(arm: Arm, name: str) -> ClassSettings:
    """Class ``name``'s knobs under ``arm`` (the defaults when the arm sets none)."""
    return arm.classes.get(name, ClassSettings())  # type: ignore[call-overload]


def campaign_labels(campaign: str) -> dict[str, str]:
    """The labels that select everything one campaign made."""
    return {MANAGED_BY[0]: MANAGED_BY[1], CAMPAIGN_LABEL: campaign}


def labels(name: str, arm: Arm, campaign: str) -> dict[str, str]:
    """The labels of class ``name``'s objects under ``arm``."""
    return {**campaign_labels(campaign), NAME_LABEL: object_name(name), CLASS_LABEL: name, ARM_LABEL: arm.name}


def mig_resource(device: str) -> str | None:
    """The MIG resource a class's ``device`` names (``mig-1g.18gb`` or ``nvidia.com/mig-1g.18gb``), or None."""
    resource = device if device.startswith("nvidia.com/") else f"nvidia.com/{device}"
    return resource if resource.startswith(MIG_PREFIX) and len(resource) > len(MIG_PREFIX) else None


def gpu_resource(arm: Arm, name: str) -> str:
    """The GPU resource class ``name`` asks one of under ``arm`` (the arm is assumed to have been checked)."""
    if arm.sharing in ("time-slicing", "mps"):
        return SHARED_RESOURCE
    if arm.sharing == "mig":
        device = settings_of(arm, name).device
        resource = mig_resource(device) if device else None
        assert resource is not None, f"arm {arm.name}: class {name} has no MIG device"
        return resource
    return WHOLE_RESOURCE


def reference_command(scenario: Scenario, name: str, arm: Arm, port: int) -> list[str]:
    """The command line of class ``name``'s reference server in its pod."""
    from bench_plugin.sharing.local import AUTO_SIZES

    spec = scenario.classes.get(name)
    server = spec.server
    size = AUTO_SIZES["gpu"][name] if server.size == "auto" else server.size
    cmd = ["python", "-m", "bench_plugin.servers", name, "--host", REFERENCE_HOST, "--port", str(port),
           "--size", size, "--model-name", spec.model, "--device", REFERENCE_DEVICE]
    if server.threads is not None:
        cmd += ["--threads", str(server.threads)]
    limit = settings_of(arm, name).memory_limit_mib
    if limit is not None:
        cmd += ["--memory-limit-mib", str(limit)]
    return cmd + list(server.args)


def container(scenario: Scenario, section: KubernetesSettings, name: str, arm: Arm) -> Json:
    """Class ``name``'s server container: command, port, resources (requests == limits), readiness probe."""
    own: ClassKubernetes = scenario.classes.get(name).kubernetes
    resources: dict[str, str] = {gpu_resource(arm, name): "1"}
    if own.cpu is not None:
        resources["cpu"] = own.cpu
    if own.memory is not None:
        resources["memory"] = own.memory
    out: Json = {
        "name": CONTAINER,
        "image": own.image or section.image,
        "ports": [{"name": PORT_NAME, "containerPort": own.port, "protocol": "TCP"}],
        "env": [{"name": k, "value": v} for k, v in sorted({"PYTHONUNBUFFERED": "1", **own.env}.items())],
        "resources": {"requests": dict(resources), "limits": dict(resources)},
        "readinessProbe": {"httpGet": {"path": own.health_path, "port": PORT_NAME},
                           "periodSeconds": 2, "timeoutSeconds": 2, "failureThreshold": 3},
    }
    if own.command is None and own.args is None:
        out["command"] = reference_command(scenario, name, arm, own.port)
    else:
        if own.command is not None:
            out["command"] = list(own.command)
        if own.args is not None:
            out["args"] = list(own.args)
    return out


def node_affinity(node_labels: dict[str, str]) -> Json:
    """A required node affinity to nodes carrying every label of ``node_labels``."""
    expressions = [{"key": k, "operator": "In", "values": [v]} for k, v in sorted(node_labels.items())]
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": expressions}]}}}


def deployment(scenario: Scenario, section: KubernetesSettings, name: str, arm: Arm, *, namespace: str,
               campaign: str) -> Json:
    """Class ``name``'s Deployment under ``arm``: one replica, recreated (never two pods holding its GPU)."""
    settings = settings_of(arm, name)
    own = labels(name, arm, campaign)
    pod_spec: Json = {
        "containers": [container(scenario, section, name, arm)],
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
    }
    if section.node_selector:
        pod_spec["nodeSelector"] = dict(section.node_selector)
    if section.tolerations:
        pod_spec["tolerations"] = [t.to_json() for t in section.tolerations]
    if settings.node_labels:
        pod_spec["affinity"] = node_affinity(settings.node_labels)
    if settings.priority in PRIORITY_CLASSES:
        pod_spec["priorityClassName"] = PRIORITY_CLASSES[settings.priority][0]
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": object_name(name), "namespace": namespace, "labels": own},
        "spec": {
            "replicas": 1,
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": {NAME_LABEL: object_name(name), CAMPAIGN_LABEL: campaign}},
            "template": {"metadata": {"labels": own}, "spec": pod_spec},
        },
    }


def service(scenario: Scenario, name: str, arm: Arm, *, namespace: str, campaign: str) -> Json:
    """Class ``name``'s ClusterIP Service, on its container's port."""
    port = scenario.classes.get(name).kubernetes.port
    return {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": object_name(name), "namespace": namespace, "labels": labels(name, arm, campaign)},
        "spec": {
            "type": "ClusterIP",
            "selector": {NAME_LABEL: object_name(name), CAMPAIGN_LABEL: campaign},
            "ports": [{"name": PORT_NAME, "port": port, "targetPort": PORT_NAME, "protocol": "TCP"}],
        },
    }


def priority_class(priority: str, campaign: str) -> Json:
    """The PriorityClass of class priority ``priority`` (``high`` or ``low``), as the campaign would create it."""
    name, value, policy = PRIORITY_CLASSES[priority]
    return {
        "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
        "metadata": {"name": name, "labels": campaign_labels(campaign)},
        "value": value, "preemptionPolicy": policy, "globalDefault": False,
        "description": f"bench-plugin: workload classes of priority '{priority}' in GPU sharing campaigns",
    }


def arm_objects(scenario: Scenario, section: KubernetesSettings, arm: Arm, class_names: list[str], *,
                namespace: str, campaign: str) -> list[Json]:
    """Every object of ``arm`` for ``class_names``: PriorityClasses first, then a Deployment and a Service per class."""
    priorities = sorted({settings_of(arm, n).priority for n in class_names} & set(PRIORITY_CLASSES))
    out = [priority_class(p, campaign) for p in priorities]
    for name in class_names:
        out.append(deployment(scenario, section, name, arm, namespace=namespace, campaign=campaign))
        out.append(service(scenario, name, arm, namespace=namespace, campaign=campaign))
    return out
