"""The envelope in words: each ray's boundary, with the uncertainty that is there to show."""

from __future__ import annotations

from bench_plugin.analysis.search import FOUND, GENERATOR_LIMITED
from bench_plugin.analysis.statistics import spread
from bench_plugin.report.envelope import rows
from bench_plugin.results.summary import Envelope, EnvelopeRay, RayRepeat


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
    assert scale_cell(ray(FOUND, [(1.25, 1.5)])) == "1.38 (one repeat: held at 1.25, broke at 1.5)"
    assert scale_cell(ray(FOUND, [(1.25, 1.5), (1.5, 1.75)])) == "1.5 ± 1.6"  # repeats: their 95% CI instead
    # no boundary found: no bracket to give
    assert scale_cell(ray(GENERATOR_LIMITED, [(2.0, None)])) == "2 (one repeat) (generator-limited)"
