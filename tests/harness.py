"""Test harness: run the real `locust` command, write scenario variants, find leftover servers."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests
import yaml

from bench_plugin.sharing.processes import free_port

ROOT = Path(__file__).resolve().parent.parent
LOCUST = str(Path(sys.executable).parent / "locust")

UP = ["spawn", "listening", "healthy", "ready", "route"]
"""A local disruption's new server's phases, then the front's move to it (sharing/restart.py)."""
RESTART_ORDER = {
    "rollout-restart": ["start", *UP, "stop", "stopped", "co-tenant", "end"],
    "restart": ["start", "refuse", "stop", "stopped", *UP, "co-tenant", "end"],
    "kill": ["start", "kill", "stopped", "refuse", *UP, "co-tenant", "end"],
}
"""The steps each kind of local disruption records, in order, for one class in a segment with another."""


def headless(args: list[str], report: bool) -> list[str]:
    """The `locust --headless` command line for ``args``: with ``--no-report`` unless the test reads the report
    (rendering it is most of a short campaign's CPU; the tests that check it ask for it)."""
    return [LOCUST, "--headless", "--only-summary", *([] if report else ["--no-report"]), *args]


def run_locust(args: list[str], timeout: float = 300, cwd: Path = ROOT,
               report: bool = False) -> subprocess.CompletedProcess[str]:
    """Run `locust --headless` with ``args`` to completion; stdout and stderr together in .stdout."""
    cmd = headless(args, report)
    return subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"}, check=False)


def start_locust(args: list[str], log: Path, cwd: Path = ROOT, report: bool = False) -> subprocess.Popen[bytes]:
    """Start `locust --headless` with ``args`` in the background, output to ``log``."""
    with open(log, "wb") as fh:
        return subprocess.Popen(headless(args, report), cwd=cwd, stdout=fh,
                                stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})


def start_worker(master_port: int, log: Path, *extra: str, cwd: Path = ROOT) -> subprocess.Popen[bytes]:
    """Start `locust --worker` for a master on loopback ``master_port``; it needs nothing but the locustfile.

    ``cwd`` comes first on the worker's import path: a directory holding another bench_plugin makes
    the worker run that one.
    """
    with open(log, "wb") as fh:
        return subprocess.Popen([LOCUST, "-f", str(ROOT / "locustfiles" / "mixed.py"), "--worker", "--master-host",
                                 "127.0.0.1", "--master-port", str(master_port), *extra], cwd=cwd, stdout=fh,
                                stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})


def stop_process(proc: subprocess.Popen[bytes], timeout: float = 10) -> int:
    """Wait for ``proc`` to end (SIGKILL after ``timeout`` s); its exit status."""
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return -9


