"""What the kubernetes backend refuses in an arm before anything runs, without asking the cluster.

On Kubernetes a class's GPU is whatever the device plugin hands its pod, so the local backend's knobs
mean something else here or nothing at all:

=================  ==============================================================================
setting            on Kubernetes
=================  ==============================================================================
sharing            exclusive: ``nvidia.com/gpu`` 1 per class; time-slicing / mps: ``nvidia.com/gpu.shared``
                   1 per class (the device plugin's config); mig: the class's ``device``
device             only with sharing ``mig``: the MIG resource (``mig-1g.18gb`` or ``nvidia.com/mig-1g.18gb``)
priority           high / low: the PriorityClasses bench-plugin-high / bench-plugin-low (scheduling and
                   preemption, not GPU streams)
node_labels        a required node affinity
memory_limit_mib   the reference server's ``--memory-limit-mib`` (PyTorch's allocator); refused for a
                   class that runs its own command
thread_percentage  refused: the device plugin's MPS daemon gives each replica 100 / replicas percent
cpu_affinity       refused: it pins processes of this host (local backend); a pod's cores are the
                   kubelet's (CPU manager), not the campaign's
=================  ==============================================================================
"""

from __future__ import annotations

from bench_plugin.scenario import Arm, Scenario
from bench_plugin.scenario.kubernetes import label_value_problem
from bench_plugin.sharing.base import ApplyError
from bench_plugin.sharing.kubernetes.api import Json
from bench_plugin.sharing.kubernetes.deviceplugin import config_key
from bench_plugin.sharing.kubernetes.manifests import mig_resource, settings_of


def check_arm(scenario: Scenario, arm: Arm) -> None:
    """Raise ApplyError, naming the arm, the class and the setting, for what the backend cannot apply."""
    try:
        _check_name(arm)
        for name in scenario.classes.names():
            _check_class(scenario, arm, name)
    except ValueError as exc:
        raise ApplyError(f"arm '{arm.name}': {exc}") from None


def _check_name(arm: Arm) -> None:
    problem = label_value_problem(arm.name) or label_value_problem(config_key(arm.name))
    if problem:
        raise ValueError(f"the arm's name labels its objects and names its device plugin config "
                         f"({config_key(arm.name)}): {problem}")


def _check_class(scenario: Scenario, arm: Arm, name: str) -> None:
    spec = scenario.classes.get(name)
    settings = settings_of(arm, name)
    key = f"classes.{name}"
    own_command = spec.kubernetes.command is not None or spec.kubernetes.args is not None
    if spec.server.kind == "command" and not own_command:
        raise ValueError(f"{key}.server is a command line for this host; give {key}.kubernetes.command (and args) "
                         "for the pod, or use the reference server")
    if name in arm.cpu_affinity:
        raise ValueError(f"cpu_affinity.{name}: CPU affinity pins server processes of this host (the local "
                         "backend); on Kubernetes a pod's cores are the kubelet's to choose: give "
                         f"{key}.kubernetes.cpu a whole number of CPUs (with memory, a Guaranteed pod) on nodes whose "
                         "kubelet runs the static CPU manager policy, which then gives it cores of its own")
    if settings.thread_percentage is not None:
        raise ValueError(f"{key}.thread_percentage: on Kubernetes the device plugin's MPS daemon sets each "
                         "replica's share (100 / replicas per cent); leave it unset")
    if settings.memory_limit_mib is not None and own_command:
        raise ValueError(f"{key}.memory_limit_mib reaches only the reference server (--memory-limit-mib); "
                         f"{key}.kubernetes sets its own command")
    if arm.sharing == "mig":
        if settings.device is None:
            raise ValueError(f"{key}.device: sharing 'mig' needs the MIG resource of each class "
                             "(e.g. mig-1g.18gb, asked as nvidia.com/mig-1g.18gb)")
        if mig_resource(settings.device) is None:
            raise ValueError(f"{key}.device {settings.device!r} is not a MIG resource (e.g. mig-1g.18gb or "
                             "nvidia.com/mig-1g.18gb)")
    elif settings.device is not None:
        raise ValueError(f"{key}.device {settings.device!r}: on Kubernetes the device plugin chooses a pod's GPU; "
                         "device names a MIG resource with sharing 'mig' (node_labels picks nodes)")


def priority_conflict(existing: Json, wanted: Json) -> str | None:
    """Why PriorityClass ``existing`` cannot serve as ``wanted`` (value and policy are immutable), or None."""
    value, policy = existing.get("value"), existing.get("preemptionPolicy") or "PreemptLowerPriority"
    if value == wanted["value"] and policy == wanted["preemptionPolicy"]:
        return None
    name = wanted["metadata"]["name"]
    ours = (existing["metadata"].get("labels") or {}).get("app.kubernetes.io/managed-by") == "bench-plugin"
    whose = "left by an earlier bench-plugin version" if ours else "not made by bench-plugin"
    return (f"PriorityClass {name} exists with value {value} and preemptionPolicy {policy} ({whose}); bench-plugin "
            f"needs value {wanted['value']} and {wanted['preemptionPolicy']}: delete or rename it")
