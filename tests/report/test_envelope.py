"""The envelope in words: each ray's boundary, with the uncertainty that is there to show."""

from __future__ import annotations

import re
from pathlib import Path

from harness import search_campaign_store

from bench_plugin.analysis.statistics import spread
from bench_plugin.report.envelope import envelope_plot, rows
from bench_plugin.report.markdown import render_report, render_summary
from bench_plugin.report.outputs import summarise
from bench_plugin.report.terminal import render_answer
from bench_plugin.results.summary import CriterionFit, Envelope, EnvelopeFit, EnvelopeRay, RayRepeat, Summary
from bench_plugin.results.words import SearchStatus


def ray(status: str, brackets: list[tuple[float, float | None]]) -> EnvelopeRay:
    repeats = [RayRepeat(repeat=i + 1, status=status, scale=(lo + hi) / 2 if hi else lo, lo=lo, hi=hi, sustain=None,
                         runs=6) for i, (lo, hi) in enumerate(brackets)]
    return EnvelopeRay(name="mix", mix={"llm": 10.0}, status=status, scale=spread([r.scale for r in repeats]),
                       lo=spread([r.lo for r in repeats]), boundary={"llm": 10.0 * (repeats[0].scale or 0)},
                       per_repeat=repeats)


def scale_cell(envelope_ray: EnvelopeRay) -> str:
    return rows(Envelope(rays=[envelope_ray]))[0][3]


def test_one_repeat_shows_the_bracket_the_search_left() -> None:
    """With no spread over repeats, the uncertainty is the search's own bracket: the load held and the one broken."""
    assert scale_cell(ray(SearchStatus.FOUND, [(1.25, 1.5)])) == "1.38 (one repeat: held at 1.25, broke at 1.5)"
    # repeats: their 95% CI instead
    assert scale_cell(ray(SearchStatus.FOUND, [(1.25, 1.5), (1.5, 1.75)])) == "1.5 ± 1.6"
    # no boundary found: no bracket to give
    assert scale_cell(ray(SearchStatus.GENERATOR_LIMITED, [(2.0, None)])) == "2 (one repeat) (generator-limited)"


def test_a_ray_whose_repeats_ended_differently_lists_each_status_and_an_older_file_reads_the_same() -> None:
    """A ray's statuses are a list (summary/4); summary/3 and before joined them into one string, which reads into
    the same list, so the cell is the same."""
    mixed = ray(SearchStatus.FOUND, [(1.25, 1.5), (1.5, None)])
    mixed.per_repeat[1].status = SearchStatus.GENERATOR_LIMITED
    mixed.status = [SearchStatus.FOUND, SearchStatus.GENERATOR_LIMITED]
    assert mixed.agreed is None
    assert scale_cell(mixed).endswith(" (found, generator-limited)")
    written = mixed.model_dump(mode="json")
    assert written["status"] == ["found", "generator-limited"]
    older = EnvelopeRay.model_validate({**written, "status": "found, generator-limited"})
    assert older == mixed and scale_cell(older) == scale_cell(mixed)
    assert ray(SearchStatus.FOUND, [(1.25, 1.5)]).agreed == SearchStatus.FOUND


def with_envelope(tmp_path: Path) -> tuple[Summary, str]:
    """A searched campaign's summary whose shared arm has an envelope of two rays and a model with an
    embedding criterion only (its llm rays did not end); and that arm's name."""
    summary = summarise(search_campaign_store(tmp_path))
    mix, alone = {"llm": 2.0, "embedding": 10.0}, {"embedding": 10.0}

    def found(name: str, mix: dict[str, float], scale: float) -> EnvelopeRay:
        return EnvelopeRay(name=name, mix=mix, status=SearchStatus.FOUND, scale=spread([scale, scale * 1.1]),
                           lo=spread([scale * 0.9, scale]), boundary={c: r * scale for c, r in mix.items()},
                           per_repeat=[])

    embedding_only = CriterionFit(workload="embedding", slo_ms=100.0, a=10.0, b=5.0,
                                  weights={"embedding": 0.01, "llm": 0.00001}, limit=0.9, measured=0.8, points=12,
                                  fit_error=0.1)
    model = EnvelopeFit(form="queue", fitted_on=["mix", "embedding"], devices=[["llm", "embedding", "asr"]],
                        criteria={"embedding p95": embedding_only}, points=12, fit_error=0.1, rays={},
                        validated="the loads measured")
    arm = next(a for a in summary.arms if a != summary.control)
    assert summary.comparison is not None
    arms = dict(summary.comparison.arms)
    arms[arm] = arms[arm].model_copy(update={"envelope": Envelope(
        rays=[found("mix", mix, 3.0), found("embedding", alone, 4.0)], model=model)})
    return summary.model_copy(update={"comparison": summary.comparison.model_copy(update={"arms": arms})}), arm


def test_a_face_with_a_class_the_model_does_not_know_draws_no_frontier_and_keeps_to_the_measured_loads(
        tmp_path: Path) -> None:
    """The control's llm rays were generator-limited: its model has no llm criterion, and a frontier drawn from
    the others' alone ran its llm axis to thousands of req/s, every measured point squeezed against zero."""
    drawn, arm = with_envelope(tmp_path)
    plot = envelope_plot(drawn, {})
    assert plot is not None
    assert f"{arm}: llm (face llm and embedding)" in plot.caption
    # the llm axis of that face reaches a little past the 6.6 req/s measured, not the thousands the model's
    # embedding criterion alone would allow
    ticks = [float(t) for t in re.findall(r"<text[^>]*>\s*(\d+(?:\.\d+)?)\s*</text>", plot.svg)]
    assert ticks and max(ticks) < 100, sorted(ticks)[-5:]


def test_an_envelope_campaign_is_read_envelope_first(tmp_path: Path) -> None:
    """summary.md, report.md and the terminal lead with the envelope; the per-load tables stay, after."""
    summary, arm = with_envelope(tmp_path)
    text = render_summary(summary)
    assert text.index("\n## Operating envelope\n") < text.index(f"\n### {arm}\n") < text.index("\n## Trials\n") \
        < text.index("\n## Offered ")
    report = render_report(summary)
    assert report.index("\n## Verdict\n") < report.index("\n## Operating envelope\n") \
        < report.index("\n## Per-stage figures\n") < report.index("\n### Offered ")
    answer = [line.strip() for line in render_answer(summary).splitlines()]
    assert answer.index(f"{arm} envelope:") < min(i for i, line in enumerate(answer) if line.startswith(f"{arm}:"))
