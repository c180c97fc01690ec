"""Summary: per trial, stage and class figures from the results store, and their spread over repeats.

Each request belongs to the stage of its intended send time. Throughput counts successful requests
per second of stage time (and tokens/s, inputs/s, audio s/s where they apply); latency percentiles
are over successful requests; errors are counted by kind. An exclusive arm measured "alone in turn"
has one segment per class; its stage ``i`` takes each class's figures from that class's segment.
Each class also gets its goodput (requests within every SLO; objectives.py), each trial the devices
it was charged and, where the cluster's pod events were recorded, its pods' scheduling (pods.py; per
arm over repeats too), and the ``comparison`` section (comparison.py: every arm against the control, its
operating boundary and its verdict) is added; docs/analysis.md explains every figure.

The analysis reads the store only through results.store.CampaignReader and returns the typed
document (results.summary.Summary): no SQL, no files and no report here.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from bench_plugin.analysis.comparison import build_comparison
from bench_plugin.analysis.disruption import disruption_figures, stage_disruption
from bench_plugin.analysis.gpu import GPU_METRICS, stage_gpu
from bench_plugin.analysis.intervals import duration_needed_s, intervals, samples_needed
from bench_plugin.analysis.objectives import ClassObjectives, objectives_from_scenario, sample_meets_slo
from bench_plugin.analysis.pods import arm_pods, pod_summaries
from bench_plugin.analysis.probe import judge_lag, limited_why
from bench_plugin.analysis.queueing import Series, by_quantity, server_stats
from bench_plugin.analysis.search import judged_result
from bench_plugin.analysis.selfcheck import check_stage
from bench_plugin.analysis.statistics import percentiles, spread
from bench_plugin.results.record import CampaignRecord
from bench_plugin.results.samples import Sample, protocol_signature
from bench_plugin.results.server_figures import ServerStats
from bench_plugin.results.server_rows import ServerSource
from bench_plugin.results.store import CampaignReader, StageRecord, TrialRecord
from bench_plugin.results.summary import (
    ArmClassFigures,
    ArmFigures,
    ArmStageFigures,
    CampaignStatus,
    ClassStats,
    Comparison,
    Ending,
    GeneratorUse,
    Interval,
    PlacedClass,
    Provenance,
    ScenarioRef,
    SearchProbe,
    StageGpu,
    StageSummary,
    Summary,
    TrialSummary,
)
from bench_plugin.results.words import JUDGED_STATUSES, CampaignState, StageStatus
from bench_plugin.scenario import WORKLOAD_CLASSES

V = TypeVar("V")

__all__ = ["arm_stage_runs", "build_summary", "class_stats", "devices_charged", "is_searched", "load_key", "measured",
           "record_comparison", "trial_summary"]


def class_stats(samples: list[Sample], workload: str, duration_s: float,
                objectives: ClassObjectives | None = None, started_s: float | None = None) -> ClassStats:
    """Figures of one class's samples over ``duration_s`` seconds of stage time.

    Rates are over the time it took to serve the stage's requests: from the stage start (``started_s``)
    until the last of them ended, and never less than the stage's duration. An overloaded server
    that completes every request, but late, then shows a lower throughput instead of the offered rate.
    With the class's ``objectives``, also the requests that met every SLO (objectives.sample_meets_slo),
    their share of all requests and their rate (goodput).
    """
    ok = [s for s in samples if s.ok]
    if started_s is not None and samples:
        duration_s = max(duration_s, max(s.end_s for s in samples) - started_s)
    per_s = 1.0 / duration_s if duration_s > 0 else 0.0
    stats = ClassStats(
        requests=len(samples),
        errors=len(samples) - len(ok),
        errors_by_kind=dict(Counter(s.error or "unknown" for s in samples if not s.ok)),
        duration_s=duration_s,
        throughput_rps=len(ok) * per_s,
        latency_ms=percentiles([s.latency_ms for s in ok]),
        queue_ms=percentiles([s.queue_ms for s in samples]),
        send_lag_ms=percentiles([s.send_lag_ms for s in samples]),
        slot_waits=sum(1 for s in samples if s.slot_wait_s),
        latency_ci_ms=_intervals([s.latency_ms for s in ok]),
        p95_note=p95_note(len(ok), len(ok) * per_s),
    )
    stats.sole_error = sole_error(samples)
    if workload == "llm":
        ttft = [v for s in ok if (v := s.ttft_ms) is not None]
        tpot = [v for s in ok if (v := s.tpot_ms) is not None]
        stats.ttft_ms, stats.ttft_ci_ms = percentiles(ttft), _intervals(ttft)
        stats.tpot_ms, stats.tpot_ci_ms = percentiles(tpot), _intervals(tpot)
        stats.output_tokens_per_s = sum(s.output_tokens or 0 for s in ok) * per_s
        streamed = [s for s in ok if s.chunks is not None]  # stores before version 5 kept no chunks
        if streamed:
            gaps = [gap for s in streamed for gap in s.itl_ms()]
            stats.itl_ms, stats.itl_ci_ms = percentiles(gaps), _intervals(gaps)
            chunks = sum(s.chunks or 0 for s in streamed)
            stats.tokens_per_chunk = sum(s.output_tokens or 0 for s in streamed) / chunks if chunks else None
            stats.tokens_from = dict(sorted(Counter(s.tokens_from or "unknown" for s in streamed).items()))
    elif workload == "embedding":
        stats.inputs_per_s = sum(s.inputs or 0 for s in ok) * per_s
        told = Counter(s.reply_format for s in ok if s.reply_format)  # stores before version 6 kept none
        stats.reply_formats = dict(sorted(told.items())) or None
    elif workload == "asr":
        stats.audio_s_per_s = sum(s.audio_s or 0.0 for s in ok) * per_s
    if objectives is not None:
        met = sum(1 for s in ok if sample_meets_slo(s, objectives))
        stats.slo_met = met
        stats.slo_attainment = met / len(samples) if samples else None
        stats.goodput_rps = met * per_s
    return stats


def sole_error(samples: list[Sample]) -> str | None:
    """``<kind>: <first message>`` when every one of ``samples`` failed with the same error that load does not
    cause (samples.protocol_signature); None otherwise. Such a stage measured the protocol, not capacity."""
    if not samples:
        return None
    kinds = {protocol_signature(s) for s in samples}
    if len(kinds) != 1 or None in kinds:
        return None
    return f"{kinds.pop()}: {samples[0].detail or 'no message'}"[:300]


def _intervals(values: list[float]) -> dict[str, Interval]:
    return intervals(values)


def p95_note(n: int, rate_per_s: float) -> str | None:
    """Why a P95 of ``n`` samples is not bounded, and the stage length that would be at ``rate_per_s``; else None
    (also for no samples: a class idle in the stage, or one whose requests all failed, has no P95 to bound)."""
    needed = samples_needed(0.95)
    if n == 0 or n >= needed:
        return None
    longer = duration_needed_s(0.95, rate_per_s)
    hint = f": at {rate_per_s:.3g} req/s a stage of >= {math.ceil(longer)} s would" if longer else ""
    return f"P95 of {n} requests is not bounded (a 95% order-statistic interval needs {needed}){hint}"


def devices_charged(trial: TrialRecord) -> int:
    """Devices charged to a trial: per segment the distinct devices its classes ran on, summed.

    An exclusive arm that measured three classes alone in turn, or on three GPUs, is charged three
    devices; a shared arm, one. A placement's ``gpu`` (the physical GPU under a MIG instance) is used
    where it is recorded, else its ``device``, so MIG slices of one GPU are charged one GPU. A placement
    that names neither (the manual backend) counts as one device.
    """
    return sum(len({where.charged for where in seg.placement.values()})
               for seg in trial.segments)


def _merge_status(statuses: list[str]) -> str:
    for worst in (StageStatus.INVALID, StageStatus.INTERRUPTED, StageStatus.ABORTED, StageStatus.RUNNING,
                  StageStatus.SKIPPED):
        if worst in statuses:
            return worst
    return StageStatus.COMPLETED


def trial_summary(reader: CampaignReader, trial: TrialRecord,
                  objectives: dict[str, ClassObjectives] | None = None) -> TrialSummary:
    """The summary of one trial from the store, judged by ``objectives`` (per class) where given."""
    objectives = objectives or {}
    by_key: dict[tuple[int, int, str], list[Sample]] = {}
    for s in reader.samples(trial.id):
        by_key.setdefault((s.segment, s.stage, s.workload), []).append(s)
    placement: dict[str, PlacedClass] = {}
    for seg in trial.segments:
        for name, where in seg.placement.items():
            placement[name] = PlacedClass(**dict(where), segment=seg.index, ready=seg.ready.get(name))
    processes = reader.gpu_processes(trial.id)
    servers = Servers(by_quantity(reader.server_points(trial.id)), reader.server_sources(trial.id))
    search = reader.search_results(trial.id)
    grouped: list[tuple[int, list[StageRecord]]] = []
    for record in sorted(trial.stages, key=lambda r: (r.index, r.segment)):
        if grouped and grouped[-1][0] == record.index:
            grouped[-1][1].append(record)
        else:
            grouped.append((record.index, [record]))
    if search:  # searched stages differ per segment: keep each (segment, stage) apart, in run order
        in_order = sorted(trial.stages, key=lambda r: r.started_s or 0.0)
        grouped = [(i, [record]) for i, record in enumerate(in_order)]
    stages = [_stage(reader, trial.id, index, rows, by_key, processes, objectives, servers)
              for index, rows in grouped]
    position = {(row.segment, row.index): index for index, rows in grouped for row in rows}
    probes = [SearchProbe(segment=step.segment, ray=step.ray, phase=step.phase, scale=step.scale, passed=step.passed,
                          stages=[position[(step.segment, i)] for i in (step.decision.stages if step.decision
                                                                       else [step.stage])
                                  if (step.segment, i) in position],
                          decision=step.decision,
                          set_aside=[position[(step.segment, i)] for i in step.decision.set_aside
                                     if (step.segment, i) in position] if step.decision else [])
              for step in reader.search_steps(trial.id)]
    limited = {stage.index: stage.generator_limited for stage in stages if stage.generator_limited}
    if limited and search:  # a search recorded before the generator's lateness was judged with each probe
        probes = [_lag_judged(p, limited) for p in probes]
        search = [judged_result(r, [p for p in probes if p.segment == r.segment and p.ray == r.ray]) for r in search]
    protocol = {seg.index: seg.protocol for seg in trial.segments}
    disruptions = reader.disruptions(trial.id)
    for stage, (_, rows) in zip(stages, grouped, strict=True):
        for row in rows:
            for name, resolved in protocol.get(row.segment, {}).items():
                if name in stage.classes and name in row.offered and resolved.get("output_lengths"):
                    stage.classes[name].output_lengths = resolved["output_lengths"]
            mine = [e for e in disruptions if e.segment == row.segment and e.stage == row.index]
            end_s = row.ended_s or (row.started_s or 0.0) + (row.duration_s or 0.0)
            found = stage_disruption(mine, {name: by_key.get((row.segment, row.index, name), [])
                                            for name in row.offered}, end_s)
            if found is not None:
                stage.disruption = found
    pod_events = reader.pod_events(trial.id)
    return TrialSummary(id=trial.id, arm=trial.arm, repeat=trial.repeat, status=trial.status, reason=trial.reason,
                        placement=placement, stages=stages, devices_charged=devices_charged(trial), search=search,
                        probes=probes,
                        pods=pod_summaries(pod_events, trial.ended_s) if pod_events else None)


def _lag_judged(probe: SearchProbe, limited: dict[int, str]) -> SearchProbe:
    """``probe`` with its load generator's delays judged as the search now does it (analysis/probe.judge_lag), from
    its stages' self-check (``limited``: stage -> why the generator fell behind)."""
    decision = probe.decision
    why = next((limited[s] for s in probe.stages if s in limited), None)
    if decision is None or decision.lag_judged or why is None:
        return probe
    judged = judge_lag(decision, why)
    return probe.model_copy(update={"decision": judged, "passed": probe.passed and limited_why(judged) is None})


