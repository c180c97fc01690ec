"""summary.json: the typed document of a campaign's figures, its one reader and writer.

The analysis builds a :class:`Summary` from the store's records (bench_plugin.analysis.summary); the
summary files, the reports and the comparison of two campaigns read it back through :func:`load_summary`.
Every section has a model here, so a figure has one definition and one type from the analysis to the
page. The document says which version of this schema it follows (``schema``): a file of another
version is refused with one line rather than read as something it is not. Version history:

- ``bench_plugin.summary/1``: until the results layer; stages had no realised rate, self-check,
  percentile intervals or GPU figures, ratios were arithmetic. Not read: regenerate the summary from
  its results.sqlite (``bench-plugin report DIR``), which every version of the store allows.
- ``bench_plugin.summary/2``: this module. It grew optional sections that a file without them reads
  as absent, so every /2 file stays readable as it is: ``trials[].pods`` and ``arms.<arm>.pods`` (what
  the cluster did to the workload pods; None where nothing was watched: the local and manual backends,
  stores before version 3); a file that has them is refused, naming the field, by code older than them.
  And ``status.resumed`` (each time the campaign was resumed; empty for a campaign run in one process),
  which older code keeps as an extra of ``status`` (that section allows extras). And, per class and
  stage, the LLM stream's own figures (``itl_ms``, ``tokens_per_chunk``, ``tokens_from``,
  ``output_lengths``) and ``sole_error`` (every request failed with one load-independent error);
  absent in files written before them, and from stores before version 5.
  And the stall monitor's figures: ``generators.<process>.stalls`` (GeneratorStalls) and the stage's
  ``generator_check`` (GeneratorCheck); absent (None) in files and stores written before the monitor.
  And ``comparison.arms.<arm>.stages[].protocol_failure`` (the runs in which a class's requests all
  failed with one protocol error); absent (empty) in files written before it.
  And ``comparison.arms.<arm>.answer`` (the arm's answer in short: its figure per device against the
  control's, what limits it, the next step) and ``conditions.utc_offset_s`` (the campaign host's clock,
  for local times in the report); absent (None) in files written before them.
  And the envelope's rays: ``trials[].search[].ray`` (``mix`` where absent), ``sustain``, ``undecided``,
  ``stopped``, each probe's decision (``trials[].probes``) and ``comparison.arms.<arm>.envelope``; absent in
  files written before them.
  And ``load_generators`` (how many load-generating processes, how that was decided, where each ran:
  LoadGenerators); absent (None) in files written before it.
  And what each class's server said (``trials[].stages[].classes.<class>.server``: ServerStats) and where the
  latency an arm adds goes (``comparison.arms.<arm>.stages[].classes.<class>.latency_split``: LatencySplit);
  written only where set, so absent in files written before them and where no server said anything.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import (
    ConfigDict,
    Field,
    ValidationError,
)

from bench_plugin.results.facts import BackendFacts, Recorded
from bench_plugin.results.placement import ClassPlacement
from bench_plugin.results.server_figures import LatencyGrowth, LatencySplit, ServerStats, Sparse
from bench_plugin.results.spread import Judged, MeanPeak, Model, Spread
from bench_plugin.results.words import JUDGED_STATUSES, GeneratorLimit

SCHEMA: Literal["bench_plugin.summary/2"] = "bench_plugin.summary/2"
"""The schema this code writes and the only one it reads."""

PerClass = dict[str, float]


class SummaryError(Exception):
    """A summary.json this code cannot read (unknown schema, not a summary); the message is one line."""


class Interval(Model):
    """A percentile of n samples with its distribution-free order-statistic interval (analysis/intervals.py)."""

    q: float
    n: int
    estimate: float | None
    lo: float | None
    hi: float | None
    bounded: bool
    confidence: float


Percentiles = dict[str, float | None]
"""p50/p90/p95/p99 and mean (all None without samples)."""


class ClassStats(Sparse):
    """One class in one stage of one trial."""

    SPARSE: ClassVar[frozenset[str]] = frozenset({"server"})

    requests: int
    errors: int
    errors_by_kind: dict[str, int]
    duration_s: float
    throughput_rps: float
    latency_ms: Percentiles
    queue_ms: Percentiles
    ttft_ms: Percentiles | None = None
    tpot_ms: Percentiles | None = None
    output_tokens_per_s: float | None = None
    inputs_per_s: float | None = None
    audio_s_per_s: float | None = None
    slo_met: int | None = None
    """Requests that succeeded within every SLO of the class (None: the store names no SLO)."""
    slo_attainment: float | None = None
    """slo_met / requests (None without requests or without an SLO)."""
    goodput_rps: float | None = None
    """slo_met per second of stage time."""
    send_lag_ms: Percentiles = Field(default_factory=dict)
    """How late the load generator sent the requests (Sample.send_lag_ms)."""
    slot_waits: int = 0
    """Requests that waited for a free ``max_in_flight`` slot before they could be sent."""
    latency_ci_ms: dict[str, Interval] = Field(default_factory=dict)
    """p50/p95/p99 -> the order-statistic 95% interval of the latency percentile."""
    ttft_ci_ms: dict[str, Interval] | None = None
    tpot_ci_ms: dict[str, Interval] | None = None
    p95_note: str | None = None
    """Set when the P95 rests on too few samples to be bounded: how many it had and needs, how long would do."""
    itl_ms: Percentiles | None = None
    """LLM: inter-token latency, every gap between two output-carrying chunks of the successful requests
    pooled (vLLM's ITL: a chunk of several tokens is one gap; see tokens_per_chunk). None: not recorded."""
    itl_ci_ms: dict[str, Interval] | None = None
    tokens_per_chunk: float | None = None
    """LLM: output tokens per output-carrying chunk over the successful requests (1.0: ITL is per token)."""
    tokens_from: dict[str, int] | None = None
    """LLM: where the output token counts came from, ``usage`` (the server's) or ``chunks``, with how many requests."""
    output_lengths: str | None = None
    """LLM: ``exact`` (the server honoured the fixed output lengths) or ``model`` (output lengths set by the
    model: the server rejects or ignores ignore_eos/min_tokens, or the scenario asks for none)."""
    reply_formats: dict[str, int] | None = None
    """Embedding: how the successful replies' vectors came back (``base64``, ``float``), with how many requests;
    None where the samples do not say (stores before version 6)."""
    sole_error: str | None = None
    """Set when every request of the class failed with one and the same error that load does not cause (a
    protocol error, a 4xx): its kind and the first message. Such a stage measured the protocol, not capacity."""
    server: ServerStats | None = None
    """What the class's server said of the stage, and the requests' latency split with it (analysis/queueing.py);
    absent where its server said nothing (no metrics, no timing headers) and in files written before it."""

    @property
    def error_rate(self) -> float | None:
        """Failed requests / requests (None without requests)."""
        return self.errors / self.requests if self.requests else None


class StageGpu(Model):
    """A stage's GPU figures (analysis/gpu.py)."""

    devices: dict[str, dict[str, MeanPeak]] = Field(default_factory=dict)
    """Device -> ``util_pct`` / ``vram_used_mib`` -> figures."""
    classes: dict[str, dict[str, MeanPeak]] = Field(default_factory=dict)
    """Class -> ``vram_mib`` / ``sm_util_pct`` -> figures (its processes summed at each poll)."""


class GeneratorStalls(Model):
    """What one load-generating process's stall monitor saw while it sent a stage (loadgen/stalls.py)."""

    threshold_ms: float
    """A stretch of the event loop longer than this without polling counted as a block."""
    count: int
    total_ms: float
    max_ms: float
    causes: dict[str, tuple[int, float]] = Field(default_factory=dict)
    """Cause (``module.function (file:line)``) -> (blocks, their ms in all)."""
    blocks: list[tuple[float, float]] = Field(default_factory=list)
    """(start in epoch seconds, length in ms) of the longest blocks (at most 200), in time order."""
    busy_s: float | None = None
    """Seconds the process's event-loop thread was on a CPU or waiting for one (Linux schedstat); None: unknown."""
    collections: int | None = None
    """Garbage collections that ran in the process while it sent the stage (loadgen/collector.py holds them off
    then, so any is its guard's or another thread's); None in stores from before they were counted."""
    collection_max_ms: float | None = None
    """The longest of them (ms; 0.0 when none ran)."""


class GeneratorUse(Model):
    """One load-generating process's CPU while it sent a stage."""

    cpu_s: float
    wall_s: float
    cores: float
    stalls: GeneratorStalls | None = None
    """What its stall monitor saw; None in stores from before the monitor."""

    @property
    def demand(self) -> float | None:
        """Cores its event loop wanted (on a CPU or waiting for one) per wall second; None where unknown."""
        busy = self.stalls.busy_s if self.stalls is not None else None
        return busy / self.wall_s if busy is not None and self.wall_s > 0 else None


class GeneratorProcess(Model):
    """Where one process of the load-generating side ran (a load generator, or the master): what it says of
    itself when it starts (results/provenance.generator_process)."""

    pid: int
    host: str
    cores: str
    """The CPU cores it may run on (``os.sched_getaffinity``), as a cpulist: ``0-15``."""


class GeneratorSizing(Model):
    """How the number of load-generating processes was decided (launch/processes.py; the rule: loadgen/sizing.py)."""

    decided: Literal["auto", "given", "workers"]
    """``auto``: sized to the scenario's planned load on this host; ``given``: ``--processes N``; ``workers``: a
    ``--master`` whose workers were started by hand."""
    processes: int | None = None
    """Load-generating processes asked for (1: the local runner); None for hand-started workers (as many as came)."""
    sized: int | None = None
    """What the sizing rule gives on this host (``processes`` itself when ``auto``); None where it was not sized."""
    why: str | None = None
    """The sizing's reason, one line: the peak, the host's cores, the bound that decided."""
    peak_cores: float | None = None
    """The planned CPU of the load generators at the scenario's peak (cores)."""
    peak_at: str | None = None
    """The stage (or search ray at its max_scale) where the planned load peaks, with its load."""
    available_cores: int | None = None
    """The cores the campaign's process may run on."""
    reserved_cores: int | None = None
    """Of those, the cores taken out for the local backend's servers."""


class LoadGenerators(Model):
    """Who sent the campaign's load: how their number was decided, and where each process ran."""

    sizing: GeneratorSizing | None = None
    """None in campaigns recorded before the sizing, or whose command line was not sized."""
    master: GeneratorProcess | None = None
    """The master's own process (it applies the arms and keeps the results, it sends nothing); None on one process."""
    processes: dict[str, GeneratorProcess] = Field(default_factory=dict)
    """Load generator (``local``, or a worker's id) -> where it ran, for each that took part (not the refused)."""


class GeneratorCheck(Model):
    """What the self-check made of a stage's load generator (analysis/selfcheck.py)."""

    kind: GeneratorLimit | None = None
    """Why the stage is generator-limited, where it is: ``cpu-bound`` (a process short of CPU, or a loop behind
    on its work: more load-generating processes help) or ``stalled`` (an operation held the event loop while
    the CPU was idle: more processes do not). None: judged."""
    cause: str | None = None
    """What held the event loop longest in all, where the stall monitor saw blocks."""
    note: str | None = None
    """``stalls: N blocks (...); Z requests (W%) in flight during one; without them P95 would be ...``, where
    blocks were seen: a stage judged in spite of them shows it too."""
    in_flight: dict[str, int] = Field(default_factory=dict)
    """Class -> its requests held up by the blocks (they overlapped over 5% of its intended send to its end)."""
    p95_without_ms: dict[str, float | None] = Field(default_factory=dict)
    """Class -> its P95 without those requests (the classes that had any)."""


class HostLoad(Model):
    """The host's own load over a stage, as bench_plugin.telemetry.hostload measures it."""

    duration_s: float
    cores: int | None
    load_avg_1m: float | None
    cpu_busy_cores: float | None
    steal_fraction: float | None
    own_cores: float | None
    extra_own_cores: float
    others_cores: float | None
    busy: bool
    reason: str | None


class ClassInterruption(Model):
    """One class's interruption in a disrupted stage, as its requests saw it (analysis/disruption.py)."""

    requests: int
    """Requests of the class sent (intended) from the disruption's start to the stage's end."""
    failed: int
    failed_share: float | None
    p95_before_ms: float | None
    """P95 latency of the successful requests intended before the disruption."""
    peak_p95_ms: float | None
    """Highest P95 of the successful requests over 1 s windows (0.5 s apart) from the disruption on."""
    spike: float | None
    """peak_p95_ms / p95_before_ms."""
    recovered_s: float | None
    """Seconds from the disruption to recovery (RECOVERY_RULE); None: not recovered within the stage."""


class DisruptionStep(Recorded):
    """One step of a disruption as the backend did it: the action, its target, how it went and when, and the
    action's own facts (``node``, ``refusals``, ...); each written only where it was recorded."""

    model_config = ConfigDict(extra="allow")

    # In the order of their names, as the store keeps them.
    action: str
    result: str | None = None
    t: float | None = None
    """Epoch seconds of the step, where the backend timed it."""
    target: str


class StageDisruption(Model):
    """The disruption of one stage: what was done, when, and the interruption per class."""

    kind: str
    at_s: float
    started_s: float | None
    """When it began (epoch seconds); None: it never did."""
    actions: list[DisruptionStep] = Field(default_factory=list)
    """Each recorded step, in time order."""
    classes: dict[str, ClassInterruption] = Field(default_factory=dict)
    rule: str = ""
    """How recovery is decided, in words."""


class StageSummary(Model):
    """One stage of one trial."""

    index: int
    name: str | None
    offered: PerClass
    """Class -> the nominal load (req/s, or request loops for a closed-loop class)."""
    arrival: dict[str, str]
    duration_s: float | None
    status: str
    reason: str | None
    classes: dict[str, ClassStats] = Field(default_factory=dict)
    planned_s: float | None = None
    """How long the stage was meant to send (its ``duration_s``)."""
    arrivals: dict[str, int] = Field(default_factory=dict)
    """Open-loop class -> the arrivals the stage sent (its seeded sequence), whether or not all completed."""
    realised: PerClass = Field(default_factory=dict)
    """Open-loop class -> realised offered rate: arrivals / planned duration (req/s)."""
    generators: dict[str, GeneratorUse] = Field(default_factory=dict)
    """Load generator -> the CPU it used while sending the stage."""
    generator_limited: str | None = None
    """Why the load generator could not keep up (analysis/selfcheck.py), or None when it did."""
    generator_check: GeneratorCheck | None = None
    """The kind of generator limit and the stalls note (analysis/selfcheck.py); None: nothing to say."""
    host: HostLoad | None = None
    """The host's own load over the stage, where it was measured."""
    host_busy: str | None = None
    """Why the host was busy with other work during the stage, or None."""
    protocol_failure: str | None = None
    """Set when some class's requests all failed with one error that load does not cause (ClassStats.sole_error):
    the stage measured nothing about capacity, and its verdict names the error instead."""
    gpu: StageGpu | None = None
    """Per device utilisation and VRAM, per class VRAM and SM utilisation; None where nothing was sampled."""
    disruption: StageDisruption | None = None
    """The scenario's disruption where it happened in this stage (kubernetes backend), else None."""

    @property
    def load(self) -> PerClass:
        """Class -> the load the stage really offered: the realised rate where known, else the nominal one."""
        return {name: self.realised.get(name, value) for name, value in self.offered.items()}


class ProbeCheck(Model):
    """One criterion of one class in a search probe, as a count: requests beyond the limit out of those judged,
    against the fraction allowed, with the one-sided confidence bounds of the true fraction (analysis/probe.py)."""

    workload: str
    criterion: str
    """``p95``, ``ttft p95``, ``tpot p95`` or ``error rate``."""
    n: int
    """Requests judged: the successful ones for a latency, every one for the error rate."""
    exceeded: int
    """Of those, beyond the SLO (a latency) or failed (the error rate)."""
    allowed: float
    """The fraction allowed: 0.05 for a P95, the error budget for errors."""
    lower: float
    upper: float
    """The true fraction's one-sided confidence bounds (Wilson score)."""
    outcome: str
    """``pass`` (upper bound within ``allowed``), ``fail`` (lower bound beyond it) or ``undecided``."""


class ProbeDecision(Model):
    """How a search probe was decided: every criterion's count, and the outcome (analysis/probe.py)."""

    outcome: str
    """``pass`` when every criterion passed, ``fail`` when any failed, else ``undecided``; ``generator-limited``
    when its load generator fell behind, whatever the counts: not judged."""
    point: bool
    """The decision on the point estimates alone (every fraction within its allowance): what an undecided
    probe falls back to once its extensions are spent."""
    confidence: float
    checks: list[ProbeCheck] = Field(default_factory=list)
    stages: list[int] = Field(default_factory=list)
    """The stages whose samples were pooled: the probe's first run and its extensions."""
    set_aside: list[int] = Field(default_factory=list)
    """Stages of the probe run and not pooled: its load generator fell behind in them and the probe did not pass
    with them (analysis/probe.py), so each was run again; empty before stages were set aside."""
    note: str | None = None
    """Why the probe failed without counts (its stage was rolled back or did not complete), or why its load
    generator fell behind (``generator-limited``), else None."""
    lag_judged: bool = False
    """Whether the load generator's lateness was judged with the probe (analysis/probe.py); stores written before
    that are judged afterwards, from their stages' self-check."""
    futile: bool = False
    """Undecided, and not run again: at its estimates the extensions it had left were not expected to decide it
    (``search.skip_futile_extensions``, analysis/probe.extension_futile)."""


class SearchProbe(Model):
    """One probe of a trial's search: the load it held along a ray and how it was decided."""

    segment: int
    ray: str
    phase: str
    """``probe``, or ``sustain``: the hold of the boundary found."""
    scale: float
    passed: bool
    """What the search took it for (its decision, or its point estimate when undecided)."""
    stages: list[int]
    """The trial's stages (``trials[].stages[].index``) it pooled: its first run and its extensions."""
    decision: ProbeDecision | None = None
    set_aside: list[int] = Field(default_factory=list)
    """The trial's stages it ran and set aside, its load generator behind in them (``decision.set_aside``)."""


class SearchResult(Model):
    """One segment's adaptive search outcome along one ray (analysis/search.py), as the conductor recorded it."""

    segment: int
    classes: list[str]
    """The classes the ray loads in the segment (one, where each class was searched alone)."""
    mix: PerClass
    """Class -> its load at scale 1 (req/s, or users if closed-loop)."""
    status: str
    """``found``, ``above the maximum``, ``below the minimum``, ``generator-limited`` (stopped at a probe its load
    generator could not send: the boundary is at least ``lo``), or ``bracketing``/``bisecting`` if cut short."""
    lo: float | None
    """The highest scale that passed (None: none did)."""
    hi: float | None
    """The lowest scale that failed (None: none did)."""
    estimate: float | None
    """The midpoint of the bracket; the last pass or first fail when the bracket is open."""
    precision: float | None
    """(hi - lo) / hi reached (None while the bracket is open)."""
    runs: int
    """Stage-runs the search used."""
    fixed_sweep_runs: int
    """Stages an evenly spaced sweep would need for the same precision (analysis/search.fixed_sweep_runs)."""
    ray: str = "mix"
    """The ray searched (``search.rays()``): ``mix`` is the scenario's ``search.mix``; absent before rays."""
    sustain: str | None = None
    """The hold of the found boundary for the sustain time: ``confirmed`` (it passed), ``undecided`` (it passed on
    its point estimate only), ``failed`` (it failed twice, and ``lo`` is the last scale that passed a probe), or
    None (no sustain: none asked, none found, or written before sustains)."""
    undecided: int = 0
    """Probes its samples could not decide after every extension, decided by their point estimate."""
    stopped: str | None = None
    """Why the search stopped before its precision (``budget spent``, or where its load generator fell behind),
    else None."""


class PodSummary(Model):
    """One workload pod of a trial, as the cluster reported it (analysis/pods.py); times are epoch seconds."""

    pod: str
    uid: str
    workload: str | None
    """Its workload class (the bench-plugin/class label)."""
    node: str | None
    requests: dict[str, str] = Field(default_factory=dict)
    """Extended resource -> what the pod asked of it (``nvidia.com/gpu``: ``1``), when it was scheduled."""
    created_s: float | None
    scheduled_s: float | None
    ready_s: float | None
    """When its Ready condition first turned True (kwok fakes it: the model's readiness is the placement's)."""
    deleted_s: float | None
    """When its deletion was asked for."""
    pending_s: float | None
    """scheduled - created; for a pod never scheduled, from its creation until it was deleted or the trial ended."""
    pending_until: str | None = None
    """What ended the Pending time: ``scheduled``, ``deleted`` or ``trial end``."""
    failed_scheduling: dict[str, int] = Field(default_factory=dict)
    """FailedScheduling reason (the scheduler's filter reason, node counts left out) -> attempts that gave it."""
    first_failed_scheduling: str | None = None
    """The scheduler's first FailedScheduling message in full."""
    preempted_s: float | None = None
    preempted_by: str | None = None
    """The preemptor: its pod name where the watch saw it too, else its uid."""
    evicted_s: float | None = None
    evicted: str | None = None
    """Why: ``EvictionByEvictionAPI: Eviction API: evicting`` (a drain), ``DeletionByTaintManager: ...``."""
    preempting: list[str] = Field(default_factory=list)
    """The pods of the cluster's other work this pod preempted: ``preempted pod <ns>/<name> on node <node>``."""


class PlacedClass(ClassPlacement):
    """Where a class's server ran in a trial (its last segment's placement), the segment and when it was ready."""

    segment: int
    ready: float | None
    """Epoch seconds when it first answered its own real request; None where it never did."""


class TrialSummary(Model):
    """One trial: an arm run once."""

    id: int
    arm: str
    repeat: int
    status: str
    reason: str | None
    placement: dict[str, PlacedClass]
    """Class -> where its server ran (device, node, pid, url, ...), its segment and when it was ready."""
    stages: list[StageSummary]
    devices_charged: int = 0
    """Sum over the trial's segments of the distinct devices each used (see summary.devices_charged)."""
    search: list[SearchResult] = Field(default_factory=list)
    """Adaptive campaigns: each segment's search result (bounds, estimate, stage-runs; see conductor)."""
    probes: list[SearchProbe] = Field(default_factory=list)
    """Adaptive campaigns: each probe in run order, with its decision (absent in files written before them)."""
    pods: list[PodSummary] | None = None
    """The trial's workload pods in order of creation, as the cluster reported them; None where nothing was
    watched (the local and manual backends)."""

    def stage(self, index: int) -> StageSummary | None:
        """The stage with this index, or None when the trial has no such stage."""
        return next((s for s in self.stages if s.index == index), None)

    def judged_stage(self, index: int) -> StageSummary | None:
        """The stage if it can be judged: it ran to its end, was rolled back, or was skipped after a rollback.

        A stage cut short by Ctrl-C (``interrupted``), one whose load was not the stated one
        (``invalid``: a load generator lost, a sample missing) or one never reached says nothing
        about the load, so it is left out rather than counted as a failure. A class of a judged stage
        that has an offered load but no figures was skipped after a rollback, and counts as failing.
        """
        stage = self.stage(index)
        if stage is None or stage.status not in JUDGED_STATUSES:
            return None
        return stage


class ArmClassFigures(Model):
    """One class at one stage of one arm, over its repeats."""

    throughput_rps: Spread
    latency_p50_ms: Spread
    latency_p95_ms: Spread
    error_rate: Spread
    normalised_throughput: Spread | None
    """Throughput over the control's, paired by repeat (a ratio); None for the control."""
    ttft_p95_ms: Spread | None = None
    tpot_p95_ms: Spread | None = None
    itl_p95_ms: Spread | None = None
    """LLM: inter-token latency P95 over repeats (ClassStats.itl_ms); None where no chunk times were kept."""


class ArmStageFigures(Model):
    """One stage of one arm: its nominal and realised load and each class's figures over repeats."""

    index: int
    offered: PerClass
    realised: PerClass = Field(default_factory=dict)
    classes: dict[str, ArmClassFigures] = Field(default_factory=dict)


class PendingTime(Model):
    """How long pods waited to be scheduled over an arm's repeats: per trial, the longest Pending of its pods."""

    spread: Spread
    """Mean and 95% interval over the repeats; ``values`` has one per trial, in run order."""
    max_s: float | None
    """The longest over every repeat."""


class ArmPods(Model):
    """An arm's scheduling over the repeats whose pods were watched."""

    trials: int
    pending: PendingTime
    classes: dict[str, PendingTime] = Field(default_factory=dict)
    """Class -> the same, over that class's pods."""
    reasons: dict[str, int] = Field(default_factory=dict)
    """Every distinct FailedScheduling reason -> attempts that gave it over every repeat, most first."""
    preempted: int = 0
    """Pods preempted, over every repeat."""
    evicted: int = 0
    """Pods evicted, over every repeat."""
    preempting: int = 0
    """Pods of the cluster's other work that the arm's pods preempted, over every repeat."""


class ArmFigures(Model):
    """One arm's figures, stage by stage."""

    stages: list[ArmStageFigures]
    pods: ArmPods | None = None
    """Its scheduling over repeats; None where no trial of the arm had its pods watched."""


class ClassComparison(Sparse):
    """One class at one stage of one arm against the control."""

    SPARSE: ClassVar[frozenset[str]] = frozenset({"latency_split"})

    normalised_throughput: Judged | None = None
    throughput_loss: Judged | None = None
    slowdown_p95: Judged | None = None
    slowdown_ttft_p95: Judged | None = None
    slowdown_tpot_p95: Judged | None = None
    slo_attainment: Spread
    goodput_rps: Spread
    meets_slo: bool
    within_error_budget: bool
    breaches: list[str] = Field(default_factory=list)
    latency_split: LatencySplit | None = None
    """Where the latency the arm adds goes: client, server queue, server compute, the rest (analysis/queueing.py);
    absent for the control, where the servers said nothing, and in files written before it."""


class StageComparison(Model):
    """One stage of one arm against the control: figures, flags and, for a non-control arm, the verdict."""

    index: int
    offered: PerClass
    """Class -> the load the stage really offered (realised)."""
    repeats: int
    classes: dict[str, ClassComparison]
    generator_limited: list[str] = Field(default_factory=list)
    """``<arm> repeat r: <why>`` for each run (of this arm or the control) whose load generator fell behind."""
    host_busy: list[str] = Field(default_factory=list)
    """``<arm> repeat r: <why>`` for each run measured while the host was busy with other work."""
    protocol_failure: list[str] = Field(default_factory=list)
    """``<arm> repeat r: <why>`` for each run in which some class's requests all failed with one protocol error."""
    goodput_per_device: Spread
    paired_repeats: int = 0
    """Repeats with this stage judged in both the arm and the control."""
    consolidation_gain: Judged | None = None
    fairness: Spread | None = None
    control_goodput_per_device: Spread | None = None
    goodput_per_device_ratio: Judged | None = None
    verdict: str | None = None
    reasons: list[str] = Field(default_factory=list)


class RepeatBoundary(Model):
    """One repeat's boundary."""

    repeat: int
    status: str
    stage_position: float
    offered: PerClass
    limiting: str | None
    between: list[int] | None = None
    note: str | None = None


class Boundary(Model):
    """An arm's operating boundary: the highest load where every class meets its SLOs and error budget."""

    status: str
    """``reached``, ``not reached`` (every stage passed), ``below the lowest stage`` or ``not measured``."""
    text: str
    stage_position: Spread
    offered: PerClass
    limiting: str | None
    stage_order: list[int] = Field(default_factory=list)
    per_repeat: list[RepeatBoundary] = Field(default_factory=list)


class RepeatCapacity(Model):
    """One trial's search outcome."""

    repeat: int
    status: str
    scale: float | None
    runs: int
    fixed_sweep_runs: int
    capacity_per_device: float | None
    limited: str | None = None
    """Where its load generator fell behind before the boundary (status ``generator-limited``: ``scale`` is
    only a lower bound), else None."""


class Capacity(Model):
    """An adaptive arm's searched boundary and capacity per device."""

    mix: PerClass
    scale: Spread
    offered: PerClass
    capacity_per_device: Spread
    capacity_per_device_ratio: Judged | None
    per_repeat: list[RepeatCapacity]


class RayRepeat(Model):
    """One trial's boundary along one ray of the envelope (composed over its segments; analysis/envelope.py)."""

    repeat: int
    status: str
    scale: float | None
    """The estimate: the bracket's midpoint (scale of the ray's mix)."""
    lo: float | None
    """The highest scale that passed (held, where a sustain confirmed it)."""
    hi: float | None
    sustain: str | None
    runs: int
    undecided: int = 0
    stopped: str | None = None


class EnvelopeRay(Model):
    """The arm's boundary along one ray (load mix) over its repeats: one point of its envelope's frontier."""

    name: str
    mix: PerClass
    """Class -> req/s at scale 1 (classes it leaves idle absent)."""
    held_out: bool = False
    """Searched to test the envelope model's prediction, and kept out of its fit."""
    status: str
    scale: Spread
    """The boundary's scale over repeats (each repeat's estimate)."""
    lo: Spread
    """The highest passing scale over repeats: the load shown to keep every SLO."""
    boundary: PerClass
    """Class -> its load at the mean scale."""
    limit: str | None = None
    """What breaks first beyond it: the criterion (``embedding p95``) most repeats name, else None."""
    per_repeat: list[RayRepeat] = Field(default_factory=list)


class CriterionFit(Model):
    """One latency criterion in the envelope model: P95 = a + b / (1 - u), u = Σ_k w_k λ_k (analysis/envelope_model)."""

    workload: str
    slo_ms: float
    a: float
    """ms: what the class takes with its device idle."""
    b: float
    """ms: how much it suffers as the device's work for it nears saturation."""
    weights: PerClass
    """Class k -> w_k: the share of this criterion's device one request/s of k takes (its interference row)."""
    limit: float
    """U = 1 - b / (SLO - a): the u at which it reaches its SLO (0 when even idle it does not)."""
    measured: float
    """The highest u of any stage it was fit on: beyond it the model's answer is an extrapolation."""
    points: int
    fit_error: float | None
    """Root mean square relative error of its P95s on its points."""


class EnvelopeFit(Model):
    """The envelope model of one arm (analysis/envelope_model.py): its parameters, fit and validation."""

    form: str
    """The model in words, with its formula."""
    fitted_on: list[str]
    """The rays whose probes it was fit on (the held-out ones are not)."""
    devices: list[list[str]]
    """The classes that share a device in this arm (one list per device: each class alone where exclusive)."""
    criteria: dict[str, CriterionFit]
    """Criterion (``llm p95``, ``llm ttft p95``) -> its fit."""
    points: int
    """Probe measurements it was fit on."""
    fit_error: float | None
    """Root mean square relative error of its P95s on those points."""
    rays: dict[str, float | None]
    """Ray -> predicted boundary scale; the held-out ones were not fit."""
    held_out_error: dict[str, float | None] = Field(default_factory=dict)
    """Held-out ray -> (predicted - measured) / measured boundary scale."""
    validated: str
    """Where its predictions may be used: the cone of the fit rays and the loads measured, in words."""


class Envelope(Model):
    """An arm's operating envelope: its boundary along every ray searched, and its model where one was fit."""

    rays: list[EnvelopeRay]
    model: EnvelopeFit | None = None


class Conditions(Model):
    """Where a verdict was measured: it may not hold on another device, driver or load range."""

    backend: str | None
    devices: list[str]
    driver: str | None
    sharing: str
    control_sharing: str | None
    load_range: dict[str, tuple[float, float]]
    arrival: dict[str, str]
    repeats: int


class Verdict(Model):
    """An arm's overall call, as a sentence a platform engineer can act on."""

    call: str
    text: str
    worth_it_up_to_stage: int | None
    conditions: Conditions


class Answer(Sparse):
    """An arm's answer in a few words (analysis/answer.py): what the terminal and the report open with."""

    SPARSE: ClassVar[frozenset[str]] = frozenset({"growth"})

    call: str
    """The arm's verdict call; ``control`` for the control arm."""
    at: str | None
    """Where ``per_device`` was measured: ``the searched boundary``, or the stage its verdict rests on."""
    per_device: Spread | None
    """Requests per second within SLO per device there: the capacity within SLOs per device (a search) or
    the goodput per device at that stage."""
    control_per_device: Spread | None = None
    """The control's figure at the same load (a sharing arm); None for the control itself."""
    ratio: Judged | None = None
    """``per_device`` over the control's, paired by repeat."""
    limiting: str | None = None
    """What limits the arm there: the class (and figure) past its SLO, or the boundary's limit."""
    next_step: str
    """What would make the answer firmer or wider, or that none is needed (the rule: analysis/answer.py)."""
    growth: LatencyGrowth | None = None
    """Where the latency the arm adds goes (a sharing arm whose servers said it); absent otherwise and in files
    written before it."""


class ArmComparison(Model):
    """One arm: its boundary, its stages against the control, its verdict."""

    sharing: str | None
    is_control: bool
    devices_charged: Spread
    boundary: Boundary
    stages: list[StageComparison] = Field(default_factory=list)
    search: Capacity | None = None
    verdict: Verdict | None = None
    answer: Answer | None = None
    """The arm's answer in short (absent in files written before it)."""
    envelope: Envelope | None = None
    """Searched along several rays (``search.mixes``): the arm's envelope; None otherwise."""


class Comparison(Model):
    """Every arm against the control arm, and how the figures were computed."""

    control: str | None
    method: dict[str, str]
    arms: dict[str, ArmComparison]


class ScenarioRef(Model):
    """Which scenario the campaign ran."""

    name: str | None
    sha256: str | None
    path: str | None


class Resume(Model):
    """One time the campaign was resumed (``--resume``; launch/resume.py): when, from what, what it re-ran."""

    number: int
    """1 for the first resume."""
    at_s: float
    previous_status: str | None
    """How the process before it left the campaign: ``interrupted``, ``failed``, or ``unfinished`` (killed)."""
    previous_reason: str | None = None
    kept: list[tuple[int, int]] = Field(default_factory=list)
    """(trial, segment) kept as they were."""
    rerun: list[tuple[int, int]] = Field(default_factory=list)
    """(trial, segment) whose unfinished attempt was superseded and which ran again from their start."""
    superseded: dict[str, int] = Field(default_factory=dict)
    """Table -> rows of those attempts moved to results.sqlite's ``superseded_*`` tables."""
    host: str | None = None
    command: list[str] | None = None


class Ending(Model):
    """How a campaign's last process ended it: completed, failed or interrupted, why, and when."""

    status: str
    reason: str | None = None
    ended_s: float | None = None


class CampaignStatus(Ending):
    """How the campaign ended, and each time it was resumed."""

    resumed: list[Resume] = Field(default_factory=list)
    """Every resume, oldest first (empty: the campaign ran in one process)."""


class Overrides(Model):
    """What the command line overrode of the scenario (None: not given): recorded, and taken again on a resume."""

    arm: str | None = None
    """``--arm``: the arms run (the rest of the scenario's were left out)."""
    repeats: int | None = None
    """``--repeats``."""
    stage_duration: float | None = None
    """``--stage-duration``, in seconds."""

    def given(self) -> dict[str, str | int | float]:
        """The overrides that were given, by name."""
        return {name: value for name, value in self.model_dump().items() if value is not None}


class BorrowedBracket(Model):
    """Where one ray's search starts in the first repeat of its arm: the bracket an earlier campaign's search of the
    same arm, classes, ray and rates ended with (``--warm-start-from``)."""

    arm: str
    classes: list[str]
    """The classes the ray loads in the segment (one, where the arm measures each class alone)."""
    ray: str
    mix: PerClass
    """Class -> its load at scale 1, the same in both campaigns."""
    lo: float | None
    hi: float | None


class WarmStartFrom(Model):
    """The earlier campaign whose brackets a campaign's searches started from (``--warm-start-from DIR``): only where
    each ray's search first looks; every boundary rests on the campaign's own probes (analysis/search.py, 4)."""

    directory: str
    """The earlier campaign's results directory, as given."""
    campaign: str | None = None
    """Its scenario's name."""
    sha256: str | None = None
    """Its scenario's sha256."""
    started_s: float | None = None
    brackets: list[BorrowedBracket] = Field(default_factory=list)


class RequestSetRef(Model):
    """A class's request set as the campaign recorded it: enough to tell whether another campaign sent the same."""

    # In the order of their names, as the store keeps them.
    count: int
    """How many requests it holds."""
    sha256: str
    """The hash of its items (scenario/request_sets.py), the same on every load generator."""
    source: str
    """Where it came from: a file, or ``generated(seed=N)``."""
    workload: str


class Provenance(Recorded):
    """Where and how the campaign ran (results/provenance.py): enough to rerun it, and to tell apart the
    conditions of another campaign. Each fact is written only where it was recorded, so a campaign from
    before a fact existed (``source_digest``) reads and writes as it was."""

    # In the order of their names, as the store keeps them.
    backend: BackendFacts | None = None
    """The sharing backend's own description (SharingBackend.describe: its name, devices, driver, ...)."""
    command: list[str] | None = None
    host: str | None = None
    packages: dict[str, str | None] | None = None
    """Package -> its installed version (None: not installed), for the packages that shape a measurement."""
    platform: str | None = None
    python: str | None = None
    source_digest: str | None = None
    """The sha256 of bench_plugin's own source files (results/provenance.py)."""
    source_revision: str | None = None
    """The git revision of the source that ran, where it was a git checkout."""
    utc_offset_s: int | None = None
    """The campaign host's offset from UTC when it started (seconds east): the report's times are its clock."""


class Summary(Model):
    """The whole summary.json document."""

    schema_: Literal["bench_plugin.summary/2"] = Field(default=SCHEMA, alias="schema")
    scenario: ScenarioRef
    status: CampaignStatus
    overrides: Overrides | None = None
    classes: list[str] | None = None
    control: str | None = None
    request_sets: dict[str, RequestSetRef] | None = None
    conditions: Provenance | None = None
    slo: dict[str, dict[str, float | None] | None] = Field(default_factory=dict)
    embedding_format: str | None = None
    """How the embedding class asked for its vectors (its ``encoding_format``); None without an embedding class,
    and in summaries written before the key existed (their campaigns asked for floats)."""
    trials: list[TrialSummary] = Field(default_factory=list)
    arms: dict[str, ArmFigures] = Field(default_factory=dict)
    comparison: Comparison
    load_generators: LoadGenerators | None = None
    """Who sent the load and how their number was decided; None in summaries written before it was recorded."""
    warm_start_from: WarmStartFrom | None = None
    """The earlier campaign the searches started from (``--warm-start-from``); None where none was given."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    def to_json(self) -> str:
        """The document as written to summary.json (indented, keys in model order)."""
        return json.dumps(self.model_dump(mode="json", by_alias=True), indent=2) + "\n"


def save_summary(summary: Summary, path: Path) -> None:
    """Write ``summary`` to ``path`` (summary.json)."""
    path.write_text(summary.to_json(), encoding="utf-8")


def load_summary(path: Path) -> Summary:
    """Read a summary.json; SummaryError (one line) when it is unreadable or of another schema version."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise SummaryError(f"{path}: cannot read it: {exc}") from None
    return parse_summary(data, str(path))


def first_problem(exc: ValidationError) -> str:
    """``place.of.field: message`` of a validation's first problem: one line for a refusal."""
    first = exc.errors()[0]
    return f"{'.'.join(str(part) for part in first['loc'])}: {first['msg']}"


def parse_summary(data: Any, where: str = "summary.json") -> Summary:
    """A Summary from its JSON form; SummaryError naming the schema when it is not this version's."""
    if not isinstance(data, dict):
        raise SummaryError(f"{where}: not a summary (a JSON object was expected)")
    schema = data.get("schema")
    if schema != SCHEMA:
        hint = (" (written by an older bench-plugin: regenerate it with `bench-plugin report DIR`)"
                if isinstance(schema, str) and schema.startswith("bench_plugin.summary/") else "")
        raise SummaryError(f"{where}: schema {schema!r} is not {SCHEMA!r}, the one this bench-plugin reads{hint}")
    try:
        return Summary.model_validate(data)
    except ValidationError as exc:
        raise SummaryError(f"{where}: {first_problem(exc)} ({exc.error_count()} problem(s))") from None
