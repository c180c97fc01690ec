"""The instrument checks itself: exact arrival counts, an unmeasured warm-up, a CPU-bound generator, a
stalled one, a busy host.

Each test runs the real `locust --headless` command on the calibration scenario (synthetic servers
started by the local backend, each writing its own timing log) with stages cut short. The CPU-bound and
the stalled generator are locustfiles whose listener starts, at the first stage, a greenlet that holds
the event loop (harness.holding_locustfile): burning the CPU in Python, or sleeping in C (libc's usleep
through ctypes, which does not yield to gevent: what an NVML poll did on the loop of a GPU host).
"""

from __future__ import annotations

import json
import math
import re
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from harness import ROOT, holding_locustfile, run_locust, scenario_variant, start_locust, stop_process

from bench_plugin.analysis.selfcheck import CPU_ADVICE, advice, cpu_advice
from bench_plugin.loadgen.arrivals import arrival_count
from bench_plugin.results.store import StoreError, open_campaign, open_store, read_samples
from bench_plugin.results.summary import GeneratorCheck

pytestmark = pytest.mark.slow

STAGES = [{"name": "a", "duration_s": 2.5, "load": {"llm": 3, "embedding": 5}},
          {"name": "b", "duration_s": 1.5, "load": {"llm": 1.3, "embedding": 7}}]

def campaign(tmp_path: Path, locustfile: Path = ROOT / "locustfiles" / "mixed.py", **changes: Any) -> Path:
    scenario = scenario_variant(tmp_path, "calibration", **{"stages": STAGES, **changes})
    results = tmp_path / "results"
    done = run_locust(["-f", str(locustfile), "--scenario", str(scenario), "--results-dir", str(results)],
                      timeout=240)
    assert done.returncode == 0, done.stdout[-3000:]
    return results


def summary_of(results: Path) -> dict[str, Any]:
    return json.loads((results / "summary.json").read_text())


