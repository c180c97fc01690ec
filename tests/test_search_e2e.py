"""Adaptive boundary search through a real campaign, against a synthetic server of known capacity.

The server serves two requests at once, 20 ms each (100 req/s); beyond that requests queue and the
60 ms P95 SLO breaks. How close the search lands depends on this machine's load, so the test checks
what must hold whatever the noise: every stage was judged exactly as its own figures say, the
stages followed bracket-then-bisect, the search ended within its precision, below the server's
capacity, in fewer stage-runs than an even sweep.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from harness import ROOT, run_locust

from bench_plugin.results.store import open_campaign

pytestmark = pytest.mark.slow

CAPACITY_SCALE = 10.0  # 100 req/s over a mix of 10 req/s


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    results = tmp_path_factory.mktemp("search") / "results"
    done = run_locust(["-f", "locustfiles/mixed.py", "--scenario", str(ROOT / "scenarios" / "search-calibration.yaml"),
                       "--results-dir", str(results)], timeout=600)
    assert done.returncode == 0, done.stdout[-3000:]
    return results, json.loads((results / "summary.json").read_text())


def events(results: Path, kind: str, trial: int) -> list[dict[str, Any]]:
    """The details of ``trial``'s timeline events of ``kind``, in time order."""
    with open_campaign(results / "results.sqlite") as reader:
        return [event.detail for event in reader.events(kind, trial)]


def test_each_stage_is_judged_by_its_own_figures(campaign: tuple[Path, dict[str, Any]]) -> None:
    results, summary = campaign
    for trial in summary["trials"]:
        steps = events(results, "search_step", trial["id"])
        assert len(steps) == len(trial["stages"]) >= 2
        for step, stage in zip(steps, trial["stages"], strict=True):
            figures = stage["classes"]["embedding"]
            within = (figures["latency_ms"]["p95"] is not None and figures["latency_ms"]["p95"] <= 60.0
                      and figures["errors"] <= 0.01 * figures["requests"])
            assert step["passed"] == (stage["status"] == "completed" and within), (step, figures)
            assert stage["offered"] == {"embedding": pytest.approx(10.0 * step["scale"])}


def test_bracket_then_bisect_to_the_stated_precision(campaign: tuple[Path, dict[str, Any]]) -> None:
    results, summary = campaign
    for trial in summary["trials"]:
        steps = events(results, "search_step", trial["id"])
        (result,) = events(results, "search_result", trial["id"])
        assert steps[0]["scale"] == 1.0
        passes = [s["scale"] for s in steps if s["passed"]]
        fails = [s["scale"] for s in steps if not s["passed"]]
        if result["status"] == "found":
            assert result["lo"] == max(passes) and result["hi"] == min(fails) and result["lo"] < result["hi"]
            assert (result["hi"] - result["lo"]) / result["hi"] <= 0.15
            assert result["lo"] <= result["estimate"] <= result["hi"]
            assert result["hi"] <= CAPACITY_SCALE * 1.1, "past the server's capacity the queue must break the SLO"
        assert result["runs"] == len(steps) < result["fixed_sweep_runs"]


def test_the_report_gives_the_boundary_and_the_cost(campaign: tuple[Path, dict[str, Any]]) -> None:
    _, summary = campaign
    arm = summary["comparison"]["arms"]["synthetic"]
    assert arm["search"]["scale"]["n"] == 2 and len(arm["search"]["per_repeat"]) == 2
    assert all(r["runs"] < r["fixed_sweep_runs"] for r in arm["search"]["per_repeat"])
    if arm["boundary"]["status"] == "found":
        assert arm["boundary"]["text"].startswith("boundary at embedding")
