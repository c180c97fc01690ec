"""Ctrl-C, SIGTERM or SIGHUP during a campaign: what was measured stays, and every server the plugin started is gone."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest
from harness import LOCUST, ROOT, pid_alive, scenario_variant, start_locust, start_worker, stop_process

from bench_plugin.results.store import StoreError, open_campaign, read_samples
from bench_plugin.sharing.processes import free_port

pytestmark = pytest.mark.slow


def completed_stages(db_path: Path) -> int:
    """How many stages of the campaign being written to ``db_path`` have completed (0 before the store exists)."""
    if not db_path.exists():
        return 0
    try:
        with open_campaign(db_path) as reader:
            return sum(s.status == "completed" for t in reader.trials() for s in t.stages)
    except (StoreError, sqlite3.OperationalError):  # the store is still being created
        return 0


def wait_inside_second_stage(proc: subprocess.Popen[bytes], results: Path, log: Path) -> None:
    """Return 1 s into the second stage (the first one completed, the campaign still running)."""
    deadline = time.time() + 120
    while completed_stages(results / "results.sqlite") < 1 and time.time() < deadline and proc.poll() is None:
        time.sleep(0.2)
    assert proc.poll() is None, log.read_text()
    time.sleep(1.0)  # well inside the second stage


def assert_clean_stop(output: str) -> None:
    """No greenlet died of the Ctrl-C (gevent prints a traceback for each one that does)."""
    assert "Traceback" not in output, output
    assert "KeyboardInterrupt" not in output, output


def assert_kept(results: Path) -> None:
    """The completed stage and what the interrupted one measured are in the results; no server is left."""
    with open_campaign(results / "results.sqlite") as reader:
        trials = reader.trials()
        samples = read_samples(reader.db)  # every sample of the campaign
    stages = {s.index: s.status for t in trials for s in t.stages}
    assert stages[0] == "completed" and stages[1] == "interrupted"
    counts = Counter(sample.stage for sample in samples)
    assert counts[0] > 10 and counts.get(1, 0) > 0
    assert trials[0].status == "interrupted"
    for segment in (segment for trial in trials for segment in trial.segments):
        for where in segment.placement.values():
            assert where.pid is not None and not pid_alive(where.pid), where
    summary = json.loads((results / "summary.json").read_text())
    assert summary["status"]["status"] == "interrupted"
    assert summary["trials"][0]["stages"][0]["classes"]["llm"]["requests"] > 0


def assert_cut_short_shown(results: Path, output: str, status: str) -> None:
    """The stage cut short is shown with what it measured, marked: in the answer (after its status and cause) and in
    summary.md, whose per-stage tables have no empty one for it."""
    summary = json.loads((results / "summary.json").read_text())
    cut = next(s for t in summary["trials"] for s in t["stages"] if s["status"] == status)
    llm = cut["classes"]["llm"]["requests"]
    answer = output[output.rindex("bench_plugin: the answer for "):]
    lines = answer.splitlines()
    ending = summary["status"]
    assert lines[1].startswith(f"  {ending['status'].upper()} at ") and ending["reason"] in lines[1], lines[1]
    shown = [line for line in lines if "CUT SHORT" in line]
    assert len(shown) == 1 and f"stage {cut['index']} (" in shown[0] and f"CUT SHORT ({status})" in shown[0], answer
    assert f"llm {llm} requests" in shown[0], (shown, llm)
    md = (results / "summary.md").read_text()
    section = md.split("## Stages cut short", 1)[1]
    assert f"| {cut['index']} {cut['name']}: " in section and f" | llm | {llm} | " in section, section
    assert "offered \n" not in md  # no heading of a stage without figures over repeats (nor its empty table)


STOPPED_BY = {signal.SIGINT: "Ctrl-C", signal.SIGTERM: "SIGTERM", signal.SIGHUP: "SIGHUP"}
"""How the campaign's reason names each stop signal."""


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name)
def test_a_stop_signal_keeps_completed_stages_and_stops_servers(tmp_path: Path, no_leftover_servers: None,
                                                                signum: signal.Signals) -> None:
    """SIGTERM is what Kubernetes, systemd and ``docker stop`` send, SIGHUP what a closed ssh session does: each
    stops a headless campaign as Ctrl-C does (before, both killed it at once, with no summary), and the exit
    status is 128 + the signal's number, as a shell reports a process the signal ended."""
    scenario = scenario_variant(tmp_path, "short", repeats=1)
    results, log = tmp_path / "results", tmp_path / "locust.log"
    proc = start_locust(["-f", "locustfiles/mixed.py", "--scenario", str(scenario), "--results-dir", str(results),
                         "--arm", "shared", "--stage-duration", "4"], log)
    wait_inside_second_stage(proc, results, log)
    proc.send_signal(signum)
    code = proc.wait(timeout=60)
    output = log.read_text()
    assert code == 128 + signum, output
    assert_clean_stop(output)
    assert f"campaign interrupted (the run was stopped ({STOPPED_BY[signum]}))" in output, output
    assert_kept(results)
    assert_cut_short_shown(results, output, "interrupted")


