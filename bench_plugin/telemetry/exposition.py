"""Exposition: telemetry rows as dcgm-exporter's /metrics text, so PromQL written for DCGM reads it.

Followed: NVIDIA/dcgm-exporter, release 4.5.3-4.8.2 —
- internal/pkg/rendermetrics/render_metrics.go (``gpuMetricsFormat``): per series ``# HELP <field> <help>``
  then ``# TYPE <field> <type>``, then one line per device with the labels in this order:
  ``gpu``, ``UUID``, ``pci_bus_id``, ``device``, ``modelName``, for a MIG instance ``GPU_I_PROFILE`` and
  ``GPU_I_ID``, then ``Hostname`` (omitted with --no-hostname), then the label counters (here
  ``DCGM_FI_DRIVER_VERSION``), then attributes (dcgm-exporter's pod labels; our ``pid``).
- internal/pkg/collector/gpu_collector.go (``toMetric``) and base_collector.go: ``gpu`` is the GPU index,
  ``UUID`` the GPU's UUID (``uuid`` with --use-old-namespace), ``device`` is ``nvidia<index>``,
  ``modelName`` the product name. A MIG instance keeps its PARENT GPU's index, UUID, bus id and model
  and adds its profile name and GPU instance id: the MIG UUID itself appears nowhere.
- etc/default-counters.csv: names, types and HELP texts (fields.py).
Release 4.5.3-4.8.2 spells the host label ``Hostname``; dcgm-exporter's main branch renamed it to
``hostname`` after that release (commit d5e5f51, "Rename Hostname label to hostname"). HOSTNAME_LABEL
holds the spelling in one place; the scraper reads either.

dcgm-exporter writes no timestamps: Prometheus stamps a scrape when it arrives. ``timestamps=True``
appends each row's own time (milliseconds, valid text format) for consumers that want the reading's
moment rather than the scrape's. The text is written by hand rather than with prometheus_client's
registry because that library renames a counter ``X`` to ``X_total``, which would break DCGM's names.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from bench_plugin.results.telemetry_rows import DeviceInfo, TelemetryRow
from bench_plugin.telemetry.fields import DRIVER_VERSION, FIELDS, Field

LABEL_GPU = "gpu"
LABEL_UUID = "UUID"
LABEL_UUID_OLD = "uuid"
LABEL_PCI_BUS_ID = "pci_bus_id"
LABEL_DEVICE = "device"
LABEL_MODEL = "modelName"
LABEL_MIG_PROFILE = "GPU_I_PROFILE"
LABEL_MIG_ID = "GPU_I_ID"
HOSTNAME_LABEL = "Hostname"
LABEL_PID = "pid"
"""Our attribute on per-process series (dcgm-exporter has none: it labels pods, not pids)."""

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def device_labels(
    info: DeviceInfo, hostname: str | None = None, driver_version: str | None = None
) -> dict[str, str]:
    """dcgm-exporter's labels for one device, in its order."""
    labels = {
        LABEL_GPU: str(info.index),
        LABEL_UUID: info.uuid,
        LABEL_PCI_BUS_ID: info.pci_bus_id,
        LABEL_DEVICE: f"nvidia{info.index}",
        LABEL_MODEL: info.model,
    }
    if info.mig_profile is not None and info.gpu_instance_id is not None:
        labels[LABEL_MIG_PROFILE] = info.mig_profile
        labels[LABEL_MIG_ID] = str(info.gpu_instance_id)
    if hostname:
        labels[HOSTNAME_LABEL] = hostname
    if driver_version:
        labels[DRIVER_VERSION] = driver_version
    return labels


def escape_label(value: str) -> str:
    """A label value as the text format writes it (backslash, newline and double quote escaped)."""
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def escape_help(text: str) -> str:
    """A HELP text as the text format writes it (backslash and newline escaped)."""
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def format_value(value: float) -> str:
    """A value as dcgm-exporter writes integers (``42``), otherwise the shortest exact float text."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value.is_integer() and abs(value) < 2**63:
        return str(int(value))
    return repr(value)


def sample_line(name: str, labels: Mapping[str, str], value: float, t_ms: int | None = None) -> str:
    """One sample's line: ``name{labels} value [timestamp]``."""
    body = ",".join(f'{k}="{escape_label(v)}"' for k, v in labels.items())
    stamp = "" if t_ms is None else f" {t_ms}"
    return f"{name}{{{body}}} {format_value(value)}{stamp}" if body else f"{name} {format_value(value)}{stamp}"


def render(
    rows: Iterable[TelemetryRow],
    devices: Iterable[DeviceInfo],
    *,
    hostname: str | None = None,
    driver_version: str | None = None,
    timestamps: bool = False,
) -> str:
    """The /metrics page for ``rows``: the newest row of each (metric, device, process), dcgm-exporter style.

    Series come in the catalogue's order (fields.py), unknown metrics after them as untyped-help gauges.
    Raises ValueError for a row whose device is not in ``devices``: its labels would be guesses.
    """
    infos = {info.key: info for info in devices}
    newest: dict[tuple[str, str, str | None], TelemetryRow] = {}
    for row in rows:
        key = (row.metric, row.device, row.process)
        if key not in newest or row.t >= newest[key].t:
            newest[key] = row
    missing = sorted({device for _, device, _ in newest} - infos.keys())
    if missing:
        raise ValueError(f"no device info for {', '.join(missing)}; known: {', '.join(sorted(infos)) or 'none'}")
    order = {name: i for i, name in enumerate(FIELDS)}
    metrics = sorted({metric for metric, _, _ in newest}, key=lambda m: (order.get(m, len(order)), m))
    lines: list[str] = []
    for metric in metrics:
        spec = FIELDS.get(metric, Field(metric, "gauge", "", ""))
        lines.append(f"# HELP {metric} {escape_help(spec.help)}")
        lines.append(f"# TYPE {metric} {spec.prom_type}")
        series = sorted((k for k in newest if k[0] == metric), key=lambda k: (infos[k[1]].index, k[1], k[2] or ""))
        for key in series:
            row = newest[key]
            labels = device_labels(infos[row.device], hostname, driver_version)
            if row.process is not None:
                labels[LABEL_PID] = row.process
            lines.append(sample_line(metric, labels, row.value, round(row.t * 1000) if timestamps else None))
    return "\n".join(lines) + "\n" if lines else ""
