"""Results folders for the report tests, written through the real Recorder and the real summary.

``make_campaign`` writes a small campaign the way the conductor does (an exclusive control measured
one class per segment, a shared arm with all classes in one segment, two repeats, three stages), with
the awkward parts a real run can have but a short CPU campaign rarely shows: timeouts, a stage rolled
back with the next one skipped, a stage interrupted, and GPU telemetry; and, in a variant, the pod
events a Kubernetes backend records (a Pending pod, a preemption, a drain). The times are fixed so the
pictures are the same at every run. summary.json comes from bench_plugin.report.outputs.write_summaries
(the analysis's typed Summary, saved); its "comparison" section is replaced by a hand-made one built
from the results models (the report must not depend on the analysis's current numbers), kept as the
analysis wrote it, or emptied (no control arm and no arm to compare: nothing to compare).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from stored_scenario import resolved

from bench_plugin.report.html import write_report
from bench_plugin.report.outputs import write_summaries
from bench_plugin.results.placement import ClassPlacement, Placement
from bench_plugin.results.pod_events import PodEvent
from bench_plugin.results.recorder import Recorder
from bench_plugin.results.samples import Sample
from bench_plugin.results.store import ClassWarmup
from bench_plugin.results.summary import (
    ArmComparison,
    Boundary,
    ClassComparison,
    Comparison,
    Conditions,
    Judged,
    Spread,
    StageComparison,
    Verdict,
    save_summary,
)
from bench_plugin.scenario import Arm
from bench_plugin.scenario.models import Slo

T0 = 1_800_000_000.0
STAGES = [("low", {"llm": 2.0, "embedding": 4.0, "asr": 1.0}), ("high", {"llm": 4.0, "embedding": 8.0, "asr": 2.0}),
          ("peak", {"llm": 8.0, "embedding": 16.0, "asr": 4.0})]
SLO = {"llm": {"p95_ms": 2000.0, "ttft_p95_ms": 1000.0, "tpot_p95_ms": 100.0}, "embedding": {"p95_ms": 1000.0},
       "asr": {"p95_ms": 3000.0}}
STAGE_S = 4.0
LOAD_S = 2.5
CLASSES = ["llm", "embedding", "asr"]


def _resolved_slo(name: str) -> dict[str, float | None]:
    """A class's SLO as the resolved scenario stores it: every objective named, None where it is not set."""
    return Slo.model_validate(SLO[name]).model_dump()


def _meta(rec: Recorder) -> None:
    arms = [{"name": "exclusive", "control": True, "sharing": "exclusive"},
            {"name": "shared", "control": False, "sharing": "time-slicing"}]
    rec.set_meta("scenario", {"name": "synthetic", "path": "scenarios/synthetic.yaml", "sha256": "ab" * 32,
                              "resolved": resolved(arms, {n: {"slo": _resolved_slo(n)} for n in CLASSES})})
    rec.set_meta("overrides", {"arm": None, "repeats": None, "stage_duration": 4})
    rec.set_meta("classes", CLASSES)
    rec.set_meta("request_sets", {n: {"count": 8, "sha256": f"{i}" * 64, "source": f"generated(seed={i})",
                                      "workload": n} for i, n in enumerate(CLASSES, 1)})
    rec.set_meta("conditions", {
        "backend": {"backend": "local", "driver": "550.54.15", "devices": [
            {"name": "gpu0", "model": "NVIDIA H200", "memory_mib": 143771, "uuid": "GPU-1234"}]},
        "command": ["locust", "--headless", "--scenario", "scenarios/synthetic.yaml"], "host": "bench-host",
        "packages": {"locust": "2.47.0", "numpy": "2.4.6"}, "platform": "Linux-test", "python": "3.11.7",
        "source_revision": "0123456789abcdef0123456789abcdef01234567",
    })
    rec.set_meta("started_s", T0)


def _samples(name: str, trial: int, segment: int, stage: int, start: float, rate: float, rng: np.random.Generator,
             fail_share: float, slow: float, stop_after: float = STAGE_S) -> list[Sample]:
    out = []
    n = max(1, int(rate * STAGE_S))
    for seq in range(n):
        intended = start + seq * STAGE_S / n
        if intended > start + stop_after:
            break  # a stage stopped early (rolled back, interrupted) sent nothing after it stopped
        latency = float(rng.lognormal(np.log(0.02 * slow), 0.3))
        ok = rng.random() >= fail_share
        end = intended + (latency if ok else 5.0)
        llm = name == "llm" and ok
        out.append(Sample(name, trial, segment, stage, seq, seq % 8, intended, intended + 0.0005, end, ok,
                          first_token_s=intended + latency / 3 if llm else None, output_tokens=8 if llm else None,
                          error=None if ok else "timeout", detail=None if ok else "no answer within 5 s",
                          status=200 if ok else None, inputs=4 if name == "embedding" else None,
                          audio_s=2.0 if name == "asr" else None))
    return out


