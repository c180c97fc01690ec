"""How the local backend lays out an arm: what it refuses, the segments, a device per class, and
the environment and flags each server gets.

Pure functions of the arm, the host's devices and the kind of each class's server, so every rule
here is tested without a GPU. What each sharing mode and knob does, and why some combinations are
refused, is in docs/sharing-modes.md; in short:

=================  =============================  ==========================  =========================
knob               time-slicing / exclusive       mps                         mig
=================  =============================  ==========================  =========================
memory_limit_mib   reference: --memory-limit-mib  CUDA_MPS_PINNED_DEVICE_      reference: --memory-
                   (PyTorch allocator only)       MEM_LIMIT (driver)          limit-mib
thread_percentage  refused                        CUDA_MPS_ACTIVE_THREAD_     refused
                                                  PERCENTAGE
priority           time-slicing, reference:       low: CUDA_MPS_CLIENT_       refused (alone on its
                   --stream-priority; exclusive:  PRIORITY=1; high: refused   instance)
                   refused (alone on its device)
=================  =============================  ==========================  =========================

A server of kind ``command`` is not ours to change: memory caps and priorities reach it only through
MPS's environment variables, so elsewhere they are refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from bench_plugin.scenario import Arm, ClassSettings
from bench_plugin.sharing.affinity import CpuPin
from bench_plugin.sharing.base import ApplyError
from bench_plugin.sharing.devices import Device
from bench_plugin.sharing.mps import CLIENT_PRIORITY, client_env

MIG_GUIDE = "https://docs.nvidia.com/datacenter/tesla/mig-user-guide/"
MIG_HOWTO = (
    "this tool never changes MIG mode or creates instances; an administrator enables MIG mode "
    "(nvidia-smi -i <gpu> -mig 1, on an idle GPU) and creates instances (nvidia-smi mig -i <gpu> -cgi <profiles> -C; "
    f"profiles: nvidia-smi mig -lgip); see NVIDIA's MIG user guide, {MIG_GUIDE}"
)


@dataclass(frozen=True)
class ServerPlan:
    """How one class's server starts: on which device, with which environment and extra flags."""

    device: Device
    env: dict[str, str]
    """Environment variables the backend sets for this server (recorded in the placement)."""
    args: list[str]
    """Extra reference-server flags (--memory-limit-mib, --stream-priority); empty for ``command`` servers."""
    pin: CpuPin | None = None
    """The CPU cores (and NUMA node) the arm's ``cpu_affinity`` gives this server; None: the campaign's own."""
    arm: str = ""
    """The arm's name (a ``command`` server's ``{arm}``: the contention simulator picks its speed by it)."""
    sharing: str = "exclusive"
    """The arm's sharing mode (a ``command`` server's ``{sharing}``)."""

    @property
    def device_arg(self) -> str:
        """What ``--device`` (or ``{device}``) says: ``cuda:0`` on a GPU, since the server sees only that one."""
        return "cuda:0" if self.device.is_gpu else "cpu"


def settings_of(arm: Arm, name: str) -> ClassSettings:
    """Class ``name``'s knobs under ``arm`` (the defaults when the arm sets none)."""
    return arm.classes.get(name, ClassSettings())  # type: ignore[call-overload]


def whole_devices(devices: list[Device]) -> list[Device]:
    """Devices a server may have whole: the CPU, or GPUs whose MIG mode is off."""
    return [d for d in devices if not d.is_mig and not d.mig_enabled]


def mig_devices(devices: list[Device]) -> list[Device]:
    """The MIG instances that exist."""
    return [d for d in devices if d.is_mig]


def find_device(devices: list[Device], wanted: str) -> Device | None:
    """The device named ``wanted`` (its name or its UUID)."""
    return next((d for d in devices if wanted in (d.name, d.uuid)), None)


def plan_segments(arm: Arm, class_names: list[str], devices: list[Device]) -> list[list[str]]:
    """Groups of classes measured together.

    An exclusive arm short of devices runs the classes in turn, as many at once as there are devices
    (each on its own): on one device each class alone, on two GPUs with three classes two then one.
    """
    per_segment = max(1, len(whole_devices(devices)))
    if arm.sharing == "exclusive" and per_segment < len(class_names):
        return [class_names[i:i + per_segment] for i in range(0, len(class_names), per_segment)]
    return [list(class_names)]


