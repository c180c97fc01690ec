"""Live view: what a running campaign looks like now, per class, for the web UI (and anything else that asks).

The master (or local runner) sees every sample as it arrives. Per class the view keeps the samples
of the current stage, and a snapshot gives, over the stage's last WINDOW_S seconds and over the stage
so far: the requests that ended, errors, throughput against the offered rate, P50/P95 of end-to-end
latency, TTFT and TPOT P95 (llm), and whether the class keeps its SLOs and error budget there.
Percentiles are over successful requests, as in the summary, with numpy's default (linear) interpolation.

The window is ``(max(end - WINDOW_S, stage start), end]`` by each request's END time, with
``end = now - SETTLE_S``, over the current stage's requests only: it never reaches into the stage
before (nor into another class-run of an exclusive arm, a stage of its own segment), so early in a
stage it is shorter than WINDOW_S and says so (``span_s``, and the snapshot's window bounds). Workers
ship samples every 0.2 s, so a request that ended a second ago has reached the master and the
window's figures are final when shown: the same window recomputed from results.sqlite after the
campaign gives the same numbers (the web UI test does exactly that). The SLO call is the summary's
own judge (analysis.objectives.figure_criteria) on these figures. The snapshot also says where the
campaign is (arm, repeat, trial, stage, time left) and, from the summary's comparison after each
trial, the verdict per arm so far: each trial is summarised once, as it ends, and kept, so its samples
are read once here (again only where a resumed trial runs again) rather than the whole store after every trial.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from bench_plugin.analysis.objectives import ClassObjectives, figure_criteria, objectives_from_scenario
from bench_plugin.analysis.statistics import percentile
from bench_plugin.analysis.summary import record_comparison, trial_summary
from bench_plugin.results.samples import Sample
from bench_plugin.results.server_rows import Quantity
from bench_plugin.results.store import CampaignReader, TrialRecord, open_campaign
from bench_plugin.results.summary import Comparison, TrialSummary
from bench_plugin.results.words import CampaignState
from bench_plugin.run.hooks import BenchEvents
from bench_plugin.scenario import Scenario

logger = logging.getLogger(__name__)

WINDOW_S = 10.0
"""The rolling window's length (at most: it starts no earlier than the stage)."""

SETTLE_S = 1.0
"""How old a request's end must be before it counts: every worker has reported it by then."""


@dataclass(frozen=True)
class Figures:
    """One class over one span (the rolling window, or the stage so far)."""

    requests: int
    errors: int
    span_s: float
    throughput_rps: float
    """Successful requests per second of the span."""
    p50_ms: float | None
    p95_ms: float | None
    ttft_p95_ms: float | None = None
    tpot_p95_ms: float | None = None
    slo: str = "-"
    """``ok``, ``over: p95, ttft`` (the objectives missed), or ``-`` with no requests."""


@dataclass(frozen=True)
class ClassLive:
    """A class's live figures: offered rate, the rolling window and the stage so far, its GPU."""

    name: str
    offered: float | None
    arrival: str
    window: Figures
    stage: Figures
    gpu_util: float | None = None
    vram_mib: float | None = None
    queue_depth: float | None = None
    """Requests waiting in the class's server's queue, as its metrics last said (telemetry/server_poller.py)."""
    running: float | None = None
    """Requests its server was processing (its running batch), as its metrics last said."""


@dataclass(frozen=True)
class LiveSnapshot:
    """The campaign now: where it is, each class's figures, the verdict so far."""

    taken_s: float
    window_start_s: float
    window_end_s: float
    status: str
    """``waiting`` (not started), ``running``, or how it ended (completed, failed, interrupted)."""
    position: dict[str, Any]
    classes: list[ClassLive]
    verdicts: dict[str, str]
    """Arm -> its verdict text so far (from the summary after each trial)."""
    report: str | None = None
    """The report's path once the campaign has ended."""
    reason: str | None = None
    """Why a campaign that did not complete ended (the stop, the lost worker, the server's error)."""
    ended_s: float | None = None
    """When it ended (epoch seconds)."""


SHORT_NAMES = {"p95": "p95", "ttft p95": "ttft", "tpot p95": "tpot", "error rate": "errors"}
"""A criterion's name (objectives.Criterion.name) as ``Figures.slo`` shows it."""