def _segment(rec: Recorder, db_times: list[tuple[str, tuple[Any, ...]]], trial: int, segment: int, classes: list[str],
             t: float, rng: np.random.Generator, shared: bool, abort_at: int | None, interrupt_at: int | None) -> float:
    placement = Placement({n: ClassPlacement(device="gpu0", node="bench-host", pid=1000 + trial * 10 + i,
                                             url=f"http://127.0.0.1:{9000 + i}",
                                             command=["python", "-m", "bench_plugin.servers", n, "--device", "cuda:0"])
                           for i, n in enumerate(classes)})
    rec.segment_applied(trial, segment, classes, placement)
    db_times.append(("UPDATE segments SET applied_s=? WHERE trial=? AND segment=?", (t, trial, segment)))
    rec.segment_ready(trial, segment, {n: t + LOAD_S + 0.3 * i for i, n in enumerate(classes)})
    rec.segment_warmed(trial, segment, {n: ClassWarmup(t + LOAD_S + 0.3 * i, t + LOAD_S + 0.45, 4, 0)
                                        for i, n in enumerate(classes)})
    t += LOAD_S + 0.5
    for index, (name, load) in enumerate(STAGES):
        offered = {n: load[n] for n in classes}
        arrival = {n: "poisson" for n in classes}
        if abort_at is not None and index > abort_at:
            rec.stage_skipped(trial, segment, index, name, offered, arrival, f"stage {abort_at} was rolled back")
            continue
        rec.stage_started(trial, segment, index, name, offered, arrival, t)
        slow = (1.0 + index) * (3.0 if shared else 1.0)
        fail = 0.3 if index == abort_at else (0.02 if shared and index == 1 else 0.0)
        stop_after = STAGE_S / 2 if index == abort_at else STAGE_S / 3 if index == interrupt_at else STAGE_S
        for n in classes:
            rec.add_samples(_samples(n, trial, segment, index, t, load[n], rng, fail, slow, stop_after))
        if index == abort_at:
            rec.stage_ended(trial, segment, index, t + STAGE_S / 2, "aborted", "llm P95 past 3x its SLO")
            t += STAGE_S / 2 + 0.2
        elif index == interrupt_at:
            rec.stage_ended(trial, segment, index, t + STAGE_S / 3, "interrupted", "the run was stopped")
            t += STAGE_S / 3
            break
        else:
            rec.stage_ended(trial, segment, index, t + STAGE_S, "completed")
            t += STAGE_S + 0.2
    rec.segment_released(trial, segment)
    db_times.append(("UPDATE segments SET released_s=? WHERE trial=? AND segment=?", (t + 0.1, trial, segment)))
    return t + 0.2


UNSCHEDULABLE = ("0/1 nodes are available: 1 Insufficient nvidia.com/gpu.shared. preemption: 0/1 nodes are "
                 "available: 1 No preemption victims found for incoming pod.")
CORDONED = ("0/1 nodes are available: 1 node(s) were unschedulable. preemption: 0/1 nodes are available: "
            "1 Preemption is not helpful for scheduling.")


def _pod(rec: Recorder, trial: int, name: str, workload: str, created: float, *,
         scheduled: float | None = None, ready: float | None = None, deleted: float | None = None,
         failed: tuple[tuple[float, str, int], ...] = (), node: str = "gpu-a",
         resource: str = "nvidia.com/gpu.shared") -> str:
    """One pod's events as the Kubernetes backend's pod watch records them; its uid."""
    uid = f"uid-{name}"

    def add(kind: str, t: float, **fields: Any) -> None:
        rec.pod_event(trial, PodEvent(t=t, kind=kind, pod=name, uid=uid, workload=workload, **fields))

    add("created", created)
    for t, message, count in failed:
        add("failed_scheduling", t, reason="FailedScheduling", message=message, count=count)
    if scheduled is not None:
        add("scheduled", scheduled, node=node, requests={resource: "1"})
        add("started", scheduled + 0.4, node=node)
    if ready is not None:
        add("ready", ready, node=node)
    if deleted is not None:
        add("deleted", deleted, node=node if scheduled is not None else None, message="grace period 30 s")
    return uid


