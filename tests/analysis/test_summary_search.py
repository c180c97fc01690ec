"""The arm figures of a searched campaign: lined up by load, normalised to the control's same class and rate."""

from __future__ import annotations

import pytest
from harness import search_campaign_store

from bench_plugin.analysis.summary import measured
from bench_plugin.report.outputs import summarise
from bench_plugin.results.limits import Limit
from bench_plugin.results.summary import Summary


@pytest.fixture(scope="module")
def searched(tmp_path_factory: pytest.TempPathFactory) -> Summary:
    return summarise(search_campaign_store(tmp_path_factory.mktemp("search")))


def test_searched_shared_figures_are_normalised_to_the_controls_class_alone_at_the_same_rate(
        searched: Summary) -> None:
    """Each repeat of a shared arm at a load gives one value: its throughput over the control's class alone at
    that rate in the same repeat, where the control's search ran that rate (else that repeat gives none)."""
    control = [t for t in searched.trials if t.arm == searched.control]
    expected: dict[tuple[str, tuple[tuple[str, float], ...], str], list[float]] = {}
    for trial in searched.trials:
        if trial.arm == searched.control:
            continue
        for stage in trial.stages:
            if not measured(stage):  # cut short, invalid: not in the arm's figures
                continue
            for name, stats in stage.classes.items():
                alone = [s.classes[name] for t in control if t.repeat == trial.repeat for s in t.stages
                         if dict(s.offered) == {name: stage.offered[name]} and measured(s)]
                values = expected.setdefault((trial.arm, tuple(sorted(stage.offered.items())), name), [])
                if alone:
                    values.append(stats.throughput_rps / alone[0].throughput_rps)
    for (arm, offered, name), values in expected.items():
        [fig] = [f for f in searched.arms[arm].stages if dict(f.offered) == dict(offered)]
        ratio = fig.classes[name].normalised_throughput
        got = sorted(ratio.values) if ratio is not None else []
        assert got == pytest.approx(sorted(values)), (arm, offered, name)
    assert sum(map(len, expected.values())) >= 20  # time-slicing, mps, ... each aligned by load, repeat by repeat


def test_the_exclusive_controls_boundary_is_its_lowest_class_found_not_above_the_maximum(searched: Summary) -> None:
    control = searched.comparison.arms[searched.control]
    [trial] = [t for t in searched.trials if t.arm == searched.control][:1]
    lowest = min(trial.search, key=lambda r: r.estimate if r.estimate is not None else float("inf"))
    assert lowest.status == "found" and any(r.status == "above the maximum" for r in trial.search)
    assert control.boundary.status == "found"
    assert control.boundary.limiting == [Limit(workload=c) for c in lowest.classes]
    assert f"limited by {', '.join(lowest.classes)}, each class searched alone" in control.boundary.text
    # the mix at the boundary lists the classes in their usual order
    assert list(control.boundary.offered) == ["llm", "embedding", "asr"]
