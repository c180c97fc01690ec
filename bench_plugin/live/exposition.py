"""The live view in Prometheus's text format, served at ``/bench/metrics``: a team's own Prometheus and Grafana
graph a running campaign.

The figures are the live view's (live/view.py), one snapshot per scrape, so a query returns what the web UI's
table shows at that moment. Names follow Prometheus's conventions (prometheus.io/docs/practices/naming):
the ``bench_`` prefix and base units (seconds, ratios, bytes). Every figure belongs to the current stage and
starts again with the next one, so none of them is a counter: gauges, and for the latency quantiles the
summary type (quantile samples only; a quantile label belongs to a summary), whose quantiles are exact over
the scope's requests rather than streamed estimates.

Labels: ``class`` (llm, embedding, asr), ``arm`` and ``repeat`` (the trial running), ``stage`` (its name, or
``stage N``), ``scope`` (``window``: the stage's last 10 s, fewer early in it, see ``bench_scope_seconds``;
``stage``: the stage so far) and ``quantile`` (0.5, 0.95) on the latency families. A family with nothing to
say (no request ended yet, TTFT for a class that is not an LLM, GPU figures without telemetry) has no sample
rather than a made-up one. ``bench_slo_seconds`` gives each class's objective, so a dashboard draws the SLO
as a line beside the P95.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from bench_plugin.live.view import ClassLive, Figures, LiveSnapshot
from bench_plugin.scenario import Scenario
from bench_plugin.telemetry.exposition import escape_help, sample_line

MIB = 1024 * 1024


@dataclass
class Family:
    """One metric family: its name, type, help, and the samples of this scrape."""

    name: str
    help: str
    kind: str = "gauge"
    samples: list[tuple[dict[str, str], float]] = field(default_factory=list)

    def add(self, labels: dict[str, str], value: float | None) -> None:
        """A sample, unless there is no value to give."""
        if value is not None:
            self.samples.append((labels, float(value)))

    def lines(self) -> Iterator[str]:
        """Its text, HELP and TYPE first (nothing at all without a sample)."""
        if not self.samples:
            return
        yield f"# HELP {self.name} {escape_help(self.help)}"
        yield f"# TYPE {self.name} {self.kind}"
        for labels, value in self.samples:
            yield sample_line(self.name, labels, value)


SUMMARIES = frozenset({"bench_latency_seconds", "bench_ttft_seconds", "bench_tpot_seconds"})
"""The families with a quantile label: of the summary type."""

FAMILIES: dict[str, str] = {
    "bench_campaign_info": "The campaign: its scenario and status (waiting, running, completed, failed, interrupted).",
    "bench_campaign_trial": "The trial running (1-based), with its arm and repeat.",
    "bench_campaign_trials": "How many trials the campaign has.",
    "bench_stage_remaining_seconds": "Seconds left to send in the current stage.",
    "bench_stage_start_timestamp_seconds": "When the current stage's arrivals began (Unix time): a dashboard "
                                           "marks stage and arm boundaries with it.",
    "bench_scope_seconds": "The span each scope covers: the window (the stage's last 10 s, fewer early in it) "
                           "and the stage so far.",
    "bench_offered_requests_per_second": "The load the stage offers the class (open loop).",
    "bench_offered_loops": "The closed-loop request loops the stage runs for the class.",
    "bench_requests": "Requests of the class that ended in the scope.",
    "bench_errors": "Requests of the class that failed in the scope.",
    "bench_throughput_requests_per_second": "Successful requests per second of the scope.",
    "bench_latency_seconds": "End-to-end latency of the successful requests (from the intended send time).",
    "bench_ttft_seconds": "Time to first token of the successful requests (llm).",
    "bench_tpot_seconds": "Time per output token after the first of the successful requests (llm).",
    "bench_slo_met": "1 where the class keeps every objective and its error budget in the scope, 0 where not.",
    "bench_slo_seconds": "The class's objective (the scenario's SLO), by figure: p95, ttft_p95, tpot_p95.",
    "bench_gpu_utilization_ratio": "GPU utilisation of the class's device, as last sampled (0-1).",
    "bench_gpu_memory_bytes": "GPU memory of the class's server process, as last sampled.",
    "bench_class_server_queue_depth": "Requests waiting in the class's server's queue, as its metrics last said.",
    "bench_class_server_running": "Requests the class's server was processing (its running batch), as its "
                                  "metrics last said.",
}
"""Every family /bench/metrics may serve, with its help."""


def render(snapshot: LiveSnapshot, scenario: Scenario) -> str:
    """The snapshot as Prometheus text (version 0.0.4)."""
    fam = {name: Family(name, text, "summary" if name in SUMMARIES else "gauge") for name, text in FAMILIES.items()}
    fam["bench_campaign_info"].add({"scenario": scenario.name, "status": snapshot.status}, 1)
    pos = snapshot.position
    trial_labels = {"arm": str(pos.get("arm", "")), "repeat": str(pos.get("repeat", ""))}
    if pos.get("trial") is not None:
        fam["bench_campaign_trial"].add(trial_labels, pos["trial"])
        fam["bench_campaign_trials"].add({}, pos.get("of"))
    for live in snapshot.classes:
        _objectives(fam, live.name, scenario)
    if pos.get("stage") is not None:  # per-class figures belong to a stage: none before the first
        where = {**trial_labels, "stage": str(pos["stage"])}
        fam["bench_stage_remaining_seconds"].add(where, pos.get("stage_left_s"))
        fam["bench_stage_start_timestamp_seconds"].add(where, pos.get("stage_start_s"))
        fam["bench_scope_seconds"].add({**where, "scope": "window"}, snapshot.window_end_s - snapshot.window_start_s)
        if snapshot.classes:  # the stage so far spans the same for every class
            fam["bench_scope_seconds"].add({**where, "scope": "stage"}, snapshot.classes[0].stage.span_s)
        for live in snapshot.classes:
            _class(fam, live, where)
    lines = [line for family in fam.values() for line in family.lines()]
    return "\n".join(lines) + "\n"


def _objectives(fam: dict[str, Family], name: str, scenario: Scenario) -> None:
    slo = scenario.classes.get(name).slo
    for figure, limit_ms in (("p95", slo.p95_ms), ("ttft_p95", slo.ttft_p95_ms), ("tpot_p95", slo.tpot_p95_ms)):
        fam["bench_slo_seconds"].add({"class": name, "figure": figure}, _s(limit_ms))


def _class(fam: dict[str, Family], live: ClassLive, where: dict[str, str]) -> None:
    labels = {"class": live.name, **where}
    offered = "bench_offered_loops" if live.arrival == "closed" else "bench_offered_requests_per_second"
    fam[offered].add(labels, live.offered)
    for scope, figures in (("window", live.window), ("stage", live.stage)):
        _figures(fam, {**labels, "scope": scope}, figures)
    fam["bench_gpu_utilization_ratio"].add({"class": live.name}, None if live.gpu_util is None else live.gpu_util / 100)
    fam["bench_gpu_memory_bytes"].add({"class": live.name}, None if live.vram_mib is None else live.vram_mib * MIB)
    fam["bench_class_server_queue_depth"].add({"class": live.name}, live.queue_depth)
    fam["bench_class_server_running"].add({"class": live.name}, live.running)


def _figures(fam: dict[str, Family], labels: dict[str, str], f: Figures) -> None:
    fam["bench_requests"].add(labels, f.requests)
    fam["bench_errors"].add(labels, f.errors)
    fam["bench_throughput_requests_per_second"].add(labels, f.throughput_rps)
    fam["bench_latency_seconds"].add({**labels, "quantile": "0.5"}, _s(f.p50_ms))
    fam["bench_latency_seconds"].add({**labels, "quantile": "0.95"}, _s(f.p95_ms))
    fam["bench_ttft_seconds"].add({**labels, "quantile": "0.95"}, _s(f.ttft_p95_ms))
    fam["bench_tpot_seconds"].add({**labels, "quantile": "0.95"}, _s(f.tpot_p95_ms))
    if f.requests:
        fam["bench_slo_met"].add(labels, 1 if f.slo == "ok" else 0)


def _s(ms: float | None) -> float | None:
    return None if ms is None else ms / 1000
