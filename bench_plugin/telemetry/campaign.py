"""Campaign telemetry: which GPU series a campaign records, from where, and when.

- During each segment one polling source runs: NVML on this host (a GPU placement of the local
  backend), or a dcgm-exporter's /metrics when ``--dcgm-url`` names one (any backend). Its rows go
  to the ``telemetry`` table at each stage end.
- With ``--prometheus-url``, each stage's window is queried after the segment (range queries for
  the DCGM series, per class: prometheus.py), once Prometheus has had ``prometheus_lag_s`` to scrape
  the stage's last seconds; rows and notes go to ``stage_series``. Classes are found in the
  exporter's labels by what the placement says: the GPU (UUID, MIG instance) on this host.

- Each class's server metrics (queue depth, running requests, queue and compute time, in
  results/server_rows.py's vocabulary) are read through each segment by a scrape process of its own
  (server_poller.py) from the endpoint ``server_metrics`` names for the class (its ``metrics_url``; unset,
  ``/metrics`` at the server's URL); what was read goes to ``server_series`` at each stage end, and where
  each class's came from (engine, series, problems) to a ``server_metrics`` timeline entry. A class whose
  ``metrics_url`` is ``prometheus`` is read instead from ``--prometheus-url`` after the segment, each stage's
  window alike (server_prometheus.py).

Nothing here fails a campaign: a source that is not there is an event and a warning, a missing
series a note in the report.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from bench_plugin.results.placement import Placement
from bench_plugin.results.recorder import Recorder
from bench_plugin.results.server_rows import ServerSource
from bench_plugin.results.telemetry_rows import DeviceInfo
from bench_plugin.results.timeline import ServerMetrics, Telemetry, TelemetryUnavailable
from bench_plugin.telemetry import fields as F
from bench_plugin.telemetry.dcgm import DcgmScraper
from bench_plugin.telemetry.nvml import NvmlSampler
from bench_plugin.telemetry.promql import LabelSet
from bench_plugin.telemetry.server_poller import THROUGH_PROMETHEUS, ServerPoller, metrics_url
from bench_plugin.telemetry.server_prometheus import query_stage, target_labels
from bench_plugin.telemetry.source import PollingSource
from bench_plugin.telemetry.stage_series import ClassTarget

logger = logging.getLogger(__name__)

NVML_INTERVAL_S = 0.2
"""NVML is sampled at 5 Hz during segments."""

DCGM_INTERVAL_S = 1.0
"""A dcgm-exporter refreshes its values every second at best (``-c 1000``): scraping faster repeats them."""

PROMETHEUS_STEP_S = 1.0
"""The resolution of the per-stage range queries."""

AFTER_STAGES = -1
"""The ``stage`` of server metrics read after a segment's last stage ended (its drain, its release)."""


@dataclass(frozen=True)
class TelemetryOptions:
    """Where a campaign's GPU series come from (the plugin's --dcgm-url and --prometheus-* options)."""

    dcgm_url: str | None = None
    prometheus_url: str | None = None
    prometheus_lag_s: float = 10.0
    """How long after a stage ends its series are queried: Prometheus must have scraped them."""


@dataclass
class _Stage:
    trial: int
    segment: int
    stage: int
    start_s: float
    end_s: float


