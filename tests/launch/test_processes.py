"""How many load-generating processes a campaign runs: the post-parse step on Locust's options, and real runs.

In process: Locust's own parser with the plugin's options (as get_parser builds it), parsed, and the options
Locust would then act on. This 2-core machine is too small for the rule to fork (sizing.py: fewer than 2
cores left for load generators), so the step is also shown acting on a sizing of 2 (patched in).

Real `locust` processes (slow): ``--processes 2`` sends exactly the seeded arrivals from two workers and
records them with their cores; a plain command here records the sizing that kept one process; and the same
command on a host made to look like 16 cores (``os.sched_getaffinity`` replaced in the launching
interpreter, so in the master and its forked workers) forks two workers by itself.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from argparse import Namespace
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from harness import ROOT, headless, run_locust, synthetic_server
from locust.argument_parser import get_empty_argument_parser, setup_parser_arguments

from bench_plugin.launch import processes
from bench_plugin.launch.options import add_arguments
from bench_plugin.loadgen.arrivals import arrival_count
from bench_plugin.loadgen.sizing import Sizing
from bench_plugin.results.recorder import Recorder
from bench_plugin.results.store import open_campaign
from bench_plugin.scenario import format_cpulist

SHORT = str(ROOT / "scenarios" / "short.yaml")
TWO = Sizing(processes=2, peak_cores=0.8, peak_at="stage x (embedding 1,000 req/s)", available_cores=16,
             reserved_cores=3, why="peak 0.80 cores at stage x (embedding 1,000 req/s), at 0.5 core a process; "
                                   "16 cores, 3 for the servers, 1 for the master")
"""A sizing that forks two workers, as the rule gives on a bigger host."""
BURST = """\
name: burst
repeats: 1
readiness_timeout_s: 30
drain_timeout_s: 10
warmup: {requests: none}
classes:
  embedding: {model: bench-synthetic, requests: {count: 8, batch_size: 4, input_tokens: 8}, slo: {p95_ms: 2000}}
arms: [{name: synthetic, control: true}]
stages: [{name: burst, duration_s: 0.25, load: {embedding: 800}}]
"""
"""200 embedding requests in a quarter of a second: 0.72 cores planned, more than one process's 0.5."""


