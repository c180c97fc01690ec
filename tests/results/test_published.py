"""What the READMEs of committed H200 runs claim of their summaries holds in the files.

docs/results/h200-sendlag is the load generator's own timing at light load on an H200 host
(benchmarks/scenarios/h200-sendlag.yaml through benchmarks/sendlag.sh): its README says every
class's send lag P99 was under 2 ms in every stage, with no stage generator-limited.
docs/results/h200-generator/embedding-solo is the embedding class alone searched to its boundary there.
docs/benchmarks.md's device time of the H200 envelope campaign in progress is what benchmarks/campaign_time.py
prints of its tarball, and its estimates of the whole campaign's what benchmarks/search_estimate.py prints.
The summaries are read through the project's own schema (a version this code does not know would be
refused).
"""

from __future__ import annotations

import importlib.util
import io
import sys
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from bench_plugin.results.limits import Limit
from bench_plugin.results.summary import load_summary

pytestmark = pytest.mark.cpu_bound

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


GENERATOR = Path(__file__).resolve().parents[2] / "docs" / "results" / "h200-generator"


@pytest.mark.parametrize("run", ["embedding-solo", "2026-12-06/embedding-solo"])
def test_the_published_embedding_search_found_the_servers_boundary_with_no_stage_generator_limited(run: str) -> None:
    """docs/results/h200-generator/embedding-solo and its rerun of 2026-12-06: the default command (2 workers,
    sized by the plugin) searched the embedding class alone on the H200 to a boundary that the server set, not the
    sender. A stage's send lag P99 over 10 ms is allowed only where the self-check found the event loop's stalls
    behind it and said so (a stalls note), and kept its verdict."""
    summary = load_summary(GENERATOR / run / "summary.json")
    assert summary.status.status == "completed"
    assert summary.load_generators is not None and summary.load_generators.sizing is not None
    assert summary.load_generators.sizing.decided == "auto" and summary.load_generators.sizing.processes >= 2
    stages = [stage for trial in summary.trials for stage in trial.stages]
    assert len(stages) >= 4
    for stage in stages:
        assert stage.generator_limited is None, (stage.index, stage.generator_limited)
        p99 = stage.classes["embedding"].send_lag_ms["p99"]
        excused = stage.generator_check is not None and (stage.generator_check.note or "").startswith("stalls:")
        assert p99 is not None and (p99 < 10.0 or excused), (stage.index, p99)
    boundary = summary.comparison.arms["exclusive"].boundary
    assert boundary is not None and boundary.status == "found"
    assert boundary.limiting == [Limit(workload="embedding", figure="p95")]
    # the server, not the sender, set it: offered well past the boundary, it served no more than at it
    served = {stage.offered["embedding"]: stage.classes["embedding"].throughput_rps.mean
              for stage in summary.arms["exclusive"].stages}
    top = max(served)
    assert boundary.offered["embedding"] < top / 1.5 and served[top] < 1.15 * boundary.offered["embedding"]
    readme = (GENERATOR / "README.md").read_text()
    assert "no stage flagged generator-limited" in readme and f"{boundary.offered['embedding']:.0f} req/s" in readme


ROOT = Path(__file__).resolve().parents[2]


def test_the_device_time_tables_in_benchmarks_md_are_what_campaign_time_prints() -> None:
    """docs/benchmarks.md, "Device time of an envelope campaign": both tables of the H200 campaign in progress are
    benchmarks/campaign_time.py's own output on the committed tarball, line for line."""
    spec = importlib.util.spec_from_file_location("campaign_time", ROOT / "benchmarks" / "campaign_time.py")
    assert spec is not None and spec.loader is not None
    module = sys.modules["campaign_time"] = importlib.util.module_from_spec(spec)  # its dataclasses look it up
    spec.loader.exec_module(module)
    printed = io.StringIO()
    with redirect_stdout(printed):
        assert module.main([str(ROOT / "docs" / "results" / "h200-envelope" / "in-progress" / "results.tar.gz")]) == 0
    doc = (ROOT / "docs" / "benchmarks.md").read_text()
    section = doc.split("## Device time of an envelope campaign", 1)[1]
    lines = [line for line in printed.getvalue().splitlines() if line]
    assert len(lines) > 10 and all(line in section for line in lines), [x for x in lines if x not in section]