def figures(samples: Iterable[Sample], span_s: float, workload: str, objectives: ClassObjectives) -> Figures:
    """The figures of class ``workload``'s ``samples`` over ``span_s`` seconds, judged against its SLO and error
    budget by the summary's own judge (objectives.figure_criteria): the same figures get the same call in both."""
    items = list(samples)
    ok = [s for s in items if s.ok]
    latency = [s.latency_ms for s in ok]
    ttft = [v for s in ok if (v := s.ttft_ms) is not None]
    tpot = [v for s in ok if (v := s.tpot_ms) is not None]
    out = Figures(
        requests=len(items), errors=len(items) - len(ok), span_s=span_s,
        throughput_rps=len(ok) / span_s if span_s > 0 else 0.0,
        p50_ms=percentile(latency, 50), p95_ms=percentile(latency, 95),
        ttft_p95_ms=percentile(ttft, 95), tpot_p95_ms=percentile(tpot, 95),
    )
    if not items:
        return out
    criteria = figure_criteria(workload, objectives, requests=out.requests,
                               error_rate=out.errors / out.requests, p95_ms=out.p95_ms,
                               ttft_p95_ms=out.ttft_p95_ms, tpot_p95_ms=out.tpot_p95_ms)
    missed = [SHORT_NAMES[c.name] for c in criteria if not c.passed]
    return replace(out, slo="over: " + ", ".join(missed) if missed else "ok")


@dataclass
class _Stage:
    key: tuple[int, int, int]
    name: str | None
    start_s: float
    end_s: float
    offered: dict[str, float]