@pytest.fixture(autouse=True)
def fresh_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test is a process that has not planned yet (the step plans once per process)."""
    monkeypatch.setattr(processes, "_PLAN", processes._Plan())
    for name in ("LOCUST_PROCESSES", "LOCUST_MASTER_NODE_PORT", "LOCUST_MASTER_BIND_PORT"):
        monkeypatch.delenv(name, raising=False)


def parse(*args: str) -> Namespace:
    """Locust's parser with the plugin's options (get_parser, without firing the event for the whole session)."""
    parser = get_empty_argument_parser()
    setup_parser_arguments(parser)
    add_arguments(parser)
    options: Namespace = parser.parse_args(["-f", "locustfiles/mixed.py", *args])
    return options


@pytest.fixture
def sized_two(monkeypatch: pytest.MonkeyPatch) -> None:
    """The rule gives 2 (as on a 16-core host) whatever the scenario."""
    monkeypatch.setattr(processes, "size", lambda scenario, cores, reserved: TWO)


@pytest.mark.usefixtures("sized_two")
def test_unasked_the_sizing_decides_and_the_master_listens_on_loopback_on_a_free_port() -> None:
    options = parse("--scenario", SHORT)
    assert options.processes == 2  # Locust forks two workers and makes this process their master
    assert options.master_bind_host == options.master_host == "127.0.0.1"
    assert options.master_bind_port == options.master_port != 5557
    decided = processes.decided()
    assert decided is not None and (decided.decided, decided.processes, decided.sized) == ("auto", 2, 2)
    assert decided.why == TWO.why and decided.peak_at == TWO.peak_at
    again = parse("--scenario", SHORT)  # a worker reading its command line again, the web UI parsing it again
    assert again.processes is None and again.master_port == 5557 and processes.decided() is decided


@pytest.mark.usefixtures("sized_two")
def test_a_master_port_given_anywhere_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    options = parse("--scenario", SHORT, "--master-port", "6001", "--master-bind-port", "6001")
    assert (options.processes, options.master_port, options.master_bind_port) == (2, 6001, 6001)
    assert options.master_bind_host == "*"  # Locust's own default: the user chose the port, and with it the rest
    monkeypatch.setattr(processes, "_PLAN", processes._Plan())
    monkeypatch.setenv("LOCUST_MASTER_BIND_PORT", "6002")
    options = parse("--scenario", SHORT, "--master-port", "6002")
    assert (options.processes, options.master_port, options.master_bind_port) == (2, 6002, 6002)


@pytest.mark.usefixtures("sized_two")
def test_processes_given_always_win_and_1_means_one_process() -> None:
    options = parse("--scenario", SHORT, "--processes", "1")
    assert options.processes is None  # the local runner: Locust would fork one worker under a master for 1
    decided = processes.decided()
    assert decided is not None and (decided.decided, decided.processes, decided.sized) == ("given", 1, 2)
    options = parse("--scenario", SHORT, "--processes", "3")  # the same process: nothing planned again
    assert options.processes == 3 and options.master_port == 5557
    fresh = parse("--scenario", SHORT)  # not planned again either: still as parsed
    assert fresh.processes is None
    three = processes.plan(parse("--scenario", SHORT, "--processes", "3"), sizing=TWO)
    assert three is not None and (three.decided, three.processes, three.sized) == ("given", 3, 2)


def test_a_worker_or_a_hand_started_master_is_left_as_given() -> None:
    worker = parse("--worker", "--scenario", SHORT)
    assert processes.decided() is None and worker.processes is None and worker.master_port == 5557
    master = parse("--master", "--scenario", SHORT)  # planned here, as the first parse: not acted on
    found = processes.plan(master, sizing=TWO)
    assert found is not None and (found.decided, found.processes, found.sized) == ("workers", None, 2)
    assert master.processes is None and master.master_bind_port == 5557


def test_a_command_line_that_will_not_launch_is_left_to_the_launch(tmp_path: Path) -> None:
    for args in (["--scenario", str(tmp_path / "missing.yaml")],  # the launch says "scenario file not found"
                 ["--scenario", SHORT, "--backend", "local", "--host", "http://127.0.0.1:1"],  # contradictory
                 ["--resume", str(tmp_path)],  # not a campaign's directory
                 []):  # no campaign at all
        options = parse(*args)
        assert processes.plan(options, cores=64) is None, args
        assert options.processes is None and options.master_port == 5557


def test_the_sizing_sees_the_backend_and_the_scenario_the_launch_will_run(tmp_path: Path) -> None:
    local = processes.plan(parse("--scenario", SHORT), cores=16)
    manual = processes.plan(parse("--scenario", SHORT, "--host", "http://127.0.0.1:1", "--arm", "exclusive"),
                            cores=16)
    assert local is not None and manual is not None
    assert (local.reserved_cores, manual.reserved_cores) == (3, 0)  # the local backend's servers, one a class
    # resuming, the scenario is the recorded one (here: a burst that wants two processes on 16 cores)
    (tmp_path / "burst.yaml").write_text(BURST)
    directory = tmp_path / "results"
    directory.mkdir()
    rec = Recorder(directory / "results.sqlite")
    rec.set_meta("scenario", {"name": "burst", "path": str(tmp_path / "burst.yaml"), "sha256": "5e" * 32})
    rec.set_meta("overrides", {"arm": None, "repeats": None, "stage_duration": 0.5})
    rec.close()
    options = parse("--resume", str(directory))
    resumed = processes.plan(options, cores=16)
    assert resumed is not None and (resumed.decided, resumed.processes) == ("auto", 2)
    assert resumed.peak_at == "stage burst (embedding 800 req/s)" and options.processes == 2


# --- real processes ---------------------------------------------------------------------------------------


def summary(results: Path) -> dict[str, Any]:
    return dict(json.loads((results / "summary.json").read_text()))


def check_exact(results: Path, workers: int) -> None:
    """Every seeded arrival of every class and stage was sent once, by the ``workers`` processes in turn."""
    with open_campaign(results / "results.sqlite") as reader:
        (trial,) = reader.trials()
        samples = reader.samples(trial.id)
        problems = [event.detail["problems"] for event in reader.events("stage_accounting")]
    assert problems and all(p == [] for p in problems), problems
    for stage in trial.stages:
        assert stage.planned_s is not None
        for name, rate in stage.offered.items():
            mine = [s for s in samples if s.stage == stage.index and s.workload == name]
            assert sorted(s.seq for s in mine) == list(range(arrival_count(rate, stage.planned_s))), (stage, name)
            assert len({s.worker for s in mine}) == workers, (stage.index, name)


@pytest.mark.slow
def test_processes_2_sends_exactly_the_seeded_arrivals_from_two_workers_and_records_them(tmp_path: Path) -> None:
    results = tmp_path / "results"
    done = run_locust(["-f", "locustfiles/mixed.py", "--scenario", str(ROOT / "scenarios" / "distributed.yaml"),
                       "--results-dir", str(results), "--stage-duration", "2", "--processes", "2"], timeout=180)
    assert done.returncode == 0 and "campaign completed" in done.stdout, done.stdout[-3000:]
    check_exact(results, workers=2)
    generators = summary(results)["load_generators"]
    assert generators["sizing"]["decided"] == "given" and generators["sizing"]["processes"] == 2
    workers, master = generators["processes"], generators["master"]
    assert len(workers) == 2 and all(mid != "local" for mid in workers)
    assert len({w["pid"] for w in workers.values()} | {master["pid"]}) == 3  # two forked children and their parent
    for who in (*workers.values(), master):
        assert who["cores"] == format_cpulist(os.sched_getaffinity(0)) and who["host"], who
    assert "load generators: 2 processes under a master (--processes 2 given" in done.stdout


@pytest.fixture
def burst(tmp_path: Path) -> Iterator[tuple[Path, list[str]]]:
    """The burst scenario on the manual backend (one synthetic server): its file and the campaign's arguments."""
    path = tmp_path / "burst.yaml"
    path.write_text(BURST)
    with synthetic_server(tmp_path / "synthetic.log", "--latency-ms", "5") as url:
        yield path, ["-f", "locustfiles/mixed.py", "--scenario", str(path), "--host", url, "--arm", "synthetic"]


