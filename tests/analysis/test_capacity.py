"""A boundary searched once per class (an exclusive arm): the lowest class's status is the mix's."""

from __future__ import annotations

from typing import Any

import pytest

from bench_plugin.analysis.capacity import combined_status


def result(name: str, status: str, estimate: float | None) -> dict[str, Any]:
    return {"classes": [name], "status": status, "estimate": estimate, "mix": {name: 1.0}}


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
def test_the_lowest_class_decides(results: list[dict[str, Any]], status: str) -> None:
    assert combined_status(results) == status
