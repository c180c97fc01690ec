"""The live verdicts so far: each trial summarised once, as it ends, and the same texts as the full summary.

The store is written with the real Recorder, trial by trial, and the view is fed by the campaign's own
hooks (BenchEvents) as the conductor fires them. An exclusive control measures llm and embedding alone in
turn (two devices), ``shared`` runs both at once within their SLOs, ``mps`` breaks the llm P95 at the high
stage; three repeats, and the last ``mps`` trial is cut short, then resumed: its unfinished segment is
superseded and runs again.
"""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from stored_scenario import resolved

from bench_plugin.live.view import LiveView
from bench_plugin.report.outputs import summarise
from bench_plugin.results.placement import ClassPlacement, Placement
from bench_plugin.results.recorder import Recorder
from bench_plugin.results.samples import Sample
from bench_plugin.results.store import CampaignReader, open_store
from bench_plugin.results.summary import Comparison
from bench_plugin.run.hooks import BenchEvents
from bench_plugin.run.schedule import Trial
from bench_plugin.scenario import Arm, load_scenario

ROOT = Path(__file__).resolve().parents[2]
ARMS = [{"name": "exclusive", "control": True, "sharing": "exclusive"},
        {"name": "shared", "control": False, "sharing": "time-slicing"},
        {"name": "mps", "control": False, "sharing": "mps"}]
SCENARIO = {
    "name": "live", "sha256": "0" * 64, "path": "live.yaml",
    "resolved": resolved(ARMS, {
        "llm": {"slo": {"p95_ms": 1000.0, "ttft_p95_ms": 300.0, "tpot_p95_ms": 100.0}, "error_budget": 0.05},
        "embedding": {"slo": {"p95_ms": 500.0, "ttft_p95_ms": None, "tpot_p95_ms": None}, "error_budget": 0.05},
    }),
}
CONDITIONS = {"backend": {"backend": "local", "devices": [{"name": "cuda:0", "model": "NVIDIA H200"}]}}
STAGES = [("low", {"llm": 2.0, "embedding": 4.0}), ("high", {"llm": 4.0, "embedding": 8.0})]
SLOWER = {"exclusive": (1.0, 1.0), "shared": (1.2, 1.6), "mps": (1.3, 3.0)}
"""Arm -> latency factor per stage against the control."""
START = 1_800_000_000.0
STAGE_S = 10.0


def samples(trial: int, segment: int, stage: int, name: str, arm: str, rng: np.random.Generator) -> list[Sample]:
    """One class's requests in one stage: latencies around llm 400 ms, embedding 100 ms, times the arm's factor."""
    rate = STAGES[stage][1][name]
    n = int(rate * STAGE_S)
    base = START + 1000 * trial + 100 * segment + 20 * stage
    out = []
    for seq in range(n):
        t0 = base + seq * STAGE_S / n
        latency = (400.0 if name == "llm" else 100.0) * SLOWER[arm][stage] * float(rng.lognormal(0.0, 0.1)) / 1000
        ok = not (arm != "exclusive" and stage == 1 and seq == 3)  # one error in a sharing arm's high stage
        out.append(Sample(name, trial, segment, stage, seq, seq % 4, t0, t0, t0 + latency, ok,
                          first_token_s=t0 + latency / 4 if name == "llm" else None,
                          output_tokens=9 if name == "llm" else None, inputs=4 if name == "embedding" else None,
                          error=None if ok else "http_500"))
    return out