@pytest.mark.slow
def test_a_plain_command_on_this_small_host_records_why_it_kept_one_process(
        tmp_path: Path, burst: tuple[Path, list[str]]) -> None:
    results = tmp_path / "results"
    done = run_locust([*burst[1], "--results-dir", str(results)], timeout=120)
    assert done.returncode == 0, done.stdout[-3000:]
    cores = len(os.sched_getaffinity(0))
    generators = summary(results)["load_generators"]
    sizing = generators["sizing"]
    assert (sizing["decided"], sizing["processes"]) == ("auto", 1)
    assert (sizing["available_cores"], sizing["reserved_cores"]) == (cores, 0)
    assert sizing["peak_at"] == "stage burst (embedding 800 req/s)" and sizing["peak_cores"] == pytest.approx(0.72)
    if cores < 3:  # this machine: the master's core leaves fewer than 2 for load generators
        assert sizing["why"].endswith("(fewer than 2): one process"), sizing["why"]
    assert list(generators["processes"]) == ["local"] and generators["master"] is None
    assert "load generators: 1 process, the local runner (auto: peak 0.72 cores" in done.stdout
    check_exact(results, workers=1)


FAKE_16_CORES = ("import os, sys; os.sched_getaffinity = lambda pid: set(range(16)); "
                 "from locust.main import main; sys.exit(main())")
"""`locust`, launched on a host that looks like 16 cores to the plugin (and to the workers it forks)."""


@pytest.mark.slow
def test_the_sizing_forks_workers_by_itself_where_the_host_has_the_cores(
        tmp_path: Path, burst: tuple[Path, list[str]]) -> None:
    results = tmp_path / "results"
    cmd = [sys.executable, "-c", FAKE_16_CORES, *headless([*burst[1], "--results-dir", str(results)], False)[1:]]
    done = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0 and "campaign completed" in done.stdout, done.stdout[-3000:]
    generators = summary(results)["load_generators"]
    sizing = generators["sizing"]
    assert (sizing["decided"], sizing["processes"], sizing["available_cores"]) == ("auto", 2, 16)
    assert sizing["why"].endswith("at 0.5 core a process; 16 cores, 0 for the servers, 1 for the master")
    assert len(generators["processes"]) == 2 and generators["master"] is not None
    assert all(p["cores"] == "0-15" for p in generators["processes"].values())  # what the forked workers saw
    assert "load generators: 2 processes under a master (auto: peak 0.72 cores" in done.stdout
    check_exact(results, workers=2)