def scenario_variant(tmp_path: Path, base: str, name: str = "scenario.yaml", **changes: Any) -> Path:
    """A copy of scenarios/<base>.yaml with top-level keys replaced, written under tmp_path."""
    data = yaml.safe_load((ROOT / "scenarios" / f"{base}.yaml").read_text())
    data.update(changes)
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def server_processes(campaigns_under: Path) -> dict[int, str]:
    """PID -> command line of every running server of a campaign whose results are under ``campaigns_under``.

    The local backend marks each server with BENCH_PLUGIN_CAMPAIGN=<results dir>, so servers of other
    campaigns running on the same host at the same time are not mistaken for leftovers.
    """
    root = str(campaigns_under.resolve())
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        marker = b"BENCH_PLUGIN_CAMPAIGN="
        marks = [v[len(marker):].decode(errors="replace") for v in environ if v.startswith(marker)]
        if "bench_plugin.servers" in cmd and any(m.startswith(root) for m in marks):
            found[int(entry.name)] = cmd
    return found


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` is a live (not zombie) process."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


@dataclass(frozen=True)
class Campaign:
    """A finished campaign run by the real `locust --headless` command: its results folder and its output."""

    results: Path
    output: str


def run_campaign(directory: Path, scenario: str, *flags: str) -> Campaign:
    """scenarios/<scenario>.yaml run headless by `locust` with ``flags``, its results in ``directory``/results (must
    succeed)."""
    results = directory / "results"
    done = run_locust(["-f", "locustfiles/mixed.py", "--scenario", str(ROOT / "scenarios" / f"{scenario}.yaml"),
                       "--results-dir", str(results), *flags], timeout=600, report=True)
    assert done.returncode == 0, done.stdout[-3000:]
    return Campaign(results, done.stdout)


def busy_stages(summary: dict[str, Any]) -> list[str]:
    """Why the campaign's own self-check distrusts a stage: host busy with other work, generator behind."""
    return [f"trial {trial['id']} stage {stage['index']}: {reason}" for trial in summary["trials"]
            for stage in trial["stages"] for reason in (stage.get("host_busy"), stage.get("generator_limited"))
            if reason]


@contextmanager
def serving(cmd: list[str], log: Path, what: str, timeout: float = 60) -> Iterator[str]:
    """Start ``cmd`` (a server taking ``--port`` last) on a free loopback port, its output in ``log``, and wait
    until it answers /health: its base URL while it runs."""
    port = free_port()
    with open(log, "wb") as out:
        proc = subprocess.Popen([*cmd, "--port", str(port)], cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                if requests.get(url + "/health", timeout=1).status_code == 200:
                    break
            except requests.ConnectionError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"{what} did not answer /health: {log.read_text()[-2000:]}")
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@contextmanager
def synthetic_server(log: Path, *flags: str, timeout: float = 60) -> Iterator[str]:
    """A synthetic server (``python -m bench_plugin.servers synthetic`` with ``flags``) for every class on
    loopback, as a user's own server would be, its output in ``log``: its base URL while it runs."""
    with serving([sys.executable, "-m", "bench_plugin.servers", "synthetic", *flags], log, "the synthetic server",
                 timeout) as url:
        yield url


@contextmanager
def quirky(tmp_path: Path, *flags: str) -> Iterator[str]:
    """tests/quirky_server.py with ``flags`` on a free loopback port: its base URL while it runs."""
    with serving([sys.executable, str(ROOT / "tests" / "quirky_server.py"), *flags],
                 tmp_path / f"quirky-{len(list(tmp_path.glob('quirky-*.log')))}.log", "the quirky server", 30) as url:
        yield url


def manual_campaign(tmp_path: Path, url: str, classes: dict[str, Any], load: dict[str, float],
                    duration_s: float = 3) -> tuple[subprocess.CompletedProcess[str], Path]:
    """A one-arm, one-stage campaign of ``classes`` against the server at ``url`` (manual backend): the locust
    run and its results folder."""
    scenario = scenario_variant(tmp_path, "calibration", classes=classes, readiness_timeout_s=20,
                                stages=[{"duration_s": duration_s, "load": load}])
    results = tmp_path / "results"
    done = run_locust(["-f", "locustfiles/mixed.py", "--scenario", str(scenario), "--results-dir", str(results),
                       "--host", url, "--arm", "synthetic"], timeout=180)
    return done, results


def copy_of(campaign: Campaign, where: Path) -> Path:
    """A private copy of a shared campaign's results folder, for a test that writes into it."""
    target = where / campaign.results.name
    shutil.copytree(campaign.results, target)
    return target


SEARCH_CAMPAIGN = ROOT / "docs" / "results" / "h200-boundary" / "results.tar.gz"
"""A real adaptive-search campaign (H200: an exclusive control searching each class alone, shared arms
searching the mixed load; finished over 9 resumed device calls, the attempts cut short kept in the store's
superseded tables), committed as the tarball its last device call returned."""


def search_campaign_store(directory: Path) -> Path:
    """SEARCH_CAMPAIGN's results.sqlite unpacked under ``directory``: the results directory holding it."""
    import tarfile

    with tarfile.open(SEARCH_CAMPAIGN) as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith("/results.sqlite"))
        tar.extract(member, directory, filter="data")
    return (directory / member.name).parent


HOLDING_LOCUSTFILE = '''
import ctypes
import time

import gevent
from locust import events

from bench_plugin import ASRUser, CampaignShape, EmbeddingUser, LLMUser, add_arguments, register

__all__ = ["ASRUser", "CampaignShape", "EmbeddingUser", "LLMUser"]
LIBC = ctypes.CDLL(None)


def hog() -> None:
    """Burn the event loop's CPU 95 ms of every 100: a load generator with more work than its core."""
    while True:
        began = time.time()
        while time.time() - began < 0.095:
            pass
        gevent.sleep(0.005)


def hold_the_loop() -> None:
    """Sleep 30 ms in C every 100 ms: the loop stops, its CPU idles."""
    while True:
        LIBC.usleep(30_000)
        gevent.sleep(0.07)


started = []


def at_stage(stage: int, **_: object) -> None:
    if UNTIL_STAGE is not None and stage >= UNTIL_STAGE:
        for holder in started:
            holder.kill(block=False)
    elif stage >= FROM_STAGE and not started:
        started.append(gevent.spawn(HOLDER))


def wire(environment, **_: object) -> None:
    register(environment)
    environment.bench_plugin_events.stage_start.add_listener(at_stage)


events.init_command_line_parser.add_listener(add_arguments)
events.init.add_listener(wire)
'''


def holding_locustfile(tmp_path: Path, name: str, holder: str, from_stage: int = 0,
                       until_stage: int | None = None) -> Path:
    """A locustfile ``name``.py whose load generator runs ``holder`` on its event loop from stage ``from_stage`` on
    (until stage ``until_stage`` starts, if given): ``hog`` (burns 95 ms of every 100 in Python: more work than
    its core) or ``hold_the_loop`` (sleeps 30 ms of every 100 in C: the loop stops while its CPU idles)."""
    path = tmp_path / f"{name}.py"
    path.write_text(HOLDING_LOCUSTFILE + f"\nHOLDER = {holder}\nFROM_STAGE = {from_stage}\n"
                                         f"UNTIL_STAGE = {until_stage}\n")
    return path