def add_pod_events(rec: Recorder, trial: int, arm: str, repeat: int,
                   segments: list[tuple[list[str], float, float]]) -> None:
    """Pod events of one trial: ``segments`` are (classes, applied_s, released_s) as the trial ran them.

    The exclusive arm's pods are placed at once; the shared arm's asr pod waits 2 s for a replica
    (FailedScheduling, twice) in repeat 1; in repeat 2 a new llm pod preempts the embedding pod, the
    asr pod is evicted by a drain and its replacement stays Pending (cordoned node) to the trial's end.
    """
    resource = "nvidia.com/gpu" if arm == "exclusive" else "nvidia.com/gpu.shared"
    for classes, applied, released in segments:
        for i, name in enumerate(classes):
            pod = f"bench-{name}-{trial}{i}f9c-x{i}z"
            if arm == "exclusive" or name != "asr" or repeat == 2:
                _pod(rec, trial, pod, name, applied, scheduled=applied, ready=applied + 1.0,
                     deleted=None if (arm, repeat) == ("shared", 2) and name != "llm" else released,
                     resource=resource)
            else:
                _pod(rec, trial, pod, name, applied, scheduled=applied + 2.0, ready=applied + 2.5, deleted=released,
                     failed=((applied + 0.01, UNSCHEDULABLE, 1), (applied + 1.2, UNSCHEDULABLE, 1)),
                     resource=resource)
        if arm == "shared" and repeat == 2:
            victim = f"bench-embedding-{trial}1f9c-x1z"
            urgent = _pod(rec, trial, f"bench-llm-{trial}9b7d-u9q", "llm", applied + 5.0, scheduled=applied + 5.0,
                          ready=applied + 5.6, deleted=released,
                          failed=((applied + 5.02, UNSCHEDULABLE, 1),), resource=resource)
            rec.pod_event(trial, PodEvent(t=applied + 4.99, kind="deleted", pod=victim, uid=f"uid-{victim}",
                                          workload="embedding", node="gpu-a", message="grace period 30 s"))
            rec.pod_event(trial, PodEvent(t=applied + 5.01, kind="preempted", pod=victim, uid=f"uid-{victim}",
                                          workload="embedding", node="gpu-a", reason="Preempted",
                                          message=f"Preempted by pod {urgent} on node gpu-a"))
            asr = f"bench-asr-{trial}2f9c-x2z"
            rec.pod_event(trial, PodEvent(t=applied + 7.0, kind="evicted", pod=asr, uid=f"uid-{asr}", workload="asr",
                                          node="gpu-a", reason="EvictionByEvictionAPI",
                                          message="EvictionByEvictionAPI: Eviction API: evicting"))
            rec.pod_event(trial, PodEvent(t=applied + 7.0, kind="deleted", pod=asr, uid=f"uid-{asr}", workload="asr",
                                          node="gpu-a", message="grace period 30 s"))
            _pod(rec, trial, f"bench-asr-{trial}5c1e-r2p", "asr", applied + 7.1,
                 failed=((applied + 7.11, CORDONED, 1), (applied + 9.0, CORDONED, 3)), resource=resource)


def build_store(results: Path, telemetry: bool = True, interrupted: bool = False, pods: bool = False) -> Path:
    """Write results.sqlite for the synthetic campaign (with the cluster's pod events when ``pods``); its path."""
    rec = Recorder(results / "results.sqlite")
    _meta(rec)
    rng = np.random.default_rng(7)
    db_times: list[tuple[str, tuple[Any, ...]]] = []
    t = T0
    plan = [(1, "exclusive", 1), (2, "shared", 1), (3, "exclusive", 2), (4, "shared", 2)]
    for position, (trial, arm, repeat) in enumerate(plan):
        rec.add_trial(trial, position, Arm(name=arm, sharing="exclusive" if arm == "exclusive" else "time-slicing",
                                           control=arm == "exclusive"), repeat)
        rec.trial_started(trial)
        start = t
        shared = arm == "shared"
        segments = [CLASSES] if shared else [[n] for n in CLASSES]
        ran: list[tuple[list[str], float, float]] = []
        for segment, classes in enumerate(segments):
            abort = 1 if shared and repeat == 2 and not interrupted else None
            stop = 2 if interrupted and trial == 4 else None
            applied = t
            t = _segment(rec, db_times, trial, segment, classes, t, rng, shared, abort, stop)
            ran.append((classes, applied, t - 0.1))
        if pods:
            add_pod_events(rec, trial, arm, repeat, ran)
        rec.trial_ended(trial, "interrupted" if interrupted and trial == 4 else "completed")
        db_times.append(("UPDATE trials SET started_s=?, ended_s=? WHERE id=?", (start, t, trial)))
        t += 0.5
    rec.set_meta("status", {"status": "interrupted" if interrupted else "completed", "reason": None, "ended_s": t})
    for sql, params in db_times:
        rec._db.execute(sql, params)  # the Recorder stamps wall-clock times; the test wants fixed ones
    rec.close()
    if telemetry:
        add_telemetry(results / "results.sqlite")
    return results / "results.sqlite"