def assign_devices(arm: Arm, class_names: list[str], devices: list[Device]) -> dict[str, Device]:
    """The device of each class of one segment (the arm is assumed to have passed :func:`check_arm`)."""
    named = {name: settings_of(arm, name).device for name in class_names}
    out = {name: find_device(devices, wanted) for name, wanted in named.items() if wanted is not None}
    whole = whole_devices(devices)
    taken = {d.name for d in out.values() if d is not None}
    free = iter([d for d in mig_devices(devices) if d.name not in taken])
    for index, name in enumerate(class_names):
        if out.get(name) is not None:
            continue
        if arm.sharing == "mig":
            out[name] = next(free)
        elif arm.sharing == "exclusive":
            out[name] = whole[index % len(whole)]
        else:
            out[name] = whole[0]
    return {name: device for name, device in out.items() if device is not None}


def server_plan(arm: Arm, name: str, device: Device, kind: str, mps_env: dict[str, str] | None = None) -> ServerPlan:
    """Environment and flags for class ``name``'s server of ``kind`` on ``device``.

    ``mps_env`` is the daemon's pipe and log directories when the arm is ``mps``.
    """
    settings = settings_of(arm, name)
    env = {"PYTHONUNBUFFERED": "1"}
    args: list[str] = []
    if device.is_gpu:
        # A UUID pins the server to one GPU (or MIG instance) whatever order CUDA would enumerate them in.
        env["CUDA_VISIBLE_DEVICES"] = device.uuid or device.name.removeprefix("cuda:")
    if arm.sharing == "mps":
        env.update(mps_env or {})
        env.update(client_env(settings))
    elif kind == "reference":
        if settings.memory_limit_mib is not None:
            args += ["--memory-limit-mib", str(settings.memory_limit_mib)]
        if settings.priority != "normal":
            args += ["--stream-priority", settings.priority]
    return ServerPlan(device, env, args, arm=arm.name, sharing=arm.sharing)


def check_arm(arm: Arm, class_names: list[str], kinds: Mapping[str, str], devices: list[Device], *,
              mps_control: str | None, foreign_mps_pipe: str | None = None) -> None:
    """Raise ApplyError, naming the arm, the class and the reason, if this host cannot apply ``arm``.

    ``kinds``: each class's server kind (reference or command); ``mps_control``: the control binary,
    None when there is none; ``foreign_mps_pipe``: the control pipe of a daemon this tool did not start.
    """
    try:
        _check_mode(arm, devices, mps_control, foreign_mps_pipe)
        _check_devices(arm, class_names, devices)
        for name in class_names:
            _check_knobs(arm, name, kinds.get(name, "reference"), devices)
        for name, device in assign_devices(arm, class_names, devices).items():
            limit = settings_of(arm, name).memory_limit_mib
            if limit is not None and device.memory_mib is not None and limit > device.memory_mib:
                raise ValueError(f"classes.{name}.memory_limit_mib {limit} is more than {device.name} has "
                                 f"({device.memory_mib} MiB)")
    except ValueError as exc:
        raise ApplyError(f"arm '{arm.name}': {exc}") from None


def _check_mode(arm: Arm, devices: list[Device], mps_control: str | None, foreign_mps_pipe: str | None) -> None:
    has_gpu = any(d.is_gpu for d in devices)
    if arm.sharing in ("mps", "mig") and not has_gpu:
        raise ValueError(f"sharing '{arm.sharing}' needs an NVIDIA GPU; this host has none")
    if arm.sharing == "mps" and mps_control is None:
        raise ValueError("sharing 'mps' needs the MPS control daemon, but nvidia-cuda-mps-control is neither on PATH "
                         "nor in /usr/local/nvidia/bin (it ships with the NVIDIA driver)")
    if arm.sharing == "mig":
        gpus = [d for d in devices if d.is_gpu and not d.is_mig]
        if not any(d.mig_enabled for d in gpus):
            states = ", ".join(f"{d.name} {d.model}" for d in gpus)
            raise ValueError(f"sharing 'mig' needs MIG instances, but MIG mode is disabled on every GPU ({states}); "
                             f"{MIG_HOWTO}")
        return
    if has_gpu and not whole_devices(devices):
        raise ValueError(f"sharing '{arm.sharing}' needs a whole GPU, but every GPU has MIG mode enabled; use "
                         "sharing 'mig' (this tool never changes MIG mode)")
    if has_gpu and arm.sharing != "mps" and foreign_mps_pipe is not None:
        raise ValueError(f"an MPS control daemon this tool did not start listens at {foreign_mps_pipe}; every CUDA "
                         f"process here would become its client, so sharing '{arm.sharing}' would silently run under "
                         "MPS. Stop it (echo quit | nvidia-cuda-mps-control), or remove the directory if it is stale")