CTRL_C_WHILE_STARTING = '''
import os
import signal

import gevent
from locust import events

from bench_plugin import ASRUser, CampaignShape, EmbeddingUser, LLMUser, add_arguments, register

__all__ = ["ASRUser", "CampaignShape", "EmbeddingUser", "LLMUser"]


def starting(environment, **_):
    register(environment)
    os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C while the run is still being set up (a resume, a slow start)
    gevent.sleep(1.0)  # and the main greenlet busy with it, not yet waiting for the test


events.init_command_line_parser.add_listener(add_arguments)
events.init.add_listener(starting)
'''


def test_ctrl_c_while_a_headless_run_starts_stops_it_once_started(tmp_path: Path, no_leftover_servers: None) -> None:
    """A Ctrl-C before the headless test has started (Locust does not catch one there: thrown into the main greenlet
    then, it killed the process with a traceback and no summary) is noted, and stops the campaign as soon as it
    starts: exit 130, the campaign interrupted by Ctrl-C, its summary written, no server left."""
    scenario = scenario_variant(tmp_path, "short", repeats=1)
    locustfile = tmp_path / "starting.py"
    locustfile.write_text(CTRL_C_WHILE_STARTING)
    results, log = tmp_path / "results", tmp_path / "locust.log"
    proc = start_locust(["-f", str(locustfile), "--scenario", str(scenario), "--results-dir", str(results),
                         "--arm", "shared", "--stage-duration", "4"], log)
    try:
        code = proc.wait(timeout=120)
    finally:
        stop_process(proc)
    output = log.read_text()
    assert code == 128 + signal.SIGINT, output
    assert_clean_stop(output)
    assert "SIGINT: the run stops as soon as it has started (Ctrl-C again to force it)" in output, output
    assert "campaign interrupted (the run was stopped (Ctrl-C) before the first trial)" in output, output
    summary = json.loads((results / "summary.json").read_text())
    assert summary["status"] == {**summary["status"], "status": "interrupted",
                                 "reason": "the run was stopped (Ctrl-C) before the first trial"}
    assert not summary["trials"] or all(s["status"] != "completed" for t in summary["trials"] for s in t["stages"])


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name)
def test_a_stop_signal_to_a_web_ui_run(tmp_path: Path, no_leftover_servers: None, signum: signal.Signals) -> None:
    """With the web UI (here started at once by --autostart), Locust's own SIGTERM handler stops the run; SIGHUP,
    which Locust leaves to kill the process, stops it as Ctrl-C does. Either way the summary is written."""
    scenario = scenario_variant(tmp_path, "short", repeats=1)
    results, log = tmp_path / "results", tmp_path / "locust.log"
    with open(log, "wb") as fh:
        proc = subprocess.Popen([LOCUST, "-f", "locustfiles/mixed.py", "--scenario", str(scenario), "--results-dir",
                                 str(results), "--arm", "shared", "--stage-duration", "4", "--autostart",
                                 "--web-host", "127.0.0.1", "--web-port", str(free_port()), "--no-report"],
                                cwd=ROOT, stdout=fh, stderr=subprocess.STDOUT,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        wait_inside_second_stage(proc, results, log)
        proc.send_signal(signum)
        code = proc.wait(timeout=60)
    finally:
        stop_process(proc)
    output = log.read_text()
    assert code == 128 + signum, output
    assert_clean_stop(output)
    assert f"campaign interrupted (the run was stopped ({STOPPED_BY[signum]}))" in output, output
    assert_kept(results)


def assert_every_sent_sample_arrived(results: Path) -> None:
    """The master waited for the worker's last report: every request it says it sent has its sample stored."""
    with open_campaign(results / "results.sqlite") as reader:
        event = reader.events("final_accounting")[0].detail
        stored = Counter((s.workload, s.worker) for s in reader.samples(1)
                         if (s.segment, s.stage) == (event["segment"], event["stage"]))
    for name, shares in event["shares"].items():
        for worker, share in shares.items():
            assert share["sent"] is not None and share["sent"] == share["received"] == stored[(name, worker)], (
                name, share)


def master_with_a_worker(results: Path, log: Path, worker_log: Path, stage_s: int
                         ) -> tuple[subprocess.Popen[bytes], subprocess.Popen[bytes]]:
    """A headless master running scenarios/distributed.yaml with ``stage_s``-second stages, and its one worker."""
    port = free_port()
    worker = start_worker(port, worker_log)
    proc = start_locust(["-f", "locustfiles/mixed.py", "--scenario", str(ROOT / "scenarios" / "distributed.yaml"),
                         "--results-dir", str(results), "--stage-duration", str(stage_s), "--master",
                         "--master-bind-host", "127.0.0.1", "--master-bind-port", str(port),
                         "--expect-workers", "1", "--expect-workers-max-wait", "60"], log)
    return proc, worker


@pytest.mark.parametrize("order", ["together", "worker-first"])
def test_sigint_to_master_and_worker(tmp_path: Path, no_leftover_servers: None, order: str) -> None:
    """Ctrl-C in a terminal reaches every process of its group: the master and its worker alike.

    A worker that left SIGINT to Python died with a KeyboardInterrupt traceback from whichever
    request greenlet was running. ``worker-first``: the worker has quit and the master's Locust is
    already stopping the test when the master's own Ctrl-C comes; thrown into its main greenlet then,
    it cut the shutdown short with a traceback (exit -2) instead of ending the stop under way.
    """
    results, log, worker_log = tmp_path / "results", tmp_path / "master.log", tmp_path / "worker.log"
    proc, worker = master_with_a_worker(results, log, worker_log, stage_s=4)
    try:
        wait_inside_second_stage(proc, results, log)
        worker.send_signal(signal.SIGINT)
        if order == "worker-first":
            deadline = time.time() + 30
            while "The last worker quit" not in log.read_text() and time.time() < deadline:
                time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=60)
    finally:
        stop_process(proc)
        worker_code = stop_process(worker, timeout=30)
    output, worker_output = log.read_text(), worker_log.read_text()
    assert code == 130, output
    assert worker_code != -9, worker_output  # it quit by itself, not by stop_process's SIGKILL
    assert_clean_stop(output)
    assert_clean_stop(worker_output)
    assert "campaign interrupted" in output
    assert_kept(results)
    assert_every_sent_sample_arrived(results)


