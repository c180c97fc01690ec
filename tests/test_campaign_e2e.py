"""A whole short campaign through the real `locust --headless` command, with real reference servers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from harness import Campaign, pid_alive

from bench_plugin.loadgen.arrivals import arrival_count
from bench_plugin.results.store import open_campaign

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def campaign(short_campaign: Campaign) -> tuple[Path, str]:
    return short_campaign.results, short_campaign.output


def test_writes_every_output_and_says_where(campaign: tuple[Path, str]) -> None:
    results, output = campaign
    for name in ("results.sqlite", "summary.json", "summary.md", "report.html", "report.md"):
        assert (results / name).is_file(), name
    assert f"results in {results}" in output
    assert "campaign completed" in output


def test_the_answer_is_the_last_thing_printed_after_locusts_own_tables(campaign: tuple[Path, str]) -> None:
    results, output = campaign
    lines = output.rstrip().splitlines()
    head = max(i for i, line in enumerate(lines) if line.startswith("bench_plugin: the answer for "))
    table = max(i for i, line in enumerate(lines) if "Response time percentiles" in line or "Aggregated" in line)
    assert table < head, "\n".join(lines[-40:])
    assert lines[-1] == f"  report: {results / 'report.html'}", lines[-5:]


def test_trials_are_interleaved_arms_times_repeats(campaign: tuple[Path, str]) -> None:
    summary = json.loads((campaign[0] / "summary.json").read_text())
    assert summary["schema"] == "bench_plugin.summary/4"
    assert [(t["arm"], t["repeat"]) for t in summary["trials"]] == [
        ("exclusive", 1), ("shared", 1), ("exclusive", 2), ("shared", 2)
    ]
    assert all(t["status"] == "completed" for t in summary["trials"])


def test_every_stage_and_class_has_figures(campaign: tuple[Path, str]) -> None:
    summary = json.loads((campaign[0] / "summary.json").read_text())
    for trial in summary["trials"]:
        assert [s["index"] for s in trial["stages"]] == [0, 1]
        for stage in trial["stages"]:
            assert set(stage["classes"]) == {"llm", "embedding", "asr"}
            for name, figures in stage["classes"].items():
                assert figures["requests"] > 0, (trial["arm"], stage["index"], name)
                assert figures["errors"] == 0, figures["errors_by_kind"]
                assert figures["latency_ms"]["p50"] <= figures["latency_ms"]["p95"] <= figures["latency_ms"]["p99"]
            llm = stage["classes"]["llm"]
            assert llm["ttft_ms"]["p95"] is not None and llm["tpot_ms"]["p95"] is not None
            assert llm["ttft_ms"]["p50"] <= llm["latency_ms"]["p50"]


def test_exclusive_runs_each_class_alone_and_shared_runs_them_together(campaign: tuple[Path, str]) -> None:
    with open_campaign(campaign[0] / "results.sqlite") as reader:
        trials = reader.trials()  # in run order, each with its segments in order
    rows = [(trial.arm, segment) for trial in trials if trial.repeat == 1 for segment in trial.segments]
    layout = [(arm, segment.classes) for arm, segment in rows]
    assert layout == [("exclusive", ["llm"]), ("exclusive", ["embedding"]), ("exclusive", ["asr"]),
                      ("shared", ["llm", "embedding", "asr"])]
    for _, segment in rows:
        for where in segment.placement.values():
            assert where.device == "cpu" and where.pid is not None and not pid_alive(where.pid)


def test_summary_compares_against_the_control(campaign: tuple[Path, str]) -> None:
    summary = json.loads((campaign[0] / "summary.json").read_text())
    shared = summary["arms"]["shared"]["stages"][0]["classes"]["llm"]
    assert shared["normalised_throughput"]["n"] == 2
    assert shared["throughput_rps"]["ci95"] is not None
    text = (campaign[0] / "summary.md").read_text()
    assert "| shared | llm |" in text and "| exclusive | asr |" in text and "control" in text


def test_conditions_and_hashes_are_recorded(campaign: tuple[Path, str]) -> None:
    summary = json.loads((campaign[0] / "summary.json").read_text())
    assert len(summary["scenario"]["sha256"]) == 64
    assert {n: len(rs["sha256"]) for n, rs in summary["request_sets"].items()} == {"llm": 64, "embedding": 64,
                                                                                    "asr": 64}
    conditions = summary["conditions"]
    assert conditions["packages"]["locust"] and conditions["backend"]["backend"] == "local"
    assert (campaign[0] / "inputs" / "llm.jsonl").is_file()



def test_every_stage_sends_round_rate_times_duration_in_every_arm_and_repeat(campaign: tuple[Path, str]) -> None:
    summary = json.loads((campaign[0] / "summary.json").read_text())
    seen = set()
    for trial in summary["trials"]:
        for stage in trial["stages"]:
            for name, rate in stage["offered"].items():
                expected = arrival_count(rate, stage["planned_s"])
                assert stage["arrivals"][name] == stage["classes"][name]["requests"] == expected, (
                    trial["arm"], trial["repeat"], stage["index"], name)
                assert stage["realised"][name] == pytest.approx(expected / stage["planned_s"])
                seen.add((trial["arm"], trial["repeat"]))
    assert seen == {("exclusive", 1), ("exclusive", 2), ("shared", 1), ("shared", 2)}


def test_each_segment_warms_up_before_its_first_stage_and_none_of_it_is_a_sample(campaign: tuple[Path, str]) -> None:
    with open_campaign(campaign[0] / "results.sqlite") as reader:
        trials = reader.trials()
        samples = {trial.id: reader.samples(trial.id) for trial in trials}
    early = 0
    for trial in trials:
        for segment in trial.segments:
            first = min(s.started_s for s in trial.stages if s.segment == segment.index and s.started_s is not None)
            sent = segment.warmup
            assert sent and all(w.requests >= 1 and w.errors == 0 and w.ended_s <= first for w in sent.values())
        started = {(s.segment, s.index): s.started_s for s in trial.stages}
        for sample in samples[trial.id]:
            start = started.get((sample.segment, sample.stage))
            early += start is not None and sample.intended_s < start
    assert early == 0


def test_the_terminal_gives_the_answer_per_arm_and_stage(campaign: tuple[Path, str]) -> None:
    results, output = campaign
    summary = json.loads((results / "summary.json").read_text())
    lines = output[output.index("bench_plugin: the answer for short"):].splitlines()
    assert lines[0] == "bench_plugin: the answer for short (2 arms, 2 repeats; control: exclusive)"
    shared = summary["comparison"]["arms"]["shared"]
    arm_lines = [line for line in lines if line.startswith("  ") and not line.startswith("    ")]
    assert arm_lines[0].startswith("  exclusive: control; boundary ")
    assert arm_lines[1].startswith(f"  shared: {shared['verdict']['call'].upper()}; ")
    answer = shared["answer"]
    if answer["per_device"] is not None:  # the figure per device the verdict rests on, against the control's
        assert f"goodput at {answer['at']} " in arm_lines[1] and "req/s per device" in arm_lines[1]
    assert f"    next: {answer['next_step']}" in lines
    stage_lines = [line for line in lines if line.startswith("    stage ")]
    assert len(stage_lines) == 4  # two stages of each arm
    for arm, line in (("exclusive", stage_lines[0]), ("shared", stage_lines[2])):  # stage 0, figures as summary.json
        figures = summary["arms"][arm]["stages"][0]["classes"]
        assert f"llm P95 {figures['llm']['latency_p95_ms']['mean']:.0f} ms" in line
        assert f"TTFT P95 {figures['llm']['ttft_p95_ms']['mean']:.0f} ms" in line
        assert f"asr P95 {figures['asr']['latency_p95_ms']['mean']:.0f} ms" in line
    ratio = shared["stages"][0]["classes"]["embedding"]["slowdown_p95"]["mean"]
    assert f"({ratio:.2f}x the control's)" in stage_lines[2]
    assert stage_lines[2].startswith("    stage 0 (") and f": {shared['stages'][0]['verdict']}: " in stage_lines[2]
    assert "some P95s rest on too few samples" in output  # 3-s stages: the flag says so
    assert f"  report: {results / 'report.html'}" in lines