@dataclass(frozen=True)
class Servers:
    """What a trial's servers said: per class its series (queueing.by_quantity), per segment and class its source."""

    series: dict[str, Series]
    sources: dict[int, dict[str, ServerSource]]

    def stats(self, samples: list[Sample], name: str, row: StageRecord) -> ServerStats | None:
        source = self.sources.get(row.segment, {}).get(name)
        return server_stats(samples, self.series.get(name, {}), row.started_s, row.ended_s,
                            source.engine if source is not None else None)


def _stage(reader: CampaignReader, trial: int, index: int, rows: list[StageRecord],
           by_key: dict[tuple[int, int, str], list[Sample]], processes: dict[int, dict[str, str]],
           objectives: dict[str, ClassObjectives], servers: Servers | None = None) -> StageSummary:
    """One stage of a trial: its records over the segments that ran it, merged."""
    offered: dict[str, float] = {}
    arrival: dict[str, str] = {}
    classes: dict[str, ClassStats] = {}
    arrivals: dict[str, int] = {}
    realised: dict[str, float] = {}
    generators: dict[str, GeneratorUse] = {}
    gpu = StageGpu()
    durations, planned = [], []
    for row in rows:
        offered.update(row.offered)
        arrival.update(row.arrival)
        if row.duration_s is None:
            continue
        durations.append(row.duration_s)
        if row.started_s is not None and row.ended_s is not None:
            window = reader.telemetry(trial, row.started_s, row.ended_s, GPU_METRICS)
            if window:
                seg_gpu = stage_gpu(window, processes.get(row.segment, {}))
                gpu.devices.update(seg_gpu.devices)
                gpu.classes.update(seg_gpu.classes)
        planned_s = row.planned_s or row.duration_s
        planned.append(planned_s)
        for member, used in row.generators.items():
            if used.cores >= (generators[member].cores if member in generators else -1.0):  # the busiest
                generators[member] = used
        for name in row.offered:
            mine = by_key.get((row.segment, row.index, name), [])
            classes[name] = class_stats(mine, name, row.duration_s, objectives.get(name), row.started_s)
            if servers is not None:
                classes[name].server = servers.stats(mine, name, row)
            if row.arrival.get(name) == "closed":
                continue
            # Version-1 stores kept no count: every arrival left one sample (the stage's accounting).
            counted = row.arrivals.get(name)
            n = counted if counted is not None else len(mine)
            arrivals[name] = int(n)
            realised[name] = n / planned_s if planned_s else 0.0
    stats = _ordered(classes)
    hosts = [row.host for row in rows if row.host is not None]
    host = max(hosts, key=lambda h: h.others_cores or 0.0) if hosts else None  # segments: the busiest
    check = check_stage(stats, [row.generators for row in rows],
                        {name: [s for r in rows if name in r.offered for s in by_key.get((r.segment, r.index, name),
                                                                                          [])] for name in stats},
                        lambda name, mine: class_stats(mine, name, stats[name].duration_s, objectives.get(name)),
                        objectives, host)
    return StageSummary(
        index=index, name=rows[0].name, offered=_ordered(offered), arrival=_ordered(arrival),
        duration_s=max(durations) if durations else None, status=_merge_status([r.status for r in rows]),
        reason="; ".join(r.reason for r in rows if r.reason) or None, classes=stats,
        planned_s=max(planned) if planned else None, arrivals=_ordered(arrivals), realised=_ordered(realised),
        generators=generators,
        generator_limited=check.limited, generator_check=check.found,
        host=host, host_busy=host.reason if host else None, gpu=gpu if gpu.devices or gpu.classes else None,
        protocol_failure=protocol_failure(stats, [r.reason for r in rows]),
    )


