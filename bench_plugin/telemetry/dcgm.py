"""DCGM scraper: read a dcgm-exporter's /metrics (or this package's exporter) into telemetry rows.

Use it where the GPUs are watched by NVIDIA's dcgm-exporter (a Kubernetes node with the GPU operator)
instead of sampling NVML in-process. The text is parsed with prometheus_client's parser; each GPU
series becomes one row:

- device: ``cuda:<gpu>`` for a whole GPU; for a MIG series (``GPU_I_ID`` present) the MIG UUID when
  ``mig_devices`` maps ``<UUID>/<GPU_I_ID>`` to it, else that key itself (dcgm-exporter labels a MIG
  instance with its parent's UUID and its GPU instance id, never with the MIG UUID).
- metric: the series name as written (the parser would append ``_total`` to a counter: undone here).
- process: the ``pid`` label (this package's per-process series), or ``pod:<namespace>/<pod>`` where a
  dcgm-exporter in Kubernetes mode added pod labels. Such a pod series holds the pod's share only
  for per-process metrics on a shared GPU; otherwise it is the whole device's value copied per pod
  (dcgm-exporter internal/pkg/transformation/kubernetes.go).
- t: the sample's timestamp where the text has one, else when the scrape returned.
Series of NVSwitches, NVLinks and CPUs are skipped: the campaign asks about GPUs.

A dcgm-exporter refreshes its values every ``--collect-interval`` (30000 ms by default); scraping faster
than that repeats old values under new times, so run it with ``-c 1000`` or less for trial telemetry.
"""

from __future__ import annotations

import math
import time
from collections.abc import Collection, Mapping

import requests

from bench_plugin.results.telemetry_rows import Availability, TelemetryRow
from bench_plugin.telemetry.exposition import LABEL_GPU, LABEL_MIG_ID, LABEL_PID, LABEL_UUID, LABEL_UUID_OLD
from bench_plugin.telemetry.source import DEFAULT_MAX_BUFFERED, PollingSource

_NOT_GPU_LABELS = ("nvlink", "nvswitch", "cpu", "cpucore")
_POD_LABELS = (("pod", "namespace"), ("pod_name", "pod_namespace"))  # current, then --use-old-namespace


def _device(labels: Mapping[str, str], mig_devices: Mapping[str, str]) -> str | None:
    if any(name in labels for name in _NOT_GPU_LABELS) or LABEL_GPU not in labels:
        return None
    if labels.get(LABEL_MIG_ID):
        uuid = labels.get(LABEL_UUID) or labels.get(LABEL_UUID_OLD, "")
        key = f"{uuid}/{labels[LABEL_MIG_ID]}"
        return mig_devices.get(key, key)
    return f"cuda:{labels[LABEL_GPU]}"


def _process(labels: Mapping[str, str]) -> str | None:
    if labels.get(LABEL_PID):
        return labels[LABEL_PID]
    for pod, namespace in _POD_LABELS:
        if labels.get(pod):
            return f"pod:{labels.get(namespace, '')}/{labels[pod]}"
    return None


def _selected(device: str, labels: Mapping[str, str], devices: Collection[str] | None) -> bool:
    if devices is None:
        return True
    return device in devices or labels.get(LABEL_UUID, labels.get(LABEL_UUID_OLD)) in devices


def parse_metrics(
    text: str,
    t: float,
    *,
    mig_devices: Mapping[str, str] | None = None,
    devices: Collection[str] | None = None,
    metrics: Collection[str] | None = None,
) -> list[TelemetryRow]:
    """Rows from one /metrics page read at ``t`` (see the module docstring for the mapping).

    ``devices`` keeps only those devices (``cuda:N``, GPU UUID or MIG UUID); ``metrics`` only those names.
    Raises ValueError where the text is not the Prometheus text format.
    """
    # prometheus_client comes with the [servers] extra, not the core install: import it when used
    from prometheus_client.parser import text_string_to_metric_families

    rows: list[TelemetryRow] = []
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            # the parser reports counter samples as <name>_total even when the text says <name>
            name = family.name if sample.name in (family.name, f"{family.name}_total") else sample.name
            if metrics is not None and name not in metrics:
                continue
            device = _device(sample.labels, mig_devices or {})
            if device is None or not _selected(device, sample.labels, devices):
                continue
            when = float(sample.timestamp) if sample.timestamp is not None else t
            rows.append(TelemetryRow(when, device, name, float(sample.value), _process(sample.labels)))
    return rows


class DcgmScraper(PollingSource):
    """Scrapes a dcgm-exporter /metrics URL in a background thread; the same API as NvmlSampler.

    ``url``: e.g. ``http://node:9400/metrics``. ``devices``: keep only these (None keeps all GPUs).
    ``mig_devices``: ``<GPU UUID>/<GPU instance id>`` -> MIG UUID, to name MIG instances as NVML does
    (NvmlSampler.devices_info() gives it on the same host: ``{i.mig_key: i.key for i in infos if i.mig_key}``).
    """

    def __init__(
        self,
        url: str,
        devices: list[str] | None = None,
        interval_s: float = 1.0,
        *,
        mig_devices: Mapping[str, str] | None = None,
        metrics: Collection[str] | None = None,
        timeout_s: float = 5.0,
        max_buffered: int = DEFAULT_MAX_BUFFERED,
    ) -> None:
        super().__init__(interval_s, max_buffered=max_buffered, name=f"dcgm {url}")
        self.url = url
        self._devices = set(devices) if devices is not None else None
        self._mig_devices = dict(mig_devices or {})
        self._metrics = set(metrics) if metrics is not None else None
        self._timeout_s = timeout_s
        self._session: requests.Session | None = None

    def available(self) -> Availability:
        """Whether the URL answers with GPU series now; never raises."""
        session = self._session or requests.Session()
        try:
            rows = self._scrape(session)
        except (requests.RequestException, ValueError) as exc:
            return Availability(False, f"no dcgm-exporter at {self.url}: {exc}")
        finally:
            if session is not self._session:
                session.close()
        if not rows:
            return Availability(False, f"{self.url} answered but has no GPU series for {self._wanted()}")
        return Availability(True)

    def _wanted(self) -> str:
        return ", ".join(sorted(self._devices)) if self._devices is not None else "any device"

    def _open(self) -> Availability:
        availability = self.available()
        if availability:
            self._session = requests.Session()
        return availability

    def _close(self) -> None:
        if self._session is not None:
            self._session.close()
            self._session = None

    def _scrape(self, session: requests.Session) -> list[TelemetryRow]:
        """The page's rows; a value that is not a finite number (NaN, +Inf and -Inf are legal in the format)
        is left out and noted per metric: it has no meaning as a reading, and the store keeps numbers."""
        response = session.get(self.url, timeout=self._timeout_s)
        response.raise_for_status()
        rows = parse_metrics(
            response.text, time.time(), mig_devices=self._mig_devices, devices=self._devices, metrics=self._metrics
        )
        finite = [row for row in rows if math.isfinite(row.value)]
        if len(finite) < len(rows):
            for metric in sorted({row.metric for row in rows if not math.isfinite(row.value)}):
                self._note(f"{metric}: values that are not finite numbers (NaN, +Inf, -Inf) left out")
        return finite

    def _poll(self) -> list[TelemetryRow]:
        if self._session is None:  # poll_once() before start(): a session is all it takes
            self._session = requests.Session()
        return self._scrape(self._session)