def _check_devices(arm: Arm, class_names: list[str], devices: list[Device]) -> None:
    known = ", ".join(d.name for d in devices)
    named: dict[str, str] = {}
    for name in class_names:
        wanted = settings_of(arm, name).device
        if wanted is None:
            continue
        device = find_device(devices, wanted)
        if device is None:
            raise ValueError(f"classes.{name}.device {wanted!r} is not on this host (devices: {known})")
        if arm.sharing == "mig" and not device.is_mig:
            raise ValueError(f"classes.{name}.device {wanted!r} is not a MIG instance; sharing 'mig' places each "
                             f"class on one (instances: {', '.join(d.name for d in mig_devices(devices)) or 'none'})")
        if arm.sharing != "mig" and device.is_mig:
            raise ValueError(f"classes.{name}.device {wanted!r} is a MIG instance; use it with sharing 'mig'")
        if arm.sharing != "mig" and device.mig_enabled:
            raise ValueError(f"classes.{name}.device {wanted!r} has MIG mode enabled: its compute is only reachable "
                             "through its MIG instances (sharing 'mig')")
        if arm.sharing == "mig" and device.name in named.values():
            other = next(n for n, d in named.items() if d == device.name)
            raise ValueError(f"classes {other} and {name} both name MIG instance {device.name}; sharing 'mig' gives "
                             "each class its own")
        named[name] = device.name
    if arm.sharing == "mig":
        instances = mig_devices(devices)
        if len(instances) < len(class_names):
            listed = ", ".join(f"{d.name} ({d.model}, parent {d.parent})" for d in instances) or "none"
            raise ValueError(f"sharing 'mig' places each class on its own MIG instance: {len(class_names)} classes, "
                             f"{len(instances)} instances ({listed}); {MIG_HOWTO}")


def _check_knobs(arm: Arm, name: str, kind: str, devices: list[Device]) -> None:
    settings = settings_of(arm, name)
    has_gpu = any(d.is_gpu for d in devices)
    key = f"classes.{name}"
    if settings.node_labels:
        raise ValueError(f"{key}.node_labels is a Kubernetes-only setting (required node affinity); this host has "
                         "no nodes to choose from: run the arm with --backend kubernetes")
    if settings.thread_percentage is not None and arm.sharing != "mps":
        raise ValueError(f"{key}.thread_percentage needs sharing 'mps' (it is CUDA_MPS_ACTIVE_THREAD_PERCENTAGE)")
    for knob, value, default in (("memory_limit_mib", settings.memory_limit_mib, None),
                                 ("priority", settings.priority, "normal")):
        if value == default:
            continue
        if not has_gpu:
            raise ValueError(f"{key}.{knob} needs an NVIDIA GPU; this host has none")
        if arm.sharing != "mps" and kind == "command":
            raise ValueError(f"{key}.{knob}: a server of kind 'command' can only be capped or prioritised through "
                             "MPS (the tool cannot change another server's allocator or streams); use sharing 'mps' "
                             "or the reference server")
    if settings.priority == "normal":
        return
    if arm.sharing == "mps" and settings.priority not in CLIENT_PRIORITY:
        raise ValueError(f"{key}.priority '{settings.priority}': MPS has no level above normal "
                         "(CUDA_MPS_CLIENT_PRIORITY is 0 normal or 1 below normal, per NVIDIA's MPS docs); to favour "
                         f"{name}, set the other classes to priority: low")
    if arm.sharing in ("exclusive", "mig"):
        raise ValueError(f"{key}.priority '{settings.priority}' has no effect under sharing '{arm.sharing}': each "
                         "class runs alone on its device, with nothing to be prioritised against")
