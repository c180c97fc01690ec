"""A server that stops serving (its streams never end, it hangs, it exits) is never read as the arm's capacity.

Real processes: the ``locust`` command against tests/quirky_server.py, which answers readiness as usual and
then streams for ever (``--endless slow``: a token every few ms; ``fast``: 1 MB events without a pause) or
exits (``--die-after``). The campaign must end on its own within its bounds, fail (exit 2) with one line
saying which server and what was seen, keep every sample it measured (each one a recorded error), mark the
stage ``invalid`` so no boundary is read from it, and leave no server process behind.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from harness import ROOT, quirky, run_locust, scenario_variant, server_processes

from bench_plugin.results.store import open_campaign, read_samples

pytestmark = pytest.mark.slow

LLM = {"model": "bench-synthetic", "requests": {"count": 4, "input_tokens": 8, "output_tokens": 8, "seed": 1},
       "slo": {"p95_ms": 1000}, "request_timeout_s": 2, "fixed_output": False}


def campaign(tmp_path: Path, url: str | None, warmup: str, llm: dict[str, object] = LLM,
             duration_s: float = 3) -> tuple[int, str, Path, float]:
    """One stage of llm at 2 req/s (manual backend at ``url``, or the class's own server when None): the exit
    code, the output, the results folder and how long the run took."""
    scenario = scenario_variant(tmp_path, "calibration", classes={"llm": llm}, readiness_timeout_s=20,
                                warmup={"requests": warmup, "timeout_s": 4},
                                stages=[{"duration_s": duration_s, "load": {"llm": 2}}])
    results = tmp_path / "results"
    args = ["-f", "locustfiles/mixed.py", "--scenario", str(scenario), "--results-dir", str(results)]
    args += ["--host", url, "--arm", "synthetic"] if url else []
    began = time.time()
    done = run_locust(args, timeout=180)
    return done.returncode, done.stdout, results, time.time() - began


def stage_rows(results: Path) -> tuple[list[tuple[str, str | None]], list[tuple[bool, str | None]]]:
    """(status, reason) of every stage, in order, and (ok, error) of every measured sample, as recorded."""
    with open_campaign(results / "results.sqlite") as reader:
        stages = [(s.status, s.reason) for trial in reader.trials() for s in trial.stages]
        samples = [(s.ok, s.error) for s in read_samples(reader.db) if s.stage >= 0]
    return stages, samples


@pytest.mark.parametrize("pace", ["slow", "fast"])
def test_streams_that_never_end_in_the_warm_up_stop_the_campaign_there(tmp_path: Path, pace: str) -> None:
    with quirky(tmp_path, "--endless", pace, "--endless-after", "1") as url:  # readiness is answered
        code, out, results, took = campaign(tmp_path, url, "shapes")
    assert "Traceback" not in out, out[-3000:]
    assert code == 2, out[-3000:]
    assert ("campaign failed: trial 1 (arm synthetic, repeat 1): warm-up: every one of the 1 warm-up requests of "
            "llm failed (the first: WarmupTimeout: no whole reply within 2 s), and so did a probe sent after them (no "
            "answer in time), though readiness had just been answered: the server stopped serving") in out, out[-3000:]
    assert took < 60, took  # the warm-up's requests end at their timeout (before: the warm-up never ended)
    summary = json.loads((results / "summary.json").read_text())
    assert summary["status"]["status"] == "failed" and "warm-up" in summary["status"]["reason"]
    assert stage_rows(results) == ([], [])  # nothing was measured, so no boundary either
    assert "No stage of this arm could be judged" in out


@pytest.mark.parametrize("pace", ["slow", "fast"])
def test_streams_that_never_end_in_a_stage_are_timeouts_and_no_boundary(tmp_path: Path, pace: str) -> None:
    with quirky(tmp_path, "--endless", pace, "--endless-after", "1") as url:
        code, out, results, took = campaign(tmp_path, url, "none")
    assert "Traceback" not in out, out[-3000:]
    assert code == 2, out[-3000:]
    assert ("stage 0: the llm server answered none of the 6 requests of the stage successfully, nor a probe sent "
            "after it (no answer in time): it stopped serving, which is not a capacity boundary") in out, out[-3000:]
    assert took < 60, took
    stages, samples = stage_rows(results)
    assert [status for status, _ in stages] == ["invalid"], stages
    assert samples == [(False, "timeout")] * 6  # 2 req/s x 3 s, each one a timeout at 2 s: none lost
    stage = json.loads((results / "summary.json").read_text())["trials"][0]["stages"][0]
    assert stage["status"] == "invalid" and stage["classes"]["llm"]["errors"] == 6, stage
    assert "below the lowest" not in out  # not read as the arm's boundary


def test_a_warm_up_request_that_fails_alone_is_a_warning(tmp_path: Path) -> None:
    # the one warm-up request streams for ever, but the server answers the probe after it: the stage runs
    with quirky(tmp_path, "--endless", "slow", "--endless-after", "1", "--endless-count", "1") as url:
        code, out, results, _ = campaign(tmp_path, url, "shapes")
    assert code == 0, out[-3000:]
    assert "warm-up of llm: 1 of 1 requests failed (WarmupTimeout: no whole reply within 2 s)" in out, out[-3000:]
    stages, samples = stage_rows(results)
    assert [status for status, _ in stages] == ["completed"] and samples == [(True, None)] * 6, (stages, samples)


def test_a_server_that_exits_mid_stage_fails_the_campaign_with_its_exit_code_and_log(tmp_path: Path) -> None:
    # the local backend starts the server: readiness (1 chat) and the warm-up (1 shape) pass, then it exits
    llm = {**LLM, "server": {"kind": "command", "command": [
        "{python}", str(ROOT / "tests" / "quirky_server.py"), "--host", "{host}", "--port", "{port}",
        "--die-after", "4"]}}
    code, out, results, _ = campaign(tmp_path, None, "shapes", llm, duration_s=6)
    assert "Traceback" not in out, out[-3000:]
    assert code == 2, out[-3000:]
    assert "stage 0: the llm server exited (exit code 3; log " in out, out[-3000:]
    assert "quirky: dying on chat request 5" in out  # the server's last log lines are in the reason
    stages, samples = stage_rows(results)
    assert [status for status, _ in stages] == ["invalid"], stages
    assert samples[:2] == [(True, None), (True, None)], samples  # what it served before it died is kept
    assert all(ok or error == "connection" for ok, error in samples), samples
    assert server_processes(results) == {}, "a server was left running"