def add_telemetry(path: Path) -> None:
    """A telemetry table as bench_plugin.telemetry writes it: DCGM device series and per-process series by pid."""
    db = sqlite3.connect(path)
    # The Recorder creates the table (with a trial column too); the five named columns are the contract.
    db.execute("CREATE TABLE IF NOT EXISTS telemetry (t REAL, device TEXT, metric TEXT, value REAL, process TEXT)")
    rows: list[tuple[float, str, str, float, str | None]] = []
    for trial, start, end in db.execute("SELECT id, started_s, ended_s FROM trials").fetchall():
        pids = {}
        for placement, in db.execute("SELECT placement FROM segments WHERE trial=?", (trial,)):
            pids.update({str(w["pid"]): name for name, w in json.loads(placement).items()})
        for t in np.arange(start, end, 0.5):
            phase = float(t - start)
            rows += [(t, "cuda:0", "DCGM_FI_DEV_GPU_UTIL", min(100.0, 6.0 * phase), None),
                     (t, "cuda:0", "DCGM_FI_DEV_FB_USED", 2000.0 + 150.0 * phase, None),
                     (t, "cuda:0", "DCGM_FI_DEV_FB_TOTAL", 143771.0 / 16, None),
                     (t, "cuda:0", "DCGM_FI_DEV_SM_CLOCK", 1980.0, None)]  # recorded, not drawn
            for i, pid in enumerate(pids):
                rows.append((t, "cuda:0", "bench_process_gpu_memory_used_mib", 500.0 * (i + 1) + 40.0 * phase, pid))
    db.executemany("INSERT INTO telemetry (t, device, metric, value, process) VALUES (?,?,?,?,?)", rows)
    db.commit()
    db.close()


def fig(mean: float, ci: float | None = 0.05, n: int = 2) -> Spread:
    """A value over repeats: arithmetic mean ± ci95 = [lo, hi]."""
    lo, hi = (mean - ci, mean + ci) if ci is not None else (None, None)
    return Spread(kind="value", mean=mean, ci95=ci, lo=lo, hi=hi, values=[mean] * n)


def ratio(mean: float, factor: float | None = 1.05, n: int = 2, no_change: float = 1.0,
          significant: bool = False, call: str = "no significant difference") -> Judged:
    """A ratio to the control over repeats: geometric mean, interval [mean / factor, mean · factor], and its call."""
    lo, hi = (mean / factor, mean * factor) if factor is not None else (None, None)
    return Judged(kind="ratio", mean=mean, ci95=None, lo=lo, hi=hi, values=[mean] * n, no_change=no_change,
                  significant=significant, call=call)


