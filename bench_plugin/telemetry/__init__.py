"""Telemetry: GPU series for a trial's window, as rows of (t, device, metric, value, process).

Two sources with one API (``start``, ``stop``, ``drain``, ``available``), so the campaign uses either:

- NvmlSampler (nvml.py): NVML on this host through pynvml, 5 Hz by default, per device and per process.
- DcgmScraper (dcgm.py): a dcgm-exporter's /metrics (or ours, exporter.py) over HTTP.

And one that is asked after each stage instead of polled: PrometheusSeries (prometheus.py) runs range
queries (promql.py) for the stage's window and returns per-class rows and notes (stage_series.py).

Metric names are DCGM field names (fields.py); the exporter serves them in dcgm-exporter's format.
Importing this package loads neither pynvml, prometheus-api-client nor a GPU library.
"""

from bench_plugin.results.telemetry_rows import TELEMETRY_FIELDS, Availability, DeviceInfo, TelemetryRow
from bench_plugin.telemetry.attribution import UNATTRIBUTED, ClassValue, class_series, peak_by_class, resolve_class
from bench_plugin.telemetry.dcgm import DcgmScraper, parse_metrics
from bench_plugin.telemetry.exposition import render
from bench_plugin.telemetry.nvml import NvmlSampler
from bench_plugin.telemetry.prometheus import PrometheusSeries
from bench_plugin.telemetry.readings import DeviceReading, reading_rows
from bench_plugin.telemetry.stage_series import ClassTarget, SeriesSummary, StageSeries, summarise

__all__ = [
    "TELEMETRY_FIELDS",
    "UNATTRIBUTED",
    "Availability",
    "ClassTarget",
    "ClassValue",
    "DcgmScraper",
    "DeviceInfo",
    "DeviceReading",
    "NvmlSampler",
    "PrometheusSeries",
    "SeriesSummary",
    "StageSeries",
    "TelemetryRow",
    "class_series",
    "parse_metrics",
    "peak_by_class",
    "reading_rows",
    "render",
    "resolve_class",
    "summarise",
]