def run_segment(rec: Recorder, trial: int, segment: int, classes: list[str], arm: str, rng: np.random.Generator,
                cut_at: int | None = None) -> None:
    """A segment's stages, its requests recorded; ``cut_at``: stopped in that stage (unreleased)."""
    rec.segment_applied(trial, segment, classes, Placement(
        {name: ClassPlacement(url="http://x", device="cuda:0") for name in classes}))
    for stage, (label, load) in enumerate(STAGES):
        started = START + 1000 * trial + 100 * segment + 20 * stage
        rec.stage_started(trial, segment, stage, label, {n: load[n] for n in classes}, {n: "poisson" for n in classes},
                          started, planned_s=STAGE_S)
        for name in classes:
            mine = samples(trial, segment, stage, name, arm, rng)
            rec.add_samples(mine[: len(mine) // 2] if stage == cut_at else mine)
        if stage == cut_at:
            rec.stage_ended(trial, segment, stage, started + STAGE_S / 2, "interrupted", "the run was stopped")
            return
        rec.stage_ended(trial, segment, stage, started + STAGE_S, "completed")
    rec.segment_released(trial, segment)


def run_trial(rec: Recorder, events: BenchEvents, trial: Trial, cut_at: int | None = None) -> None:
    """A trial as the conductor runs it, its hooks fired; ``cut_at``: interrupted in that stage."""
    rng = np.random.default_rng(trial.id if cut_at is None else 100 + trial.id)
    rec.trial_started(trial.id)
    events.trial_start.fire(trial=trial)
    if trial.arm.name == "exclusive":
        for segment, name in enumerate(("llm", "embedding")):
            run_segment(rec, trial.id, segment, [name], trial.arm.name, rng)
    else:
        run_segment(rec, trial.id, 0, ["llm", "embedding"], trial.arm.name, rng, cut_at)
    status = "completed" if cut_at is None else "interrupted"
    rec.trial_ended(trial.id, status)
    events.trial_stop.fire(trial=trial, status=status, reason=None)


def texts(comparison: Comparison) -> dict[str, str]:
    """Arm -> its verdict text, as the full summary gives it."""
    return {arm: fig.verdict.text if fig.verdict else "-" for arm, fig in comparison.arms.items() if not fig.is_control}


class CountingReader(CampaignReader):
    """The real reader, noting whose samples it read."""

    def __init__(self, db: sqlite3.Connection) -> None:
        super().__init__(db)
        self.read: list[int] = []

    def samples(self, trial: int) -> list[Sample]:
        """Every sample of ``trial``, noted."""
        self.read.append(trial)
        return super().samples(trial)


def so_far(view: LiveView, path: Path) -> tuple[Comparison, list[int]]:
    """The view's comparison now, through a counting reader, and the trials whose samples that read."""
    with open_store(path) as db:
        reader = CountingReader(db)
        return view.comparison_so_far(reader), reader.read


def test_each_trial_is_summarised_once_and_the_verdicts_equal_the_full_summary(tmp_path: Path) -> None:
    path = tmp_path / "results.sqlite"
    rec = Recorder(path)
    rec.set_meta("scenario", SCENARIO)
    rec.set_meta("conditions", CONDITIONS)
    trials = [Trial(id=i + 1, position=i, arm=Arm.model_validate(ARMS[i % 3]), repeat=i // 3 + 1) for i in range(9)]
    for t in trials:
        rec.add_trial(t.id, t.position, t.arm, t.repeat)
    events = BenchEvents()
    view = LiveView(load_scenario(ROOT / "scenarios" / "calibration.yaml"), ["llm", "embedding"], trials=len(trials))
    view.watch(events, path)
    calls = []
    # The last trial is cut short in its high stage (1), then resumed: its segment superseded and run again.
    runs = [(t, None, False) for t in trials[:-1]] + [(trials[-1], 1, False), (trials[-1], None, True)]
    for trial, cut_at, resumed in runs:
        if resumed:
            rec.supersede_segment(trial.id, 0, resume=1)
        kept = dict(view.summaries)
        run_trial(rec, events, trial, cut_at)
        full = summarise(tmp_path).comparison
        assert view.verdicts == texts(full)
        assert {i for i, pair in view.summaries.items() if kept.get(i) is not pair} == {trial.id}  # only the one
        again, read = so_far(view, path)
        assert read == []  # nothing changed since: nothing read
        assert again.model_dump_json() == full.model_dump_json()
        calls.append({arm: fig.verdict.call for arm, fig in full.arms.items() if fig.verdict})
    assert calls[0] == {"shared": "not compared", "mps": "not compared"}  # no trial of theirs yet
    assert calls[2] == {"shared": "inconclusive (1 repeat)", "mps": "inconclusive (1 repeat)"}
    assert calls[-1] == {"shared": "worth it", "mps": "worth it"}
    assert view.summaries[trials[-1].id][1].status == "completed"  # the resumed attempt, not the cut one

    # A view that starts late (a resumed campaign's) reads each trial once, at its first verdict.
    fresh = LiveView(view.scenario, view.classes, trials=len(trials))
    comparison, read = so_far(fresh, path)
    assert sorted(read) == [t.id for t in trials]
    assert comparison.model_dump_json() == summarise(tmp_path).comparison.model_dump_json()
    rec.close()


def test_a_failure_only_logs_and_keeps_the_verdicts(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    view = LiveView(load_scenario(ROOT / "scenarios" / "calibration.yaml"), ["llm"], trials=1)
    view.verdicts = {"shared": "kept"}
    with caplog.at_level(logging.ERROR):
        view.update_verdicts(tmp_path / "results.sqlite", 1)  # no store there
    assert view.verdicts == {"shared": "kept"}
    assert "the verdict so far could not be computed" in caplog.text
