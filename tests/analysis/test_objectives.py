"""Objectives: which requests count as goodput, and how a class in a stage is judged against its limits."""

from __future__ import annotations

import math

import pytest
from analysis_builders import objectives, stats
from stored_scenario import resolved

from bench_plugin.analysis.objectives import (
    ClassObjectives,
    Criterion,
    class_criteria,
    figure_criteria,
    objectives_from_scenario,
    sample_meets_slo,
)
from bench_plugin.analysis.summary import class_stats
from bench_plugin.results.record import StoredScenario
from bench_plugin.results.samples import Sample
from bench_plugin.scenario import Slo

LLM = ClassObjectives(Slo(p95_ms=1000, ttft_p95_ms=200, tpot_p95_ms=50), 0.1)


def llm(latency_ms: float, ttft_ms: float | None = 100.0, tokens: int = 9, ok: bool = True) -> Sample:
    """An llm request sent at t=0: first token at ttft_ms, end at latency_ms."""
    first = None if ttft_ms is None else ttft_ms / 1000
    return Sample("llm", 1, 0, 0, 0, 0, 0.0, 0.0, latency_ms / 1000, ok, first_token_s=first, output_tokens=tokens,
                  error=None if ok else "http_500")


def test_a_request_meets_the_slo_only_within_every_limit() -> None:
    assert sample_meets_slo(llm(500), LLM)  # TPOT (500 - 100) / 8 = 50 ms: exactly at the limit
    assert not sample_meets_slo(llm(1001), LLM)  # end-to-end over 1000 ms
    assert not sample_meets_slo(llm(500, ttft_ms=201), LLM)  # TTFT over 200 ms
    assert not sample_meets_slo(llm(510), LLM)  # TPOT 51.25 ms
    assert not sample_meets_slo(llm(500, ok=False), LLM)  # failed
    assert not sample_meets_slo(llm(500, ttft_ms=None), LLM)  # TTFT cannot be shown
    assert sample_meets_slo(llm(150, tokens=1), LLM)  # one token: no TPOT to judge


def test_ttft_and_tpot_limits_apply_to_llm_only() -> None:
    embedding = Sample("embedding", 1, 0, 0, 0, 0, 0.0, 0.0, 0.3, True)
    assert sample_meets_slo(embedding, ClassObjectives(Slo(p95_ms=400, ttft_p95_ms=1), 0.0))


def test_class_stats_counts_slo_attainment_and_goodput() -> None:
    samples = [llm(500)] * 6 + [llm(1500), llm(500, ttft_ms=300), llm(500, ok=False), llm(450)]
    s = class_stats(samples, "llm", 5.0, LLM)
    assert (s.requests, s.errors, s.slo_met) == (10, 1, 7)
    assert s.slo_attainment == pytest.approx(0.7)
    assert s.goodput_rps == pytest.approx(7 / 5)
    assert s.throughput_rps == pytest.approx(9 / 5)
    assert class_stats(samples, "llm", 5.0).goodput_rps is None  # no SLO known: no goodput


def test_a_p95_of_too_few_requests_is_flagged_and_none_is_not() -> None:
    """Under 72 successes a P95 has no 95% interval: the note says so, and the stage length that would give one;
    a class idle in the stage (a searched one-class stage of a shared arm), or whose requests all failed, has no
    P95 to flag."""
    few = class_stats([llm(500)] * 10, "llm", 5.0, LLM)
    assert few.p95_note is not None and few.p95_note.startswith("P95 of 10 requests is not bounded")
    assert "at 2 req/s a stage of >= 36 s would" in few.p95_note
    assert class_stats([llm(500)] * 72, "llm", 5.0, LLM).p95_note is None
    assert class_stats([], "llm", 5.0, LLM).p95_note is None
    assert class_stats([llm(500, ok=False)] * 10, "llm", 5.0, LLM).p95_note is None