PROTOCOL_FAILURE = "protocol_failure: "
"""How the reason of a stage the campaign stopped for a protocol error starts (conductor, rollback.StageTally)."""


def protocol_failure(classes: dict[str, ClassStats], reasons: Sequence[str | None] = ()) -> str | None:
    """Why a stage measured only a protocol error, in one line (every request of a class failed with one,
    ClassStats.sole_error; or the campaign stopped it for one); else None."""
    found = [f"every {name} request failed with {c.sole_error}" for name, c in classes.items() if c.sole_error]
    found = found or [r.removeprefix(PROTOCOL_FAILURE) for r in reasons if r and r.startswith(PROTOCOL_FAILURE)]
    return "; ".join(found) or None


def _ordered(mapping: Mapping[str, V]) -> dict[str, V]:
    return {name: mapping[name] for name in WORKLOAD_CLASSES if name in mapping}


def load_key(offered: dict[str, float]) -> tuple[tuple[str, float], ...]:
    """A stage's offered load as a key: the same load is the same key whatever order its classes come in."""
    return tuple(sorted(offered.items()))


def is_searched(trials: list[TrialSummary]) -> bool:
    """Whether the campaign's stages were found by an adaptive search (any of its trials recorded one: a
    trial cut short before its search ended records none, and still ran searched loads)."""
    return any(t.search for t in trials)


