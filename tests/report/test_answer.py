"""The answer in words: each arm's sentence says how far it holds and what gives out first."""

from __future__ import annotations

from pathlib import Path

from bench_plugin.report.answer import sentence
from bench_plugin.results.limits import Limit
from bench_plugin.results.summary import Answer, load_summary
from bench_plugin.results.words import BoundaryStatus, Call


def test_the_control_names_what_gives_out_first_in_the_right_number(default_results: Path) -> None:
    summary = load_summary(default_results / "summary.json")
    assert summary.comparison is not None
    control = summary.comparison.control
    name, comp = control, summary.comparison.arms[control]
    answer = Answer(call=Call.CONTROL, at=None, per_device=None, next_step="none")
    comp.boundary.status, comp.boundary.offered = BoundaryStatus.REACHED, {"llm": 10.0, "embedding": 50.0, "asr": 10.0}
    comp.boundary.limiting = [Limit(workload="llm", figure="p95")]
    assert sentence(name, comp, answer, control).startswith(
        f"{control} is the control: every SLO holds up to about llm 10 req/s, embedding 50 req/s, asr 10 req/s, "
        "where llm p95 gives out first.")
    comp.boundary.limiting = [Limit(workload=c) for c in ("llm", "embedding", "asr")]  # each class on its own GPUs
    assert ", where llm, embedding, asr give out first." in sentence(name, comp, answer, control)
    comp.boundary.limiting = [Limit(workload="llm", figure="p95"), Limit(workload="asr", figure="p95")]
    assert ", where llm p95, asr p95 give out first." in sentence(name, comp, answer, control)
