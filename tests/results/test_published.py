"""What docs/results/h200-sendlag claims of its committed summary holds in the file.

The committed run is the load generator's own timing at light load on an H200 host
(benchmarks/scenarios/h200-sendlag.yaml through benchmarks/sendlag.sh): its README says every
class's send lag P99 was under 2 ms in every stage, with no stage generator-limited. The summary is
read through the project's own schema (a version this code does not know would be refused).
"""

from __future__ import annotations

from pathlib import Path

from bench_plugin.results.summary import load_summary

SENDLAG = Path(__file__).resolve().parents[2] / "docs" / "results" / "h200-sendlag"


def test_the_published_light_load_run_sent_every_request_within_2_ms_at_p99() -> None:
    summary = load_summary(SENDLAG / "summary.json")
    assert summary.status.status == "completed"
    stages = [(trial.arm, stage) for trial in summary.trials for stage in trial.stages]
    assert sorted({arm for arm, _ in stages}) == ["exclusive", "mps", "time-slicing"]
    assert len(stages) == 6 and all(stage.status == "completed" for _, stage in stages)
    for arm, stage in stages:
        assert stage.generator_limited is None, (arm, stage.index, stage.generator_limited)
        assert sorted(stage.classes) == ["asr", "embedding", "llm"]
        for name, figures in stage.classes.items():
            p99 = figures.send_lag_ms["p99"]
            assert p99 is not None and p99 < 2.0, (arm, stage.index, name, p99)
    assert (SENDLAG / "README.md").read_text().count("< 2 ms") >= 1