def test_criteria_are_ratios_to_their_limits() -> None:
    obj = objectives(p95=500, budget=0.05, ttft=200, tpot=50)["llm"]
    criteria = {c.name: c for c in class_criteria("llm", stats(9.0, 600.0, errors=1, ttft=100, tpot=60), obj)}
    assert criteria["p95"].ratio == pytest.approx(1.2) and not criteria["p95"].passed
    assert criteria["ttft p95"].ratio == pytest.approx(0.5) and criteria["ttft p95"].passed
    assert criteria["tpot p95"].ratio == pytest.approx(1.2)
    assert criteria["error rate"].ratio == pytest.approx((1 / 91) / 0.05)
    assert criteria["p95"].describe() == "llm p95 1.20x its SLO (600 ms vs 500 ms)"
    assert criteria["p95"].label == "llm p95"


def test_nothing_succeeding_fails_the_latency_slo_and_a_zero_budget_any_error() -> None:
    obj = ClassObjectives(Slo(p95_ms=100), 0.0)
    (p95, errors) = class_criteria("asr", stats(0.0, None, requests=4, errors=4), obj)
    assert math.isinf(p95.ratio) and math.isinf(errors.ratio)
    assert class_criteria("asr", stats(0.0, None, requests=0), obj) == []  # nothing offered: nothing to judge


def test_objectives_come_from_the_stored_scenario() -> None:
    meta = {"resolved": resolved([{"name": "a", "control": True}], {
        "asr": {"slo": {"p95_ms": 3000}},
        "llm": {"slo": {"p95_ms": 2000, "ttft_p95_ms": 1000, "tpot_p95_ms": None}, "error_budget": 0.02}})}
    got = objectives_from_scenario(StoredScenario.model_validate(meta))
    assert list(got) == ["llm", "asr"]  # in the classes' usual order, each with its own limits
    assert got["llm"].slo.ttft_p95_ms == 1000 and got["llm"].error_budget == 0.02
    assert got["asr"].slo.p95_ms == 3000 and got["asr"].error_budget == 0.01  # the scenario's default budget


def names(criteria: list[Criterion]) -> list[tuple[str, float | None, bool]]:
    """Each criterion's name, measured value and call."""
    return [(c.name, c.measured, c.passed) for c in criteria]


def test_figure_criteria_judge_the_measured_figures_alone() -> None:
    """The one judge, on figures alone: llm-only TTFT/TPOT, no TPOT criterion for one-token answers, and an
    unmeasured latency wherever nothing succeeded."""
    got = figure_criteria("llm", LLM, requests=10, error_rate=0.2, p95_ms=900.0, ttft_p95_ms=250.0)
    assert names(got) == [("p95", 900.0, True), ("ttft p95", 250.0, False), ("error rate", 0.2, False)]
    got = figure_criteria("llm", LLM, requests=3, error_rate=1.0, p95_ms=5.0, ttft_p95_ms=1.0)
    assert names(got) == [("p95", None, False), ("ttft p95", 1.0, True), ("tpot p95", None, False),
                          ("error rate", 1.0, False)]
    assert names(figure_criteria("asr", LLM, requests=2, error_rate=0.0, p95_ms=10.0, ttft_p95_ms=999.0,
                                 tpot_p95_ms=999.0)) == [("p95", 10.0, True), ("error rate", 0.0, True)]
    assert figure_criteria("llm", LLM, requests=0, error_rate=0.0, p95_ms=None) == []


def test_class_criteria_are_figure_criteria_of_the_class_stats() -> None:
    for s in (stats(9.0, 600.0, errors=1, ttft=100, tpot=60), stats(5.0, 400.0, ttft=300),
              stats(0.0, None, requests=4, errors=4)):
        assert class_criteria("llm", s, LLM) == figure_criteria(
            "llm", LLM, requests=s.requests, error_rate=s.errors / s.requests, p95_ms=s.latency_ms["p95"],
            ttft_p95_ms=s.ttft_ms["p95"] if s.ttft_ms else None, tpot_p95_ms=s.tpot_ms["p95"] if s.tpot_ms else None)
