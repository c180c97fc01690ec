"""Scenario models of the Kubernetes backend: the top-level ``kubernetes:`` section and a class's ``kubernetes:`` block.

The section holds what is fixed for every arm on the cluster (namespace, image, node selector,
tolerations, the NVIDIA device plugin's ConfigMap and its replicas per GPU, how long a rollout may
take); a class's block says how its server runs in a pod (image, command, port, health path, CPU and
memory). Both are strict like every scenario model, and the label, name and quantity syntax the API
server would refuse is refused here, before anything runs (docs/scenario.md, "Kubernetes").
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator

from bench_plugin.scenario.base import PositiveFloat, StrictModel

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_QUANTITY = re.compile(r"^(\d+(\.\d*)?|\.\d+)([KMGTPE]i|[mkMGTPE]|[eE][+-]?\d+)?$")
_ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")


def dns_label_problem(value: str) -> str | None:
    """Why ``value`` is not a DNS-1123 label (a namespace, a Service name), or None."""
    if len(value) > 63 or not _DNS_LABEL.match(value):
        return ("must be a DNS-1123 label: at most 63 lower-case letters, digits and '-', starting and ending "
                "alphanumeric")
    return None


def label_key_problem(key: str) -> str | None:
    """Why ``key`` is not a valid label key (``[prefix/]name``), or None."""
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        return f"label key {key!r}: its prefix must be a DNS subdomain (e.g. example.com)"
    if not name or len(name) > 63 or not _LABEL_NAME.match(name):
        return (f"label key {key!r}: its name must be at most 63 letters, digits, '-', '_' or '.', "
                "starting and ending alphanumeric")
    return None


def label_value_problem(value: str) -> str | None:
    """Why ``value`` is not a valid label value, or None (the empty value is valid)."""
    if value and (len(value) > 63 or not _LABEL_NAME.match(value)):
        return (f"label value {value!r} must be at most 63 letters, digits, '-', '_' or '.', "
                "starting and ending alphanumeric")
    return None


def _check_labels(labels: dict[str, str]) -> dict[str, str]:
    for key, value in labels.items():
        problem = label_key_problem(key) or label_value_problem(value)
        if problem:
            raise ValueError(problem)
    return labels


def _check_quantity(value: str | None) -> str | None:
    if value is not None and not _QUANTITY.match(value):
        raise ValueError(f"{value!r} is not a Kubernetes quantity (e.g. 4, 500m, 16Gi)")
    return value


class Toleration(StrictModel):
    """A toleration of every workload pod, in the pod spec's own terms (``tolerationSeconds`` as ``toleration_s``)."""

    key: str | None = None
    operator: Literal["Equal", "Exists"] = "Equal"
    value: str | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    toleration_s: int | None = Field(default=None, ge=0)
    """How long a NoExecute taint is tolerated (the pod's tolerationSeconds)."""

    def to_json(self) -> dict[str, object]:
        """The toleration as the pod spec writes it."""
        out: dict[str, object] = {"operator": self.operator}
        for name, value in (("key", self.key), ("value", self.value), ("effect", self.effect),
                            ("tolerationSeconds", self.toleration_s)):
            if value is not None:
                out[name] = value
        return out


def _dns_label(value: str) -> str:
    """A namespace name, as the API server will take it."""
    problem = dns_label_problem(value)
    if problem:
        raise ValueError(problem)
    return value


class DevicePlugin(StrictModel):
    """Where the NVIDIA device plugin reads its sharing configurations, and how many replicas a shared GPU gets.

    The device plugin must be deployed with this ConfigMap as its config (helm ``--set
    config.name=bench-plugin-sharing``); the backend adds one key per sharing arm and points the GPU nodes
    at it with the ``nvidia.com/device-plugin.config`` label.
    """

    config_map: str = "bench-plugin-sharing"
    namespace: str = "nvidia-device-plugin"
    replicas: int = Field(default=4, ge=2)
    """Shared replicas per GPU for time-slicing and MPS (the device plugin refuses fewer than 2)."""

    @field_validator("config_map")
    @classmethod
    def _config_map_name(cls, value: str) -> str:
        if len(value) > 253 or not _DNS_SUBDOMAIN.match(value):
            raise ValueError("must be a DNS subdomain name (lower-case letters, digits, '-' and '.')")
        return value

    _namespace = field_validator("namespace")(_dns_label)


class KubernetesSettings(StrictModel):
    """The top-level ``kubernetes:`` section: what every arm shares on the cluster."""

    namespace: str = "bench"
    image: str = Field(default="bench-plugin:0.1.0", min_length=1)
    """The image of every class's pod unless its own block names another (the repo's Dockerfile)."""
    node_selector: dict[str, str] = Field(default_factory=dict)
    """Fixed for every arm: the nodes the campaign may use, and the GPU nodes whose device plugin it configures."""
    tolerations: list[Toleration] = Field(default_factory=list)
    device_plugin: DevicePlugin = Field(default_factory=DevicePlugin)
    rollout_timeout_s: PositiveFloat = 300.0
    """How long the device plugin may take to advertise an arm's resources, and each Deployment to have a Ready pod."""

    _node_selector = field_validator("node_selector")(_check_labels)

    _namespace = field_validator("namespace")(_dns_label)


class ClassKubernetes(StrictModel):
    """A class's ``kubernetes:`` block: how its server runs in a pod.

    Without ``command`` and ``args`` the pod runs the class's reference server (``python -m
    bench_plugin.servers <class> --host 0.0.0.0 --port <port> --size <size> ...``, from ``server``).
    ``command`` and ``args`` are the container's own (``args`` alone: the image's entrypoint with them).
    """

    image: str | None = None
    command: list[str] | None = None
    args: list[str] | None = None
    port: int = Field(default=8000, ge=1, le=65535)
    health_path: str = Field(default="/health", pattern=r"^/")
    """The readiness probe's path: the reference servers answer 200 only once the model is loaded."""
    cpu: str | None = None
    """CPU request and limit (equal: with memory, the pod is Guaranteed); unset: none."""
    memory: str | None = None
    env: dict[str, str] = Field(default_factory=dict)

    _quantities = field_validator("cpu", "memory")(_check_quantity)

    @field_validator("env")
    @classmethod
    def _env_names(cls, value: dict[str, str]) -> dict[str, str]:
        bad = [name for name in value if not _ENV_NAME.match(name)]
        if bad:
            raise ValueError(f"{bad[0]!r} is not a valid environment variable name")
        return value

    @field_validator("command")
    @classmethod
    def _command(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and not value:
            raise ValueError("an empty command; leave it out to run the reference server")
        return value


def check_node_labels(labels: dict[str, str]) -> dict[str, str]:
    """Validate an arm's per-class ``node_labels`` (label syntax); returns them."""
    return _check_labels(labels)
