"""What two campaigns' comparison names: a difference as people write it, the context conditions it lists."""

from __future__ import annotations

from harness import Campaign as Run

from bench_plugin.analysis.comparability import Campaign, Difference, context_conditions, differences
from bench_plugin.results.summary import Summary, load_summary


def test_a_difference_reads_as_condition_a_vs_b() -> None:
    assert str(Difference("packages.locust", "2.47.0", "2.48.0")) == "packages.locust: 2.47.0 vs 2.48.0"
    assert str(Difference("classes.llm.server", {"size": "8b", "threads": None}, None)) == (
        'classes.llm.server: {"size": "8b", "threads": null} vs none')
    assert str(Difference("load_generators", 1, 3)) == "load_generators: 1 vs 3"
    assert str(Difference("host.other_work_cores_max", 0.25, 1.5)) == "host.other_work_cores_max: 0.25 vs 1.5"


def _campaign(summary: Summary) -> Campaign:
    return Campaign(name="x", summary=summary, scenario={"arms": [{"name": "exclusive"}], "classes": {}})


def test_load_generators_and_the_hosts_other_work_are_context(short_campaign: Run) -> None:
    summary = load_summary(short_campaign.results / "summary.json")
    context = context_conditions(_campaign(summary))
    stages = [stage for trial in summary.trials for stage in trial.stages]
    assert context["load_generators"] == max(len(stage.generators) for stage in stages)
    assert context["host.busy_stages"] == sum(1 for stage in stages if stage.host_busy)
    quiet = summary.model_copy(deep=True)  # the same campaign on a host that had nothing else to do
    for trial in quiet.trials:
        for stage in trial.stages:
            stage.host_busy = None
            if stage.host is not None:
                stage.host.others_cores = 0.0
    busier = quiet.model_copy(deep=True)
    stage = next(s for trial in busier.trials for s in trial.stages if s.host is not None)
    assert stage.host is not None
    stage.host.others_cores = 7.5
    stage.host_busy = "other processes used 7.5 cores"
    found = {d.condition: str(d) for d in differences(_campaign(quiet), _campaign(busier), context=True)}
    assert found == {"host.other_work_cores_max": "host.other_work_cores_max: 0 vs 7.5",
                     "host.busy_stages": "host.busy_stages: 0 vs 1"}
    assert differences(_campaign(quiet), _campaign(busier)) == []  # context, not a fixed condition