def comparison_section() -> Comparison:
    """A hand-made "comparison" section, typed as bench_plugin.analysis writes it."""
    def classes(index: int) -> dict[str, ClassComparison]:
        return {n: ClassComparison(
            normalised_throughput=ratio(1.0 - 0.1 * index, significant=index > 0,
                                        call="lower" if index else "no significant difference"),
            slowdown_p95=ratio(1.5 + index, significant=True, call="higher"),
            slo_attainment=fig(1.0 - 0.1 * index), goodput_rps=fig(3.0 - index), meets_slo=index == 0,
            within_error_budget=index < 2) for n in CLASSES}

    def stage(index: int, verdict: str, gain: float, gpd: float, reasons: list[str]) -> StageComparison:
        return StageComparison(
            index=index, offered=STAGES[index][1], repeats=2, paired_repeats=2, classes=classes(index),
            consolidation_gain=ratio(gain, no_change=float(len(CLASSES))), fairness=fig(0.98 - 0.1 * index),
            goodput_per_device=fig(10.0 - index), control_goodput_per_device=fig(4.0),
            goodput_per_device_ratio=ratio(gpd, significant=True, call="higher" if gpd > 1 else "lower"),
            verdict=verdict, reasons=reasons)

    def control_stage(index: int) -> StageComparison:
        own = {n: ClassComparison(slo_attainment=fig(1.0), goodput_rps=fig(1.0 + index), meets_slo=True,
                                  within_error_budget=True) for n in CLASSES}
        return StageComparison(index=index, offered=STAGES[index][1], repeats=2, classes=own,
                               goodput_per_device=fig(4.0))

    conditions = Conditions(backend="local", devices=["gpu0 (NVIDIA H200)"], driver="550.54.15",
                            sharing="time-slicing", control_sharing="exclusive",
                            load_range={"llm": (2.0, 8.0), "embedding": (4.0, 16.0), "asr": (1.0, 4.0)},
                            arrival={n: "poisson" for n in CLASSES}, repeats=2)
    return Comparison(control="exclusive", method={"pairing": "by hand"}, arms={
        "exclusive": ArmComparison(
            sharing="exclusive", is_control=True, devices_charged=fig(3.0, None),
            boundary=Boundary(status="not reached", text="every stage met its SLOs", stage_position=fig(2.0),
                              offered=STAGES[2][1], limiting=None),
            stages=[control_stage(i) for i in range(3)]),
        "shared": ArmComparison(
            sharing="time-slicing", is_control=False, devices_charged=fig(1.0, None),
            boundary=Boundary(status="reached", text="up to stage 0 (low): llm P95 passes its SLO above it",
                              stage_position=fig(0.0), offered=STAGES[0][1], limiting="llm"),
            stages=[stage(0, "worth it", 2.9, 2.7, ["goodput per device 2.7x the control"]),
                    stage(1, "trade-off", 2.4, 1.6, ["llm P95 1.9x the control", "errors 2% > budget 1%"]),
                    stage(2, "loss", 1.2, 0.6, ["stage rolled back"])],
            verdict=Verdict(call="worth it", text="worth it up to stage 0 (low); a trade-off above it",
                            worth_it_up_to_stage=0, conditions=conditions)),
    })


NOTHING_TO_COMPARE = Comparison(control=None, method={}, arms={})
"""A comparison section with no control and no arm: what a report says "not available" for."""


MakeCampaign = Callable[..., Path]


def make_results(results: Path, comparison: str | None = "hand", telemetry: bool = True,
                 interrupted: bool = False, pods: bool = False) -> Path:
    """Write a synthetic results folder (results.sqlite + summary.json) at ``results``.

    ``comparison``: "hand" (comparison_section()), "analysis" (as bench_plugin.analysis wrote it) or None
    (NOTHING_TO_COMPARE: no control and no arm in the section). ``pods``: with the pod events a
    Kubernetes backend records (add_pod_events); without, as the local backend runs.
    """
    results.mkdir(parents=True)
    build_store(results, telemetry=telemetry, interrupted=interrupted, pods=pods)
    summary = write_summaries(results)
    if comparison == "hand":
        summary.comparison = comparison_section()
    elif comparison is None:
        summary.comparison = NOTHING_TO_COMPARE.model_copy(deep=True)
    save_summary(summary, results / "summary.json")
    return results


@pytest.fixture
def make_campaign(tmp_path: Path) -> MakeCampaign:
    """make_results in this test's own folder: ``make_campaign(comparison=..., telemetry=..., name=...)``."""
    def make(comparison: str | None = "hand", telemetry: bool = True, interrupted: bool = False,
             name: str = "results", pods: bool = False) -> Path:
        return make_results(tmp_path / name, comparison, telemetry, interrupted, pods)
    return make


@pytest.fixture(scope="session")
def default_results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """make_results with the defaults, once per session, for tests that only read it (never change it)."""
    return make_results(tmp_path_factory.mktemp("default") / "results")


@pytest.fixture(scope="session")
def default_report(default_results: Path) -> Path:
    """report.html of default_results, rendered once per session (report.md beside it), read only."""
    return write_report(default_results)


@pytest.fixture(scope="session")
def pods_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """report.html of make_results with pod events (as the Kubernetes backend records), once per session, read only."""
    return write_report(make_results(tmp_path_factory.mktemp("pods") / "results", pods=True))