@dataclass
class LiveView:
    """Keeps what the snapshot needs; fed by the campaign's hooks (see ``attach``)."""

    scenario: Scenario
    classes: list[str]
    trials: int
    current: dict[str, list[Sample]] = field(default_factory=dict)
    """Class -> the current stage's samples."""
    stage: _Stage | None = None
    status: str = CampaignState.WAITING
    position: dict[str, Any] = field(default_factory=dict)
    verdicts: dict[str, str] = field(default_factory=dict)
    report: str | None = None
    reason: str | None = None
    ended_s: float | None = None
    gpu: dict[str, tuple[float | None, float | None]] = field(default_factory=dict)
    """Class -> (GPU utilisation %, VRAM MiB) as last sampled, where telemetry runs."""
    server: dict[str, dict[str, float]] = field(default_factory=dict)
    """Class -> quantity (results/server_rows.py) -> its server's value as last read."""
    summaries: dict[int, tuple[TrialRecord, TrialSummary]] = field(default_factory=dict)
    """Trial id -> the record it was summarised from and its summary (see ``comparison_so_far``)."""
    judged_by: dict[str, ClassObjectives] | None = None
    """The objectives ``summaries`` were judged by."""
    started_s: float | None = None
    """When the first trial of this process began."""
    trials_done: int = 0
    """Trials this process ran to their end (for the campaign's estimated end)."""
    last_trial_end_s: float | None = None

    def __post_init__(self) -> None:
        for name in self.classes:
            self.current.setdefault(name, [])

    def watch(self, events: BenchEvents, store: Path) -> None:
        """Follow the campaign's own hooks; after each trial, read the verdict so far from ``store``."""
        events.trial_start.add_listener(
            lambda trial, **_: self.on_trial_start(number=trial.position + 1, arm=trial.arm.name, repeat=trial.repeat))
        events.stage_start.add_listener(
            lambda trial, segment, stage, offered, name, start_s, end_s, **_: self.on_stage_start(
                key=(trial.id, segment, stage), name=name, start_s=start_s, end_s=end_s, offered=offered))
        events.trial_stop.add_listener(lambda trial, **_: self.on_trial_stop(time.time(), store, trial.id))

    def update_verdicts(self, store: Path, ended: int | None = None) -> None:
        """The verdict per arm over the trials so far in ``store`` (trial ``ended`` just ended); a failure only logs."""
        try:
            with open_campaign(store) as reader:
                arms = self.comparison_so_far(reader, ended).arms
        except Exception:  # the live view must never stop a campaign; the final summary says what is wrong
            logger.exception("the verdict so far could not be computed")
            return
        self.verdicts = {arm: fig.verdict.text if fig.verdict else "-" for arm, fig in arms.items()
                         if not fig.is_control}

    def comparison_so_far(self, reader: CampaignReader, ended: int | None = None) -> Comparison:
        """The summary's comparison section over the store's trials now, summarising only the trials that changed.

        A trial is summarised (analysis.summary.trial_summary) when it is new to the view, when it just ``ended``
        or when its record differs from the one its summary came from (a resumed campaign's trial runs again),
        and that summary replaces the one kept; the comparison is then built from the kept ones exactly as
        build_summary builds it (record_comparison), so it equals the full summary's.
        """
        record = reader.record()
        objectives = objectives_from_scenario(record.scenario)
        if objectives != self.judged_by:  # judged by other limits: nothing kept holds
            self.summaries, self.judged_by = {}, objectives
        trials = reader.trials()  # the trials' rows only, no samples: cheap
        for trial in trials:
            kept = self.summaries.get(trial.id)
            if trial.id == ended or kept is None or kept[0] != trial:
                self.summaries[trial.id] = (trial, trial_summary(reader, trial, objectives))
        for gone in self.summaries.keys() - {t.id for t in trials}:
            del self.summaries[gone]
        return record_comparison(record, [self.summaries[t.id][1] for t in trials], objectives)

    def on_sample(self, sample: Sample) -> None:
        """One finished request, as the master received it."""
        if sample.workload not in self.current:
            return
        if self.stage is not None and (sample.trial, sample.segment, sample.stage) == self.stage.key:
            self.current[sample.workload].append(sample)

    def on_trial_start(self, *, number: int, arm: str, repeat: int, now: float | None = None) -> None:
        """A trial (1-based ``number`` of ``trials``) begins."""
        if self.started_s is None:
            self.started_s = time.time() if now is None else now
        self.status = CampaignState.RUNNING
        self.position = {"trial": number, "of": self.trials, "arm": arm, "repeat": repeat, "stage": None}

    def on_trial_stop(self, now: float, store: Path | None = None, trial: int | None = None) -> None:
        """A trial ended at ``now``; with ``store``, read the verdict so far (trial ``trial`` just ended)."""
        self.trials_done += 1
        self.last_trial_end_s = now
        if store is not None:
            self.update_verdicts(store, trial)

    def eta_end_s(self) -> float | None:
        """When the campaign should end, from the mean time of the trials this process ran (None before one
        ended): rough, since an exclusive arm's trial runs a segment per class and a shared arm's one."""
        if self.started_s is None or self.last_trial_end_s is None or not self.trials_done:
            return None
        ended = int(self.position.get("trial") or 1) - 1  # the trials before the one running (a resume skips some)
        mean = (self.last_trial_end_s - self.started_s) / self.trials_done
        return self.last_trial_end_s + max(0, self.trials - ended) * mean

    def on_stage_start(self, *, key: tuple[int, int, int], name: str | None, start_s: float, end_s: float,
                       offered: dict[str, float]) -> None:
        """A stage's arrivals begin at ``start_s``."""
        self.stage = _Stage(key, name, start_s, end_s, dict(offered))
        self.current = {name: [] for name in self.classes}
        self.position["stage"] = name if name is not None else f"stage {key[2]}"

    def on_end(self, status: str, report: str | None, reason: str | None = None) -> None:
        """The campaign ended (completed, failed or interrupted; ``reason``: why); its report is at ``report``."""
        self.status, self.report, self.reason, self.ended_s = status, report, reason, time.time()

    def snapshot(self, now: float | None = None) -> LiveSnapshot:
        """The figures now (see the module docstring for the window); frozen at the end once it ended."""
        now = time.time() if now is None else now
        if self.ended_s is not None:
            now = min(now, self.ended_s + SETTLE_S)
        end = now - SETTLE_S
        start = end - WINDOW_S if self.stage is None else min(end, max(end - WINDOW_S, self.stage.start_s))
        out = []
        for name in self.classes:
            spec = self.scenario.classes.get(name)
            judged = ClassObjectives(spec.slo, spec.error_budget)
            in_window = [s for s in self.current.get(name, []) if start < s.end_s <= end]
            stage_span = max(0.0, min(now, self.stage.end_s) - self.stage.start_s) if self.stage else 0.0
            util, vram = self.gpu.get(name, (None, None))
            said = self.server.get(name, {})
            out.append(ClassLive(
                name=name,
                offered=self.stage.offered.get(name) if self.stage else None,
                arrival=spec.arrival,
                window=figures(in_window, end - start, name, judged),
                stage=figures(self.current.get(name, []), stage_span, name, judged),
                gpu_util=util, vram_mib=vram,
                queue_depth=said.get(Quantity.QUEUE_DEPTH), running=said.get(Quantity.RUNNING),
            ))
        position = dict(self.position)
        if self.stage is not None:
            position["stage_start_s"] = self.stage.start_s
        if self.stage is not None and self.status == CampaignState.RUNNING:
            position["stage_left_s"] = max(0.0, self.stage.end_s - now)
            if (eta := self.eta_end_s()) is not None:
                position["eta_end_s"] = max(eta, now)
                position["trials_done"] = self.trials_done
        return LiveSnapshot(now, start, end, self.status, position, out, dict(self.verdicts), self.report,
                            self.reason, self.ended_s)
