"""The files derived from a store are all of this write, or none: a failed write leaves nothing stale beside it."""

from __future__ import annotations

from pathlib import Path

import pytest
from harness import search_campaign_store

from bench_plugin.report.outputs import DERIVED, write_outputs

pytestmark = pytest.mark.cpu_bound


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return search_campaign_store(tmp_path)


def test_a_failed_write_leaves_no_derived_file_of_before_or_of_now(store: Path) -> None:
    for name in DERIVED:  # what an earlier slice of a resumed campaign wrote
        (store / name).write_text("an earlier slice's\n")
    (store / "report.md").unlink()
    (store / "report.md").mkdir()  # where report.md goes, a directory: the report cannot be written
    with pytest.raises(IsADirectoryError):
        write_outputs(store)
    assert [name for name in DERIVED if (store / name).is_file()] == []
    assert (store / "results.sqlite").is_file()


def test_a_write_without_the_report_removes_an_earlier_report(store: Path) -> None:
    (store / "report.html").write_text("an earlier slice's\n")
    (store / "report.md").write_text("an earlier slice's\n")
    write_outputs(store, report=False)
    assert [name for name in DERIVED if (store / name).is_file()] == ["summary.json", "summary.md"]


def test_a_whole_write_writes_every_derived_file(store: Path) -> None:
    write_outputs(store)
    assert all((store / name).stat().st_size > 0 for name in DERIVED)


def test_a_plan_beside_the_store_is_planned_again_on_the_store_as_it_is(store: Path) -> None:
    """A resumed campaign's plan.json was planned on the summary of its last slice: rewritten with the outputs,
    it is the plan of the same traffics, headroom and cost on the summary written beside it."""
    from bench_plugin.analysis.packing import capacity_plans
    from bench_plugin.report.outputs import summarise
    from bench_plugin.results.plan import FILENAME, PlanDocument, TrafficPlan, read_plan, write_plan

    traffic = {"llm": 5.0, "embedding": 30.0, "asr": 2.0}
    stale = PlanDocument(campaign="an earlier slice", headroom=0.25, gpu_cost=2.5, method="an earlier method",
                         plans=[TrafficPlan(traffic=traffic, arms=[], best="an arm the store no longer says")])
    write_plan(store / FILENAME, stale)
    write_outputs(store)
    written = read_plan(store / FILENAME)
    assert written == capacity_plans(summarise(store), "an earlier slice", [traffic], 0.25, 2.5)
    assert written.plans[0].arms and written.method != "an earlier method"
    assert "## Capacity plan" in (store / "summary.md").read_text()
