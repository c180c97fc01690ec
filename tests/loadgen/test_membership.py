"""Workers that die, join late or do not match: never a silent partial stage, refusals in one line.

Each test runs a real master in the background and real workers beside it; the moments that matter
(a stage running) are read from the campaign's own results.sqlite, not guessed from sleeps.
"""

from __future__ import annotations

import shutil
import signal
import time
from pathlib import Path

import pytest
import yaml
from harness import ROOT, start_worker, stop_process
from loadgen_testlib import SCENARIO, Run, background_master, seeded_counts, sent_arrivals, stage_running, wait_for

from bench_plugin.loadgen.worker import MASTER_LOST_S
from bench_plugin.results.samples import Sample
from bench_plugin.results.store import open_campaign, open_store, read_samples

pytestmark = pytest.mark.slow


def long_stages(tmp_path: Path, seconds: float) -> Path:
    """scenarios/distributed.yaml with stages of ``seconds``, long enough to act in the middle of one."""
    data = yaml.safe_load(SCENARIO.read_text())
    for stage in data["stages"]:
        stage["duration_s"] = seconds
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def every_sample(results: Path) -> list[Sample]:
    """Every sample of the campaign under ``results``, as the package reads them."""
    with open_store(results / "results.sqlite") as db:
        return read_samples(db)


def test_a_worker_killed_mid_stage_makes_the_stage_invalid(tmp_path: Path) -> None:
    scenario = long_stages(tmp_path, 8)
    with background_master(tmp_path, 2, scenario=scenario) as (master, port, results, log):
        workers = [start_worker(port, tmp_path / f"worker{i}.log") for i in range(2)]
        wait_for(lambda: stage_running(results, 0), "stage 0 to run")
        workers[0].send_signal(signal.SIGKILL)
        code = stop_process(master, timeout=120)
        output = log.read_text()
    codes = [stop_process(w) for w in workers]
    assert code == 2, output[-3000:]
    assert codes[1] == 0
    assert "campaign failed" in output and "is invalid" in output and "lost" in output, output[-3000:]
    with open_campaign(results / "results.sqlite") as reader:
        (trial,) = (t for t in reader.trials() if t.id == 1)
        kinds = [event.kind for event in reader.events()]
    (stage,) = (s for s in trial.stages if s.index == 0)
    assert stage.status == "invalid"
    assert stage.reason and "was lost mid-stage" in stage.reason and "incomplete" in stage.reason, stage.reason
    assert not [s for s in trial.stages if s.index == 1], "the campaign must stop at the invalid stage"
    assert trial.status == "invalid"
    assert "worker_lost" in kinds
    assert len(every_sample(results)) > 0, "what the other worker measured is kept"
    summary = (results / "summary.json").read_text()
    assert '"invalid"' in summary


def test_a_worker_that_joins_mid_stage_takes_load_from_the_next_stage(tmp_path: Path) -> None:
    scenario = long_stages(tmp_path, 8)
    with background_master(tmp_path, 1, scenario=scenario) as (master, port, results, log):
        first = start_worker(port, tmp_path / "worker0.log")
        wait_for(lambda: stage_running(results, 0), "stage 0 to run")
        second = start_worker(port, tmp_path / "worker1.log")
        code = stop_process(master, timeout=120)
        output = log.read_text()
    codes = [stop_process(first), stop_process(second)]
    assert code == 0, output[-3000:]
    assert codes == [0, 0]
    run = Run(code, output, codes, results)
    expected, sent = seeded_counts(run), sent_arrivals(run)
    for key, n in expected.items():
        assert sent[key] == list(range(n)), key
    with open_campaign(results / "results.sqlite") as reader:
        samples = reader.samples(1)
    workers: dict[int, set[str]] = {}
    for sample in samples:
        workers.setdefault(sample.stage, set()).add(sample.worker)
    per_stage = {stage: len(names) for stage, names in workers.items()}
    assert per_stage == {0: 1, 1: 2}, per_stage


def modified_source(tmp_path: Path) -> Path:
    """A copy of the bench_plugin sources with one comment added: same version, other code."""
    copy = tmp_path / "other-source"
    shutil.copytree(ROOT / "bench_plugin", copy / "bench_plugin", ignore=shutil.ignore_patterns("__pycache__"))
    target = copy / "bench_plugin" / "results" / "samples.py"
    target.write_text(target.read_text() + "\n# a local change\n")
    return copy


def test_workers_that_differ_are_refused_in_one_line(tmp_path: Path) -> None:
    other = yaml.safe_load(SCENARIO.read_text())
    other["seed"] = 99
    other_scenario = tmp_path / "other.yaml"
    other_scenario.write_text(yaml.safe_dump(other, sort_keys=False))
    source = modified_source(tmp_path)
    with background_master(tmp_path, 1, scenario=long_stages(tmp_path, 4)) as (master, port, results, log):
        good = start_worker(port, tmp_path / "good.log")
        wait_for(lambda: stage_running(results, 0), "stage 0 to run")
        by_scenario = start_worker(port, tmp_path / "scenario.log", "--scenario", str(other_scenario))
        by_source = start_worker(port, tmp_path / "source.log", cwd=source)
        refused = [stop_process(by_scenario, timeout=60), stop_process(by_source, timeout=60)]
        code = stop_process(master, timeout=120)
        output = log.read_text()
    assert stop_process(good) == 0
    assert code == 0, output[-3000:]
    assert refused == [2, 2]
    scenario_line, source_line = ([line for line in (tmp_path / name).read_text().splitlines()
                                   if "bench_plugin: error" in line] for name in ("scenario.log", "source.log"))
    assert len(scenario_line) == 1 and "refused by the master: scenario sha256" in scenario_line[0], scenario_line
    assert len(source_line) == 1 and "refused by the master: bench_plugin source" in source_line[0], source_line
    assert "Traceback" not in (tmp_path / "scenario.log").read_text() + (tmp_path / "source.log").read_text()
    assert output.count("refused:") == 2, output[-3000:]
    assert len({sample.worker for sample in every_sample(results)}) == 1


def test_workers_of_a_killed_master_stop_sending_and_say_why(tmp_path: Path) -> None:
    """A master killed mid-stage (SIGKILL: no goodbye) leaves its workers nobody to send for: each stops its
    arrivals once the master has not answered its heartbeats for MASTER_LOST_S, and exits 2 saying so, well
    before the stage's 60 s are over (before, they sent to its end, then exited 0)."""
    with background_master(tmp_path, 1, scenario=long_stages(tmp_path, 60)) as (master, port, results, _):
        worker = start_worker(port, tmp_path / "worker.log")
        try:
            wait_for(lambda: stage_running(results, 0), "stage 0 to run")
            master.send_signal(signal.SIGKILL)
            killed = time.time()
            code = worker.wait(timeout=45)
            took = time.time() - killed
        finally:
            stop_process(worker)
    output = (tmp_path / "worker.log").read_text()
    assert code == 2, output[-3000:]
    assert "Traceback" not in output, output[-3000:]
    assert took < MASTER_LOST_S + 20, took  # well before the stage's end (its own time from the master's last answer)
    lines = [line for line in output.splitlines() if "bench_plugin: error" in line]
    assert len(lines) == 1 and "the master has not answered for" in lines[0] and "(lost): stopped sending" in \
        lines[0], lines