def _aligned(trials: list[TrialSummary], searched: bool) -> tuple[list[Any],
                                                                  Callable[[TrialSummary], dict[Any, StageSummary]]]:
    """How stages line up across trials: by stage index in a fixed sweep; by offered load when ``searched``.

    An adaptive search runs different scales in different orders per trial, so there the same
    offered load is the same stage, listed from the lowest load up.
    """
    if not searched:
        keys: list[Any] = list(range(max((len(t.stages) for t in trials), default=0)))
        return keys, lambda t: dict(enumerate(t.stages))

    def by_load(trial: TrialSummary) -> dict[Any, StageSummary]:
        return {load_key(s.offered): s for s in trial.stages}

    loads = {key for t in trials for key in by_load(t)}
    return sorted(loads, key=lambda key: (sum(v for _, v in key), key)), by_load


def measured(stage: StageSummary) -> bool:
    """Whether a stage's figures count in its arm's figures over repeats: it ran its course (completed) or was
    stopped by the campaign's own rule (aborted), the statuses that judge a load (JUDGED_STATUSES). An invalid
    stage's load was not the stated one; an interrupted one was cut short by a stop, with requests failed by
    the servers' shutdown; a running one never ended: their samples stay in the trial's own figures."""
    return stage.status in JUDGED_STATUSES