ESTIMATE = "python benchmarks/search_estimate.py --boundaries docs/results/h200-envelope/in-progress/results.tar.gz"


def test_the_device_time_estimates_in_benchmarks_md_are_what_search_estimate_prints(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/benchmarks.md, "Estimating a campaign's device time": each row of its table of the H200 campaign's
    settings is benchmarks/search_estimate.py's own last line for the flags the row names (run from the
    repository's root, as the document's command is)."""
    spec = importlib.util.spec_from_file_location("search_estimate", ROOT / "benchmarks" / "search_estimate.py")
    assert spec is not None and spec.loader is not None
    module = sys.modules["search_estimate"] = importlib.util.module_from_spec(spec)  # its dataclasses look it up
    spec.loader.exec_module(module)
    doc = (ROOT / "docs" / "benchmarks.md").read_text()
    section = doc.split("### Estimating a campaign's device time", 1)[1].split("\n## ", 1)[0]
    assert ESTIMATE in section
    rows = [line.split(" | ") for line in section.splitlines() if line.startswith("| `")]
    assert len(rows) >= 8
    monkeypatch.chdir(ROOT)
    for row in rows:
        flags = row[0].removeprefix("| `").removesuffix("`").split()
        printed = io.StringIO()
        with redirect_stdout(printed):
            assert module.main([*ESTIMATE.split()[2:], *flags]) == 0
        assert printed.getvalue().splitlines()[-1] == row[1].removesuffix(" |"), (flags, row)


DISRUPTION = Path(__file__).resolve().parents[2] / "docs" / "results" / "h100-disruption"


def test_the_published_disruption_campaign_holds_what_its_readme_says() -> None:
    """docs/results/h100-disruption: a restart or a kill of the embedding server took its class down for its new
    server's cold start (6.6-7.0 s) and cost about 200 requests; a rollout none but keep-alive's race; every other
    class came through every step in every repeat, and under MPS the daemon did too; the GPU was left as found."""
    summary = load_summary(DISRUPTION / "summary.json")
    assert summary.status.status == "completed" and len(summary.trials) == 9
    for arm, figures in summary.arms.items():
        kinds = [stage.disruption.kind for stage in figures.stages if stage.disruption is not None]
        assert kinds == ["restart", "rollout-restart", "kill"], arm
        for stage in figures.stages:
            d = stage.disruption
            assert d is not None and d.repeats == 3
            embedding = d.classes["embedding"]
            down, cold, failed = embedding.unavailable_s, embedding.cold_start_s, embedding.failed
            assert down is not None and cold is not None and cold.mean is not None and down.mean is not None
            assert 6.5 <= cold.mean <= 7.2, (arm, d.kind, cold.mean)
            assert failed.mean is not None
            if d.kind == "rollout-restart":
                assert down.mean == 0.0 and failed.mean <= 1.0, (arm, failed.values)
            else:
                assert cold.mean < down.mean < cold.mean + 0.5 and 150 <= failed.mean <= 250, (arm, d.kind)
            for name in ("llm", "asr"):
                other = d.classes.get(name)
                if arm == "exclusive":
                    assert other is None  # each class alone: nobody beside the restarting server
                    continue
                assert other is not None and (other.survived, other.checked) == (3, 3) and other.failed.mean == 0
    steps = [a for trial in summary.trials if trial.arm == "mps" for stage in trial.stages if stage.disruption
             for a in stage.disruption.actions if a.action == "mps-daemon"]
    assert len(steps) == 9 and all(a.result is not None and a.result.startswith("running") for a in steps)
    check = (DISRUPTION / "gpu-check.txt").read_text()
    for line in ("settings unchanged: yes", "server processes left: none", "front processes left: none",
                 "MPS processes left: none", "compute processes on the GPU: none"):
        assert check.count(line) == 2, line  # both device calls
    readme = (DISRUPTION / "README.md").read_text()
    assert "NVIDIA H100 80GB HBM3" in readme and "3 of 3" in readme
