"""Each moment of a trial is said once: its row, then its timeline entry, then its hook, in the documented order.

A trial is driven through run/moments.py as the conductor drives it, against a real results store and
the plugin's own hooks. Each hook's listener reads the store at the moment the hook fires: the row and
the timeline entry must already be there (a listener that reads the store finds what it was told of).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from bench_plugin.results.placement import ClassPlacement, Placement
from bench_plugin.results.recorder import Recorder
from bench_plugin.results.store import ClassWarmup, open_campaign
from bench_plugin.results.timeline import KINDS, Entry, StageStart, TimelineError, parse
from bench_plugin.run.hooks import BenchEvents
from bench_plugin.run.moments import Moments
from bench_plugin.run.schedule import Trial
from bench_plugin.scenario.models import Arm

HOOKS = ("trial_start", "arm_applied", "stage_start", "stage_end", "trial_stop")


def kinds_in(store: Path) -> list[str]:
    with open_campaign(store) as reader:
        return [e.kind for e in reader.events()]


def trial_row(store: Path) -> Any:
    with open_campaign(store) as reader:
        return reader.trials()[0]


def test_a_trials_moments_come_as_row_then_entry_then_hook(tmp_path: Path) -> None:
    store = tmp_path / "results.sqlite"
    recorder = Recorder(store)
    events = BenchEvents()
    said: list[str] = []
    seen: dict[str, Any] = {}

    def listener(hook: str) -> Any:
        def heard(**kwargs: Any) -> None:
            said.append(f"hook:{hook}")
            recorder.commit()
            seen[hook] = (trial_row(store), kinds_in(store), kwargs)
        return heard

    for hook in HOOKS:
        getattr(events, hook).add_listener(listener(hook))
    moments = Moments(recorder, events)
    trial = Trial(id=1, position=0, arm=Arm(name="mps"), repeat=1)
    recorder.add_trial(1, 0, Arm(name="mps"), 1)
    placement = Placement({"llm": ClassPlacement(url="http://127.0.0.1:1", device="cpu", pid=42)})

    moments.trial_started(trial)
    row, kinds, _ = seen["trial_start"]
    assert row.started_s is not None and kinds == ["trial_start"]

    moments.segment_applied(trial, 0, ["llm"], placement)
    assert "hook:arm_applied" not in said  # the hook waits for readiness
    moments.segment_ready(trial, 0, placement, {"llm": 1234.5}, {"llm": {"output_lengths": "fixed", "note": None}})
    row, kinds, kwargs = seen["arm_applied"]
    assert row.segments[0].applied_s is not None and row.segments[0].ready == {"llm": 1234.5}
    assert row.segments[0].protocol == {"llm": {"output_lengths": "fixed", "note": None}}
    assert kinds == ["trial_start", "arm_applied", "ready"]
    assert kwargs["ready"] == {"llm": 1234.5} and kwargs["placement"]["llm"]["pid"] == 42

    moments.segment_warming(trial, 0, "shapes")
    moments.segment_warmed(trial, 0, {"llm": ClassWarmup(10.0, 11.0, 4, 0)})
    moments.stage_started(trial, 0, 0, "low", {"llm": 2.0}, {"llm": "poisson"}, 100.0, 110.0, 10.0, {"llm": 20})
    row, kinds, kwargs = seen["stage_start"]
    assert row.segments[0].warmup["llm"].requests == 4
    assert [(s.index, s.status, s.planned_s) for s in row.stages] == [(0, "running", 10.0)]
    assert kinds[-3:] == ["warmup_start", "warmup_end", "stage_start"]
    assert kwargs == {"trial": trial, "segment": 0, "stage": 0, "offered": {"llm": 2.0}, "name": "low",
                      "start_s": 100.0, "end_s": 110.0}

    moments.stage_ended(trial, 0, 0, 110.0, "aborted", "llm P95 over its limit")
    row, kinds, kwargs = seen["stage_end"]
    assert [(s.status, s.reason) for s in row.stages] == [("aborted", "llm P95 over its limit")]
    assert kinds[-1] == "stage_end" and kwargs["status"] == "aborted"

    moments.segment_released(trial, 0)
    moments.trial_ended(trial, "completed", None)
    row, kinds, kwargs = seen["trial_stop"]
    assert row.status == "completed" and row.segments[0].released_s is not None
    assert kinds[-2:] == ["released", "trial_stop"]
    assert said == [f"hook:{h}" for h in HOOKS]
    recorder.close()

    with open_campaign(store) as reader:  # every entry reads back as its declared kind
        entries = [parse(e.kind, e.detail) for e in reader.events()]
    assert [e.kind for e in entries] == ["trial_start", "arm_applied", "ready", "warmup_start", "warmup_end",
                                         "stage_start", "stage_end", "released", "trial_stop"]
    assert entries[5] == StageStart(segment=0, stage=0, offered={"llm": 2.0})


def test_a_failed_row_write_says_nothing_on_the_timeline_or_the_hook(tmp_path: Path) -> None:
    store = tmp_path / "results.sqlite"
    recorder = Recorder(store)
    events = BenchEvents()
    heard: list[str] = []
    events.stage_end.add_listener(lambda **_: heard.append("stage_end"))
    trial = Trial(id=1, position=0, arm=Arm(name="mps"), repeat=1)
    recorder.add_trial(1, 0, Arm(name="mps"), 1)
    moments = Moments(recorder, events)
    moments.stage_started(trial, 0, 0, None, {"llm": 1.0}, {"llm": "poisson"}, 100.0, 101.0, 1.0, {"llm": 1})

    def refused(*_: Any, **__: Any) -> None:
        raise RuntimeError("disk full")

    recorder.stage_ended = refused  # type: ignore[method-assign]
    with pytest.raises(RuntimeError, match="disk full"):
        moments.stage_ended(trial, 0, 0, 101.0, "completed", None)
    recorder.close()
    assert heard == [] and kinds_in(store) == ["stage_start"]


def test_every_kind_is_declared_once_and_refuses_what_it_does_not_declare() -> None:
    assert len(KINDS) == 25 and all(issubclass(model, Entry) for model in KINDS.values())
    with pytest.raises(ValidationError):
        StageStart(segment=0, stage=0, offered={"llm": 1.0}, offerd=2)  # type: ignore[call-arg]
    with pytest.raises(TimelineError, match=r"timeline: stage_start\.stage: Field required"):
        parse("stage_start", {"segment": 0, "offered": {}})
    with pytest.raises(TimelineError, match=r"unknown kind 'stage_begin'"):
        parse("stage_begin", {})
