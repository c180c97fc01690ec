"""Per-stage tables put side by side only what ran the same load: by stage in a sweep, by load in a search."""

from __future__ import annotations

import pytest
from harness import ROOT, search_campaign_store

from bench_plugin.report.markdown import render_report, render_summary
from bench_plugin.report.outputs import summarise
from bench_plugin.report.stage_groups import stage_groups
from bench_plugin.results.summary import Summary, load_summary


@pytest.fixture(scope="module")
def searched(tmp_path_factory: pytest.TempPathFactory) -> Summary:
    return summarise(search_campaign_store(tmp_path_factory.mktemp("search")))


def test_a_searched_campaign_has_a_table_per_load_holding_only_runs_of_that_load(searched: Summary) -> None:
    groups = stage_groups(searched)
    seen: list[tuple[str, int]] = []
    for group in groups:
        assert group.index is None and group.heading("x").startswith("Offered x")
        for member in group.members:
            offered = dict(searched.arms[member.arm].stages[member.index].offered)
            if member.classes is None:
                assert offered == group.offered, (group, member)
            else:  # the exclusive control's class run alone at the load's rate
                assert member.arm == searched.control and group.alone == searched.control
                assert offered == {name: group.offered[name] for name in member.classes}, (group, member)
            seen.append((member.arm, member.index))
    # every figure of every arm is in a table; a shared arm's figures in exactly one
    every = [(arm, stage.index) for arm, figures in searched.arms.items() for stage in figures.stages]
    assert set(seen) == set(every)
    shared = [key for key in seen if key[0] != searched.control]
    assert len(shared) == len(set(shared))
    # the arms side by side first, from the lowest load up; then the control's runs no other arm matched
    mixed = [g for g in groups if any(m.arm != searched.control for m in g.members)]
    assert groups[:len(mixed)] == mixed and [sum(g.offered.values()) for g in mixed] == sorted(
        sum(g.offered.values()) for g in mixed)
    assert all(len(g.offered) == 1 for g in groups[len(mixed):])


def test_summary_and_report_of_a_search_name_loads_not_stage_indexes(searched: Summary) -> None:
    for text, level in ((render_summary(searched), "## "), (render_report(searched), "### ")):
        assert f"\n{level}Stage " not in text
        heading = (f"\n{level}Offered llm 2 req/s, embedding 10 req/s, asr 2 req/s "
                   f"({searched.control}'s rows: each class run alone at its rate)\n")
        assert heading in text
        table = text.split(heading)[1].split(f"\n{level}")[0]
        rows = [line.split(" | ")[:2] for line in table.splitlines() if line.startswith(f"| {searched.control} ")
                or line.startswith("| time-slicing ")]
        assert [r[1] for r in rows if r[0] == f"| {searched.control}"] == ["llm", "embedding", "asr"]
        assert [r[1] for r in rows if r[0] == "| time-slicing"] == ["llm", "embedding", "asr"]


def test_a_fixed_sweep_keeps_a_table_per_stage() -> None:
    summary = load_summary(ROOT / "docs" / "results" / "h200-day19" / "summary.json")
    groups = stage_groups(summary)
    first = next(iter(summary.arms.values()))
    assert [g.index for g in groups] == [s.index for s in first.stages]
    for group in groups:
        assert group.heading("x") == f"Stage {group.index}: offered x"
        members = [(m.arm, m.index, m.classes) for m in group.members]
        assert members == [(arm, group.index, None) for arm in summary.arms]


def test_a_searched_boundary_cell_gives_the_load_and_scale(searched: Summary) -> None:
    from bench_plugin.report.comparison import boundary_short

    for arm, comp in searched.comparison.arms.items():
        cell = boundary_short(comp.boundary)
        if comp.boundary.status == "found":
            about = ", ".join(f"{name} {load:.3g}" for name, load in comp.boundary.offered.items())
            assert cell.startswith(f"found at about {about} (scale "), (arm, cell)
        else:
            assert comp.boundary.status == "not measured" and cell == "not measured", (arm, cell)


def test_a_load_whose_only_run_was_cut_short_is_named_by_its_load_and_has_no_table(searched: Summary) -> None:
    """A search cut mid-stage: the load that stage ran has no measured run; the summary names its load (not
    an empty one), and the tables, the summary and the report leave it out instead of failing on it."""
    from bench_plugin.analysis.summary import _arm_figures, load_key

    arm = next(a for a in searched.arms if a != searched.control)
    runs: dict[tuple[tuple[str, float], ...], list[tuple[int, int]]] = {}
    for t, trial in enumerate(searched.trials):
        if trial.arm == arm:
            for s, stage in enumerate(trial.stages):
                runs.setdefault(load_key(stage.offered), []).append((t, s))
    load = max(runs, key=lambda key: sum(v for _, v in key))  # the highest: where a cut search stops
    trials = list(searched.trials)
    for t, s in runs[load]:  # each repeat's run of it cut short
        cut = trials[t].stages[s].model_copy(update={"status": "interrupted"})
        trials[t] = trials[t].model_copy(update={"stages": [*trials[t].stages[:s], cut, *trials[t].stages[s + 1:]]})
    figures = _arm_figures(trials, arm, searched.control)
    empty = [stage for stage in figures.stages if not stage.classes]
    assert [load_key(stage.offered) for stage in empty] == [load]
    summary = searched.model_copy(update={"trials": trials, "arms": {**searched.arms, arm: figures}})
    groups = stage_groups(summary)
    shown = {(m.arm, m.index) for g in groups for m in g.members}
    assert (arm, empty[0].index) not in shown
    assert all(g.offered for g in groups)
    render_summary(summary), render_report(summary)