def arm_stage_runs(trials: list[TrialSummary], arm: str) -> list[list[tuple[TrialSummary, StageSummary]]]:
    """The runs each of an arm's figures over repeats is made of: per ``ArmStageFigures`` position, the
    (trial, stage) pairs of the arm's trials that ran it, in run order (only stages that are :func:`measured`).

    The report reads each figure's sample counts and order-statistic intervals from these, so it
    names exactly the runs the figure is over.
    """
    mine = [t for t in trials if t.arm == arm]
    keys, aligned = _aligned(mine, is_searched(trials))
    out: list[list[tuple[TrialSummary, StageSummary]]] = []
    for key in keys:
        runs = []
        for trial in mine:
            stage = aligned(trial).get(key)
            if stage is not None and measured(stage):
                runs.append((trial, stage))
        out.append(runs)
    return out


def _reference(control: dict[Any, StageSummary], key: Any, name: str, searched: bool) -> ClassStats | None:
    """The control's figures of class ``name`` at the load ``key``: its stage of the same load; searched, where
    the control ran each class alone (an exclusive control), its stage of that class alone at the same rate."""
    stage = control.get(key)
    if stage is None and searched:
        stage = control.get(((name, dict(key)[name]),))
    return stage.classes.get(name) if stage is not None else None


