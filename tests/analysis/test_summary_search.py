"""The arm figures of a searched campaign: lined up by load, normalised to the control's same class and rate."""

from __future__ import annotations

import pytest
from harness import search_campaign_store

from bench_plugin.outputs import summarise
from bench_plugin.results.summary import Summary


@pytest.fixture(scope="module")
def searched(tmp_path_factory: pytest.TempPathFactory) -> Summary:
    return summarise(search_campaign_store(tmp_path_factory.mktemp("search")))


def test_searched_shared_figures_are_normalised_to_the_controls_class_alone_at_the_same_rate(
        searched: Summary) -> None:
    control = [t for t in searched.trials if t.arm == searched.control]
    checked = 0
    for trial in searched.trials:
        if trial.arm == searched.control:
            continue
        figures = searched.arms[trial.arm]
        for stage in trial.stages:
            if stage.status == "invalid":
                continue
            [fig] = [f for f in figures.stages if dict(f.offered) == dict(stage.offered)]
            for name, stats in stage.classes.items():
                alone = [s.classes[name] for t in control if t.repeat == trial.repeat for s in t.stages
                         if dict(s.offered) == {name: stage.offered[name]} and s.status != "invalid"]
                ratio = fig.classes[name].normalised_throughput
                if not alone:
                    assert ratio is None or not ratio.values, (trial.arm, stage.offered, name)
                    continue
                assert ratio is not None  # one value per repeat: this one's is its ratio to the control's
                assert pytest.approx(stats.throughput_rps / alone[0].throughput_rps) in ratio.values
                checked += 1
    assert checked >= 20  # time-slicing, mps and the trial cut short before its search ended (aligned by load too)


def test_the_exclusive_controls_boundary_is_its_lowest_class_found_not_above_the_maximum(searched: Summary) -> None:
    control = searched.comparison.arms[searched.control]
    [trial] = [t for t in searched.trials if t.arm == searched.control][:1]
    lowest = min(trial.search, key=lambda r: r["estimate"])
    assert lowest["status"] == "found" and any(r["status"] == "above the maximum" for r in trial.search)
    assert control.boundary.status == "found"
    assert control.boundary.limiting == ", ".join(lowest["classes"])
    assert f"limited by {control.boundary.limiting}, each class searched alone" in control.boundary.text
    # the mix at the boundary lists the classes in their usual order
    assert list(control.boundary.offered) == ["llm", "embedding", "asr"]
