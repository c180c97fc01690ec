"""Scenario warnings: open-loop stages and a search's first stage too short for a P95 to be bounded."""

from __future__ import annotations

from typing import Any

from bench_plugin.analysis.planning import sample_warnings
from bench_plugin.scenario import Scenario

CLASSES = {"llm": {"model": "m", "slo": {"p95_ms": 100}}, "asr": {"model": "w", "slo": {"p95_ms": 100}}}
ARMS = [{"name": "a", "control": True}]


def scenario(**parts: Any) -> Scenario:
    return Scenario.model_validate({"name": "t", "classes": CLASSES, "arms": ARMS, **parts})


def test_a_short_stage_names_its_index_class_samples_and_the_duration_that_is_enough() -> None:
    got = sample_warnings(scenario(stages=[{"duration_s": 10, "load": {"llm": 1.5, "asr": 8}}]))
    assert got == ["stage 0 llm: 1.5 req/s x 10 s gives 15 samples; a P95 needs 72 to be bounded "
                   "(95% order-statistic interval): run it >= 48 s"]  # asr: 80 samples, enough


def test_idle_classes_and_closed_loop_classes_are_not_checked() -> None:
    closed = {**CLASSES, "asr": {**CLASSES["asr"], "arrival": "closed"}}
    stages = [{"duration_s": 5, "load": {"llm": 0, "asr": 4}}]
    assert sample_warnings(Scenario.model_validate({"name": "t", "classes": closed, "arms": ARMS,
                                                    "stages": stages})) == []


def test_a_search_is_checked_at_its_start_scale() -> None:
    search = {"mix": {"llm": 2, "asr": 40}, "start_scale": 0.5, "stage_duration_s": 20}
    assert sample_warnings(scenario(search=search)) == [
        "search start (scale 0.5) llm: 1 req/s x 20 s gives 20 samples; a P95 needs 72 to be bounded "
        "(95% order-statistic interval): run it >= 72 s"
    ]


def test_exactly_enough_samples_is_no_warning() -> None:
    assert sample_warnings(scenario(stages=[{"duration_s": 48, "load": {"llm": 1.5, "asr": 1.5}}])) == []


def test_a_search_sized_by_requests_is_checked_for_as_long_as_its_first_probe_runs() -> None:
    """With ``stage_requests`` the first probe runs until its least loaded class is offered that many requests,
    within ``stage_duration_s`` and the hold's length: long enough here, and capped by the hold there."""
    sized = {"mix": {"llm": 2, "asr": 40}, "stage_duration_s": 6, "stage_requests": 72, "sustain_s": 40}
    assert sample_warnings(scenario(search=sized)) == []  # llm: 72 requests over 36 s
    capped = {**sized, "sustain_s": 24}
    assert sample_warnings(scenario(search=capped)) == [
        "search start (scale 1) llm: 2 req/s x 24 s gives 48 samples; a P95 needs 72 to be bounded "
        "(95% order-statistic interval): run it >= 36 s"
    ]