def _arm_figures(trials: list[TrialSummary], arm: str, control: str | None) -> ArmFigures:
    """Per stage and class: figures over the arm's repeats, and throughput normalised to the control."""
    mine = [t for t in trials if t.arm == arm]
    theirs = {t.repeat: t for t in trials if t.arm == control}
    searched = is_searched(trials)
    keys, aligned = _aligned(mine, searched)

    def stages_of(trial: TrialSummary) -> dict[Any, StageSummary]:
        return {key: st for key, st in aligned(trial).items() if measured(st)}

    out: list[ArmStageFigures] = []
    for index, key in enumerate(keys):
        stage_classes: dict[str, ArmClassFigures] = {}
        present = [stages_of(t)[key] for t in mine if key in stages_of(t)]
        names = [n for n in WORKLOAD_CLASSES if any(n in s.classes for s in present)]
        for name in names:
            runs = [(t.repeat, stages_of(t)[key].classes[name]) for t in mine
                    if key in stages_of(t) and name in stages_of(t)[key].classes]
            ratios = []
            for repeat, stats in runs:
                ref = theirs.get(repeat)
                ref_stats = _reference(stages_of(ref), key, name, searched) if ref else None
                if ref_stats is not None and ref_stats.throughput_rps > 0:
                    ratios.append(stats.throughput_rps / ref_stats.throughput_rps)
            fig = ArmClassFigures(
                throughput_rps=spread([s.throughput_rps for _, s in runs]),
                latency_p50_ms=spread([s.latency_ms["p50"] for _, s in runs]),
                latency_p95_ms=spread([s.latency_ms["p95"] for _, s in runs]),
                error_rate=spread([s.errors / s.requests if s.requests else None for _, s in runs]),
                normalised_throughput=spread(ratios, "ratio") if control else None,
            )
            if name == "llm":
                fig.ttft_p95_ms = spread([s.ttft_ms["p95"] if s.ttft_ms else None for _, s in runs])
                fig.tpot_p95_ms = spread([s.tpot_ms["p95"] if s.tpot_ms else None for _, s in runs])
                if any(s.itl_ms for _, s in runs):
                    fig.itl_p95_ms = spread([s.itl_ms["p95"] if s.itl_ms else None for _, s in runs])
            stage_classes[name] = fig
        # a load no run of which was measured (each was cut short) is still that load: the runs' own offer
        ran = present or [aligned(t)[key] for t in mine if key in aligned(t)]
        offered = ran[0].offered if ran else {}
        realised = present[0].load if present else {}
        out.append(ArmStageFigures(index=index, offered=offered, realised=realised, classes=stage_classes,
                                   disruption=disruption_figures(present)))
    return ArmFigures(stages=out, pods=arm_pods(mine))


def build_summary(reader: CampaignReader) -> Summary:
    """The summary.json document of the campaign the reader reads."""
    record = reader.record()
    scenario = record.scenario
    objectives = objectives_from_scenario(scenario)
    trials = [trial_summary(reader, trial, objectives) for trial in reader.trials()]
    arm_names = [a.name for a in scenario.arms]
    control_arm = scenario.control
    control = control_arm.name if control_arm is not None else None
    status = record.status or Ending(status=CampaignState.INTERRUPTED, reason="the run ended without closing the store")
    return Summary(
        scenario=ScenarioRef(name=scenario.name, sha256=scenario.sha256, path=scenario.path),
        status=CampaignStatus(**dict(status), resumed=record.resumes),
        overrides=record.overrides,
        classes=record.classes,
        control=control,
        request_sets=record.request_sets,
        conditions=record.conditions,
        slo={name: spec.slo.model_dump(mode="json") for name, spec in scenario.classes.items()},
        embedding_format=getattr(scenario.classes.get("embedding"), "encoding_format", None),
        trials=trials,
        arms={arm: _arm_figures(trials, arm, control if arm != control else None) for arm in arm_names},
        comparison=record_comparison(record, trials, objectives),
        load_generators=record.generators(),
        warm_start_from=record.warm_start_from,
    )


def record_comparison(record: CampaignRecord, trials: list[TrialSummary],
                      objectives: dict[str, ClassObjectives]) -> Comparison:
    """The ``comparison`` section over ``trials`` (summarised by ``objectives``) of the campaign ``record`` describes.

    build_summary and the live view's verdicts so far (which summarises each trial once, as it ends) both use it.
    """
    return build_comparison(trials, record.scenario, record.conditions or Provenance(), objectives)
