"""Telemetry rows: the one shape every GPU series takes, whichever source produced it.

An NVML sampler on this host and a scrape of a dcgm-exporter elsewhere both end in the same
``TelemetryRow(t, device, metric, value, process)``, so the recorder stores one table and the analysis
never asks where a number came from. Devices are named the way the rest of the plugin names them:

- ``cuda:N`` for a whole GPU, where N is the NVML index (PCI bus order). That equals the CUDA ordinal
  only with ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` and no ``CUDA_VISIBLE_DEVICES`` remapping; a server started
  with ``CUDA_VISIBLE_DEVICES=1`` calls the same GPU ``cuda:0`` inside its own process.
- the MIG device UUID (``MIG-...``) for a MIG instance. A dcgm-exporter labels MIG series with the
  parent GPU's UUID and the GPU instance id only, so a scrape that cannot resolve the MIG UUID names
  the instance ``<parent GPU UUID>/<GPU instance id>``, dcgm-exporter's own key for it
  (internal/pkg/transformation/process_metrics.go, ``getMIGMetricsKey``).
"""

from __future__ import annotations

from dataclasses import dataclass

TELEMETRY_FIELDS = ("t", "device", "metric", "value", "process")
"""Column order of a row, for the recorder's INSERT."""


@dataclass(frozen=True, slots=True)
class TelemetryRow:
    """One value of one GPU series at one moment."""

    t: float
    """Epoch seconds (``time.time()``) when the value was read; the same clock as samples."""
    device: str
    """``cuda:N``, a MIG UUID, or ``<parent UUID>/<GPU instance id>`` (see the module docstring)."""
    metric: str
    """A DCGM field name (``DCGM_FI_DEV_GPU_UTIL``) or a ``bench_process_*`` per-process metric."""
    value: float
    process: str | None = None
    """The pid (as text) of a per-process value; ``pod:<namespace>/<name>`` when a dcgm-exporter in
    Kubernetes mode labelled the series with a pod; None for a device-wide value."""

    def as_tuple(self) -> tuple[float, str, str, float, str | None]:
        """The row in TELEMETRY_FIELDS order."""
        return (self.t, self.device, self.metric, self.value, self.process)


@dataclass(frozen=True, slots=True)
class DeviceInfo:
    """What identifies a device in dcgm-exporter's labels; the exporter needs it to label rows."""

    key: str
    """The row's device name: ``cuda:N`` or a MIG UUID."""
    index: int
    """NVML index of the GPU (of the parent GPU for a MIG instance): the ``gpu`` label."""
    uuid: str
    """GPU UUID (the parent's for a MIG instance): the ``UUID`` label."""
    pci_bus_id: str
    model: str
    """Product name, e.g. ``NVIDIA H200``: the ``modelName`` label."""
    mig_profile: str | None = None
    """MIG profile, e.g. ``1g.18gb`` (``GPU_I_PROFILE``); None for a whole GPU."""
    gpu_instance_id: int | None = None
    """MIG GPU instance id (``GPU_I_ID``); None for a whole GPU."""

    @property
    def mig_key(self) -> str | None:
        """``<parent UUID>/<GPU instance id>`` for a MIG instance: how a scrape names it unresolved."""
        if self.gpu_instance_id is None:
            return None
        return f"{self.uuid}/{self.gpu_instance_id}"


@dataclass(frozen=True, slots=True)
class Availability:
    """Whether a telemetry source can produce rows here, and if not, why. Truthy when it can."""

    ok: bool
    reason: str = ""

    def __bool__(self) -> bool:
        return self.ok
