"""BackendFacts: what a sharing backend says about itself and its devices, for the campaign's conditions.

A backend describes itself once at launch (SharingBackend.describe); the facts are kept in the store's
conditions and in summary.json, shown in the report's conditions and compared when a campaign is resumed or
set beside another. Each backend fills its own part: the local backend its devices, driver and CPUs; the
kubernetes backend its cluster, namespace, device plugin and GPU nodes; the manual backend only its name.
Each fact is written only where it was recorded, so facts added later leave older campaigns as they were.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, SerializerFunctionWrapHandler, model_serializer


class Recorded(BaseModel):
    """A section whose facts are written only where they were recorded (an unset fact is left out, not null)."""

    model_config = ConfigDict(extra="forbid")

    @model_serializer(mode="wrap")
    def _recorded_only(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return {key: value for key, value in handler(self).items() if key in self.model_fields_set}


class DeviceFacts(Recorded):
    """A device the local backend can place servers on (sharing/devices.Device)."""

    # In the order of their names, as the store keeps them.
    memory_mib: int | None = None
    mig_enabled: bool | None = None
    model: str | None = None
    name: str | None = None
    """``cpu``, ``cuda:N`` or a MIG instance's UUID."""
    parent: str | None = None
    """For a MIG instance: the GPU it lives on."""
    uuid: str | None = None

    @property
    def identity(self) -> str:
        """What makes it the same device for a measurement: its model and memory (``NVIDIA H200 143771 MiB``)."""
        return f"{self.model}{f' {self.memory_mib} MiB' if self.memory_mib else ''}"


class DevicePluginFacts(Recorded):
    """The NVIDIA device plugin the kubernetes backend configures."""

    config_map: str | None = None
    """``namespace/name`` of its config ConfigMap."""
    replicas: int | None = None


class NodeFacts(Recorded):
    """A GPU node of the cluster, as its labels (GPU feature discovery, device plugin) and status say."""

    allocatable: dict[str, str] | None = None
    """Its ``nvidia.com/*`` allocatable resources."""
    device_plugin_config: str | None = None
    gpu_count: str | None = None
    gpu_product: str | None = None
    name: str | None = None


class BackendFacts(Recorded):
    """A backend's description of itself and its devices."""

    # In the order of their names, as the store keeps them.
    backend: str | None = None
    """Its name: local, kubernetes or manual."""
    campaign: str | None = None
    """kubernetes: the campaign label on everything it creates."""
    cpu: str | None = None
    """local: the CPU's model."""
    cpu_count: int | None = None
    cpus_allowed: str | None = None
    """local: the cores this process may use (a cpulist)."""
    cuda_driver: int | None = None
    """local: the CUDA version the driver supports (NVML's integer form, 12080 for 12.8)."""
    device_plugin: DevicePluginFacts | None = None
    devices: list[DeviceFacts] | None = None
    """local: the devices servers can be placed on (the CPU alone on a host without NVIDIA GPUs)."""
    driver: str | None = None
    """local: the NVIDIA driver's version."""
    error: str | None = None
    """kubernetes: why the cluster could not be described (its facts are then missing)."""
    kubeconfig: str | None = None
    mig_mode: dict[str, str] | None = None
    """local: GPU -> MIG mode (enabled, disabled)."""
    mps_control: str | None = None
    """local: the MPS control binary (None: MPS arms are refused)."""
    namespace: str | None = None
    node_selector: dict[str, str] | None = None
    nodes: list[NodeFacts] | None = None
    """kubernetes: the GPU nodes."""
    numa_nodes: dict[str, str] | None = None
    """local: NUMA node -> its cores."""
    numactl: str | None = None
    """local: the numactl binary where installed (memory binding for ``cpu_affinity``)."""
    nvml: str | None = None
    """local: why NVML could not be read (no package, no driver); absent where it was read."""
    server: str | None = None
    """kubernetes: the API server's URL."""
    server_version: str | None = None
    service_urls: dict[str, str] | None = None

    def device_identities(self) -> dict[str, str]:
        """Device (or cluster GPU node) -> what makes it the same device for a measurement: model, memory, cores."""
        out: dict[str, str] = {}
        for device in self.devices or []:
            text = device.identity
            if device.name == "cpu" and self.cpu_count:
                text += f" ({self.cpu_count} cores)"
            out[str(device.name)] = text
        for node in self.nodes or []:
            # GPU feature discovery marks a product shared (-SHARED) while a sharing config is applied: same GPU.
            product = str(node.gpu_product).removesuffix("-SHARED")
            out[f"node {node.name}"] = f"{product} x{node.gpu_count}"
        return out

    def device_models(self) -> dict[str, str | None]:
        """Device name -> its model."""
        return {str(d.name): d.model for d in self.devices or []}