@pytest.fixture(scope="module")
def warmed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A campaign that warms every item of each request set once before its stages."""
    return campaign(tmp_path_factory.mktemp("warmed"), warmup={"requests": "all", "concurrency": 3})


def test_every_stage_sends_exactly_round_rate_times_duration(warmed: Path) -> None:
    with open_store(warmed / "results.sqlite") as db:
        samples = read_samples(db)  # every sample of the campaign
    for stage, spec in enumerate(STAGES):
        for name, rate in spec["load"].items():
            seqs = sorted(s.seq for s in samples if s.stage == stage and s.workload == name)
            n = arrival_count(float(rate), float(spec["duration_s"]))
            assert n == int(float(rate) * float(spec["duration_s"]) + 0.5)
            assert seqs == list(range(n)), (stage, name)
    for stage in summary_of(warmed)["trials"][0]["stages"]:
        spec = STAGES[stage["index"]]
        for name, rate in spec["load"].items():
            expected = arrival_count(float(rate), float(spec["duration_s"]))
            assert stage["arrivals"][name] == expected == stage["classes"][name]["requests"]
            assert stage["realised"][name] == pytest.approx(expected / spec["duration_s"])
            assert stage["offered"][name] == rate  # the nominal rate stays beside the realised one


def test_the_warm_up_runs_before_the_first_stage_and_is_never_measured(warmed: Path) -> None:
    with open_campaign(warmed / "results.sqlite") as reader:
        (trial,) = reader.trials()
        samples = reader.samples(trial.id)
        kinds = [event.kind for event in reader.events()]
    sent = trial.segments[0].warmup
    first_stage = min(s.started_s for s in trial.stages if s.started_s is not None)
    first_sample = min(s.intended_s for s in samples)
    assert {name: w.requests for name, w in sent.items()} == {"llm": 32, "embedding": 16}  # every item once
    assert all(w.errors == 0 and w.ended_s <= first_stage for w in sent.values()), sent
    assert first_sample >= first_stage
    assert kinds.index("ready") < kinds.index("warmup_start") < kinds.index("warmup_end") < kinds.index("stage_start")
    for name in ("llm", "embedding"):  # the server saw each warm-up request, and none of them is a sample
        (log,) = (warmed / "logs").rglob(f"synthetic-{name}.jsonl")
        lines = [json.loads(line) for line in log.read_text().splitlines()]
        unmeasured = [line for line in lines if not line["request_id"]]
        measured = [line for line in lines if line["request_id"]]
        assert len(unmeasured) == 1 + sent[name].requests  # the readiness probe and the warm-up
        assert all(line["end_s"] <= first_stage for line in unmeasured)
        assert len(measured) == sum(arrival_count(float(s["load"][name]), float(s["duration_s"])) for s in STAGES)
    stage = summary_of(warmed)["trials"][0]["stages"][0]
    assert stage["classes"]["llm"]["requests"] == arrival_count(3, 2.5)


ATTEMPTS = 3


@pytest.mark.serial  # beside the lanes every stage is on a busy host, and the rule was never judged there
def test_a_cpu_bound_load_generator_marks_its_stages_generator_limited_and_asks_for_more_processes(
        tmp_path: Path) -> None:
    """Every stage of a generator whose loop burns the CPU is generator-limited, and CPU-bound where the host
    let it be judged so. The hypervisor's steal is neither CPU time nor a wait the guest sees, so the rule judges
    the hog's cores and demand against the CPU time the host was left. On a host the campaign itself flags busy
    (other programs, or over 10% stolen), the hog may get and seem to want under 0.9 of a core even so, and its
    blocks then read as stalls: such a stage must still be generator-limited, and the campaign is run
    again (at most ATTEMPTS in all) until one stage is judged on a quiet host. Run in a lane, it found every
    stage of its three runs busy (the other lanes are other programs) and skipped in six suites of six: so it
    runs in the serial phase, where only the hypervisor can take the host."""
    for attempt in range(1, ATTEMPTS + 1):
        (here := tmp_path / f"attempt-{attempt}").mkdir()
        results = campaign(here, holding_locustfile(tmp_path, "burner", "hog"))
        stages = summary_of(results)["trials"][0]["stages"]
        for stage in stages:
            assert stage["generator_limited"], stage
        quiet = [stage for stage in stages if not stage.get("host_busy")]
        if quiet:
            break
        print(f"attempt {attempt}: every stage on a busy host:", *(s["host_busy"] for s in stages), sep="\n  ")
    else:
        pytest.skip(f"the host was busy in every stage of {ATTEMPTS} runs: the CPU-bound rule cannot be judged here")
    for stage in quiet:
        reason = stage["generator_limited"]
        assert reason.startswith("CPU-bound: "), stage
        assert stage["generator_check"]["kind"] == "cpu-bound"
        used = stage["generators"]["local"]
        # the fix names the flag with a number: what the process needed (its cores, or what its loop wanted
        # where more) at 0.5 core a process, and at least one more process than ran
        needed = max(used["cores"], used["stalls"]["busy_s"] / used["wall_s"])
        assert reason.endswith(f"; 1 process, {needed:.2f} cores in all"), reason
        check = GeneratorCheck.model_validate(stage["generator_check"])
        assert (check.processes, check.cores) == (1, round(needed, 2))
        assert advice([check]) == cpu_advice(max(math.ceil(round(needed, 2) / 0.5), 2))
        # the hog's CPU is the generator's own: an unhogged generator at these rates uses under 0.05 core, the
        # hog all it is given (0.86 of a core on a quiet host; 0.24 was seen with eight busy processes on the
        # two cores), so twice the unhogged figure already tells them apart
        assert used["cores"] > 0.1
        # given or not, it wanted the core: its loop was on a CPU or waiting for one 95% of the time and more, of
        # the time the hypervisor left the host (a CI run's quiet stage got 0.88 of a core, against 0.97 here)
        left = 1.0 - ((stage.get("host") or {}).get("steal_fraction") or 0.0)
        assert used["stalls"]["busy_s"] / used["wall_s"] / left > 0.9, (stage.get("host"), used)
        assert any("burner.hog (burner.py:" in cause for cause in used["stalls"]["causes"]), used["stalls"]


STALL_STAGES = [{"name": "stalled", "duration_s": 3, "load": {"llm": 4, "embedding": 15}}]
"""57 requests: with the loop stopped 30% of the time, a fifth of them is sent over 10 ms late."""


def test_a_loop_stalled_by_a_c_call_marks_its_stage_stalled_names_the_call_and_says_more_processes_will_not_help(
        tmp_path: Path) -> None:
    results = campaign(tmp_path, holding_locustfile(tmp_path, "stall", "hold_the_loop"), stages=STALL_STAGES)
    (stage,) = summary_of(results)["trials"][0]["stages"]
    reason, found = stage["generator_limited"], stage["generator_check"]
    used = stage["generators"]["local"]
    assert found["kind"] == "stalled", (reason, used)
    assert found["cause"].startswith("stall.hold_the_loop (stall.py:"), found
    assert reason.startswith("stalled: send lag P99 ") and f"blocked in `{found['cause']}`, not short of CPU" in reason
    text = advice([GeneratorCheck.model_validate(found)])
    assert "not a CPU shortage, more workers will not help" in text and f"`{found['cause']}`" in text
    assert CPU_ADVICE not in text and "--processes" not in text
    n, held_ms = used["stalls"]["causes"][found["cause"]]
    assert n >= 10 and held_ms >= 30 * n  # each block at least its C sleep; one every 100 ms over >= 3 s
    assert re.match(r"stalls: \d+ blocks \(\d+ ms in all, longest \d+ ms, in `stall\.hold_the_loop", found["note"])
    assert used["cores"] < 0.9 and used["stalls"]["busy_s"] / used["wall_s"] < 0.9  # the CPU idled meanwhile


@contextmanager
def burners(n: int) -> Iterator[None]:
    """``n`` processes spinning on a core each, outside the campaign's process tree."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        yield
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def servers_ready(results: Path) -> bool:
    """The campaign's servers are ready (its stages are next): the store has the ``ready`` event."""
    path = results / "results.sqlite"
    if not path.is_file():
        return False
    try:
        with open_campaign(path) as reader:
            return bool(reader.events("ready"))
    except (StoreError, sqlite3.OperationalError):  # the store is still being created
        return False


@pytest.mark.serial  # its burners take both cores: beside the lanes they hold back every timed test there
def test_a_stage_run_while_the_host_is_busy_with_other_work_is_flagged(tmp_path: Path) -> None:
    # the other work starts once the servers are ready: it covers every stage, and spares the rest of the
    # host (the other tests) the servers' start-up
    scenario = scenario_variant(tmp_path, "calibration", stages=STAGES, warmup={"requests": "none"})
    results, log = tmp_path / "results", tmp_path / "locust.log"
    proc = start_locust(["-f", str(ROOT / "locustfiles" / "mixed.py"), "--scenario", str(scenario),
                         "--results-dir", str(results)], log)
    try:
        deadline = time.monotonic() + 120
        while not servers_ready(results):
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.05)
        with burners(2):
            assert proc.wait(timeout=120) == 0, log.read_text()[-3000:]
    finally:
        stop_process(proc)
    for stage in summary_of(results)["trials"][0]["stages"]:
        assert stage["host"]["others_cores"] > 0.5, stage["host"]
        assert stage["host_busy"] and "other processes used" in stage["host_busy"]