@dataclass
class CampaignTelemetry:
    """The GPU telemetry of one campaign: a source during each segment, Prometheus after it."""

    options: TelemetryOptions
    recorder: Recorder
    source: PollingSource | None = None
    devices: dict[str, DeviceInfo] = field(default_factory=dict)
    """Device name -> what identifies it in dcgm-exporter's labels (from NVML on this host)."""
    server_metrics: dict[str, str | None] = field(default_factory=dict)
    """Class -> its ``metrics_url`` as the scenario gives it (None or absent: ``/metrics`` at its server's URL)."""
    servers: ServerPoller | None = None
    _stages: list[_Stage] = field(default_factory=list)
    _placement: Placement | None = None

    def start_segment(self, trial: int, segment: int, placement: Placement) -> None:
        """Start this segment's server-metrics scraper, and its GPU polling source (none on a CPU placement
        without --dcgm-url)."""
        self._placement = placement
        self._start_servers(placement)
        self._start_gpu(trial, segment, placement)

    def _start_servers(self, placement: Placement) -> None:
        targets = {name: url for name, where in placement.classes.items()
                   if (url := metrics_url(where.url, self.server_metrics.get(name))) is not None}
        if not targets:
            return
        self.servers = ServerPoller(targets, self.recorder.path.parent / "logs")
        reason = self.servers.start()
        if reason is not None:
            logger.warning("no server metrics: %s", reason)

    def latest_server(self) -> dict[str, dict[str, float]]:
        """Class -> quantity -> the last value its server's metrics said (the live view); {} between segments."""
        return self.servers.latest() if self.servers is not None else {}

    def _start_gpu(self, trial: int, segment: int, placement: Placement) -> None:
        devices = sorted({p.device for p in placement.classes.values() if p.device and p.device != "cpu"})
        source: PollingSource
        if self.options.dcgm_url:
            source = DcgmScraper(self.options.dcgm_url, interval_s=DCGM_INTERVAL_S)
        elif devices:
            pids = {p.pid: name for name, p in placement.classes.items() if p.pid is not None}
            source = NvmlSampler(devices=devices, interval_s=NVML_INTERVAL_S, pids=pids,
                                 campaign=str(self.recorder.path.parent.resolve()))
            self.devices.update({info.key: info for info in source.devices_info()})
        else:
            return
        started = source.start()
        if not started:
            self.recorder.note(TelemetryUnavailable(segment=segment, reason=started.reason), trial)
            logger.warning("no GPU telemetry for trial %d: %s", trial, started.reason)
            return
        self.source = source

    def latest_by_class(self) -> dict[str, tuple[float | None, float | None]]:
        """Class -> (its device's GPU utilisation %, its server process's VRAM MiB) as last sampled."""
        if self.source is None or self._placement is None:
            return {}
        rows = self.source.latest()
        owners = self.source.process_classes() if isinstance(self.source, NvmlSampler) else {}
        util = {r.device: r.value for r in rows if r.metric == F.GPU_UTIL and r.process is None}
        memory: dict[str, float] = {}
        for r in rows:
            if r.metric == F.PROCESS_MEMORY and r.process is not None and r.process in owners:
                memory[owners[r.process]] = memory.get(owners[r.process], 0.0) + r.value
        return {name: (util.get(where.device or ""), memory.get(name))
                for name, where in self._placement.classes.items()}

    def stage_ended(self, trial: int, segment: int, stage: int, start_s: float, end_s: float) -> None:
        """Store what the source sampled so far; remember the stage's window for Prometheus."""
        if self.source is not None:
            self.recorder.add_telemetry(trial, self.source.drain())
        if self.servers is not None:
            self.recorder.add_server_points(trial, segment, stage, self.servers.drain())
        if end_s > start_s:
            self._stages.append(_Stage(trial, segment, stage, start_s, end_s))

    def stop_servers(self, trial: int, segment: int) -> None:
        """Stop reading the servers' metrics and store the rest (before the servers are released: a server gone is
        not a problem of its metrics); nothing once stopped."""
        servers, self.servers = self.servers, None
        if servers is not None:
            self.recorder.add_server_points(trial, segment, AFTER_STAGES, servers.stop())
            sources = servers.sources()
            self.recorder.note(ServerMetrics(segment=segment, sources=sources), trial)
            for source_of in sources:
                for problem, count in source_of.problems.items():
                    logger.warning("trial %d: %s server metrics (%s): %s (%d reads)", trial, source_of.workload,
                                   source_of.url, problem, count)

    def stop_segment(self, trial: int, segment: int, placement: Placement) -> None:
        """Stop the sources and store the rest; query Prometheus for the segment's stages."""
        ended_s = time.time()
        self.stop_servers(trial, segment)
        source, self.source, self._placement = self.source, None, None
        if source is not None:
            source.stop()
            self.recorder.add_telemetry(trial, source.drain())
            processes = source.process_classes() if isinstance(source, NvmlSampler) else {}
            self.recorder.note(Telemetry(segment=segment, processes=processes, polls=source.polls,
                                         overruns=source.overruns, problems=source.problems()), trial)
        stages, self._stages = self._stages, []
        if self.options.prometheus_url and stages:
            self._query(stages, self.targets(placement))
            through = {name: target_labels(where.url, where.pod) for name, where in placement.classes.items()
                       if self.server_metrics.get(name) == THROUGH_PROMETHEUS}
            if through:
                self._query_servers(trial, segment, stages, through, ended_s)

    def _query_servers(self, trial: int, segment: int, stages: list[_Stage], targets: dict[str, LabelSet],
                       ended_s: float) -> None:
        """Each stage's server series of the classes read through Prometheus, and where they came from: from its
        start to the next stage's, the last one's to the segment's end (``ended_s``), for a server observes a
        request's times as it ends, after its stage has (analysis/queueing.py)."""
        from bench_plugin.telemetry.prometheus import PrometheusSeries

        assert self.options.prometheus_url is not None
        found: dict[str, ServerSource] = {
            name: ServerSource(workload=name, engine=None, url=f"{self.options.prometheus_url} "
                               f"({','.join(f'{k}={v}' for k, v in labels.items())})")
            for name, labels in targets.items()}
        with PrometheusSeries(self.options.prometheus_url) as prometheus:
            ends = [nxt.start_s for nxt in stages[1:]] + [max(stages[-1].end_s, ended_s)]
            for st, end_s in zip(stages, ends, strict=True):
                answers = query_stage(prometheus, targets, st.start_s, max(st.end_s, end_s), PROMETHEUS_STEP_S)
                for name, answer in answers.items():
                    self.recorder.add_server_points(trial, segment, st.stage, answer.points)
                    source = found[name]
                    problems = dict(source.problems)
                    for note in answer.notes:
                        problems[note] = problems.get(note, 0) + 1
                    found[name] = source.model_copy(update={
                        "engine": answer.engine or source.engine, "names": answer.names or source.names,
                        "scrapes": source.scrapes + (1 if answer.points else 0), "problems": problems})
        self.recorder.note(ServerMetrics(segment=segment, sources=list(found.values())), trial)

    def targets(self, placement: Placement) -> list[ClassTarget]:
        """Where each class's series are in the exporter's labels, as far as the placement tells."""
        out = []
        for name, where in placement.classes.items():
            info = self.devices.get(where.device or "")
            if info is not None:
                out.append(ClassTarget.for_device(name, info))
            elif where.device_uuid and not where.device_uuid.startswith("MIG-"):
                out.append(ClassTarget(name, device=where.device, gpu_uuid=where.device_uuid))
            elif where.device and where.device.startswith("cuda:"):
                out.append(ClassTarget(name, device=where.device))
        return out

    def _query(self, stages: list[_Stage], targets: list[ClassTarget]) -> None:
        from bench_plugin.telemetry.prometheus import PrometheusSeries

        assert self.options.prometheus_url is not None
        wait = stages[-1].end_s + self.options.prometheus_lag_s - time.time()
        if wait > 0:
            time.sleep(wait)
        with PrometheusSeries(self.options.prometheus_url) as series:
            # With no GPU to attribute nothing is queried, so ask whether the server answers at all: a dead
            # --prometheus-url must be said as such, not hidden behind the placement's note.
            down = None if targets else series.check()
            for st in stages:
                result = series.query_stage(st.start_s, st.end_s, PROMETHEUS_STEP_S, targets)
                if not targets:
                    result.notes[:] = ([down.reason] if down is not None and not down and down.reason else []) + [
                        "the placement names no GPU for any class (CPU, or the manual backend): "
                        "no series could be attributed"]
                self.recorder.add_stage_series(st.trial, st.segment, st.stage, "prometheus", result.rows,
                                               result.notes)