def test_a_killed_worker_fails_the_campaign_saying_so(tmp_path: Path, no_leftover_servers: None) -> None:
    """The only worker is killed (SIGKILL: no goodbye) mid-stage. Locust's master stops the test once it misses the
    worker's heartbeats; the campaign says it failed, when and why (that worker, lost), shows what the cut-short stage
    measured, and leaves no server behind."""
    results, log, worker_log = tmp_path / "results", tmp_path / "master.log", tmp_path / "worker.log"
    proc, worker = master_with_a_worker(results, log, worker_log, stage_s=6)
    try:
        wait_inside_second_stage(proc, results, log)
        worker.kill()
        code = proc.wait(timeout=90)
    finally:
        stop_process(proc)
        stop_process(worker)
    output = log.read_text()
    assert code == 2, output
    assert_clean_stop(output)
    summary = json.loads((results / "summary.json").read_text())
    status = summary["status"]
    assert status["status"] == "failed" and status["reason"].startswith("every worker was lost (worker "), status
    assert "no heartbeat for 3 s" in status["reason"], status  # killed: it stopped answering, it did not quit
    assert f"campaign failed: {status['reason']}" in output
    assert_cut_short_shown(results, output, "interrupted")
    with open_campaign(results / "results.sqlite") as reader:
        for segment in (segment for trial in reader.trials() for segment in trial.segments):
            for where in segment.placement.values():
                assert where.pid is not None and not pid_alive(where.pid), where


def test_a_worker_that_quits_interrupts_the_campaign_saying_which(tmp_path: Path, no_leftover_servers: None) -> None:
    """One of two workers is stopped on purpose (SIGTERM: it says goodbye) mid-stage. Its share of the stage is
    missing, so the campaign cannot go on; but nothing failed: the stage and the campaign are interrupted, the
    cause names the worker that quit, and the master stops by itself with what was measured kept."""
    port = free_port()
    results, log = tmp_path / "results", tmp_path / "master.log"
    workers = [start_worker(port, tmp_path / f"worker-{n}.log") for n in (1, 2)]
    proc = start_locust(["-f", "locustfiles/mixed.py", "--scenario", str(ROOT / "scenarios" / "distributed.yaml"),
                         "--results-dir", str(results), "--stage-duration", "6", "--master",
                         "--master-bind-host", "127.0.0.1", "--master-bind-port", str(port),
                         "--expect-workers", "2", "--expect-workers-max-wait", "60"], log)
    try:
        wait_inside_second_stage(proc, results, log)
        workers[0].send_signal(signal.SIGTERM)
        code = proc.wait(timeout=90)
    finally:
        stop_process(proc)
        for worker in workers:
            stop_process(worker)
    output = log.read_text()
    assert code == 130, output
    assert_clean_stop(output)
    status = json.loads((results / "summary.json").read_text())["status"]
    assert status["status"] == "interrupted" and " quit mid-stage; the campaign stopped there" in status["reason"]
    assert_cut_short_shown(results, output, "interrupted")
