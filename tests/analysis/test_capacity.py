"""A boundary searched once per class (an exclusive arm): the lowest class's status is the mix's."""

from __future__ import annotations

import pytest

from bench_plugin.analysis.capacity import combined_status
from bench_plugin.results.summary import SearchResult


def result(name: str, status: str, estimate: float | None) -> SearchResult:
    return SearchResult(segment=0, classes=[name], mix={name: 1.0}, status=status, lo=None, hi=None, estimate=estimate,
                        precision=None, runs=3, fixed_sweep_runs=10)


@pytest.mark.parametrize(("results", "status"), [
    # llm found at 15 while the others passed up to the maximum: the mix's boundary is llm's, found
    ([result("llm", "found", 15.0), result("embedding", "above the maximum", 32.0),
      result("asr", "above the maximum", 32.0)], "found"),
    ([result("llm", "above the maximum", 32.0), result("asr", "above the maximum", 32.0)], "above the maximum"),
    ([result("llm", "found", 32.0), result("asr", "above the maximum", 32.0)], "found"),  # a tie goes to found
    ([result("llm", "found", 3.0), result("asr", "below the minimum", 0.5)], "below the minimum"),
    ([result("llm", "found", 3.0), result("asr", "bisecting", 6.0)], "bisecting"),  # not finished: no boundary yet
    ([result("llm", "found", 3.0)], "found"),
])
def test_the_lowest_class_decides(results: list[SearchResult], status: str) -> None:
    assert combined_status(results) == status
