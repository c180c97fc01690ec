"""CPU affinity on the local backend: the pins it plans, what it refuses before anything starts, real
servers pinned (every thread, read from /proc), and a campaign that records and reports the cores.

The planning and refusal tests plan for a given host (16 cores on two NUMA nodes), as the GPU tests
plan for given devices; the rest pin real processes on this host (cores 0 and 1 at least).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from harness import LOCUST, ROOT, run_locust, scenario_variant, server_processes
from sharing_testlib import CLASSES, CPU, backend

from bench_plugin.scenario import apply_overrides, format_cpulist, parse_cpulist
from bench_plugin.sharing.affinity import HostCpus, host_cpus, read_cores
from bench_plugin.sharing.base import ApplyError
from bench_plugin.sharing.local import LocalBackend
from bench_plugin.sharing.manual import ManualBackend

SIXTEEN = HostCpus(frozenset(range(16)), {0: frozenset(range(8)), 1: frozenset(range(8, 16))}, None)
"""The H200 host of the later campaign, as far as this matters: 16 cores, here on two NUMA nodes."""

THREADS = """
import sys, threading, time
for _ in range(3):
    threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
open(sys.argv[1], "w").write("up")
time.sleep(60)
"""
"""A server stand-in for pinning only: starts three threads, says it is up, waits to be stopped."""


def arms(**affinity: Any) -> list[dict[str, Any]]:
    return [{"name": "control", "control": True}, {"name": "x", "sharing": "time-slicing", "cpu_affinity": affinity}]


def planned(tmp_path: Path, host: HostCpus, **affinity: Any) -> LocalBackend:
    b = backend(tmp_path, CPU, arms(**affinity))
    b.host_cpus = host
    return b


def refused(b: LocalBackend) -> str:
    with pytest.raises(ApplyError) as info:
        b.check(b.scenario.arm("x"))
    return str(info.value)


def thread_cores(pid: int) -> set[str]:
    """The Cpus_allowed_list of every thread of ``pid`` (empty if it is gone)."""
    found = set()
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            status = (task / "status").read_text()
        except OSError:
            continue
        found |= {line.split(":", 1)[1].strip() for line in status.splitlines() if line.startswith("Cpus_allowed_list")}
    return found


def wait_for(path: Path, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


# -- planning and refusals, for a given host ---------------------------------------------------------------------

def test_each_class_gets_its_own_cores_and_a_numa_node_alone_means_its_allowed_cores(tmp_path: Path) -> None:
    b = planned(tmp_path, replace(SIXTEEN, allowed=frozenset(range(12))),
                llm="0-7", embedding={"numa_node": 1}, asr={"cpus": "2-3", "numa_node": 0})
    b.check(b.scenario.arm("x"))
    plans = b.plans(b.scenario.arm("x"), CLASSES)
    pins = {name: plan.pin for name, plan in plans.items()}
    assert {n: (format_cpulist(p.cores), p.numa_node) for n, p in pins.items() if p} == {
        "llm": ("0-7", None), "embedding": ("8-11", 1), "asr": ("2-3", 0)}
    # without numactl nothing binds memory, and the command line is the server's own
    assert all(p is not None and p.membind is None and p.prefix() == [] for p in pins.values())
    assert b.plans(b.scenario.arm("control"), CLASSES)["llm"].pin is None


def test_numactl_binds_the_memory_of_a_class_given_a_numa_node(tmp_path: Path) -> None:
    b = planned(tmp_path, replace(SIXTEEN, numactl="/usr/bin/numactl"), llm={"numa_node": 1}, embedding="0-3")
    plans = b.plans(b.scenario.arm("x"), CLASSES)
    llm, embedding = plans["llm"].pin, plans["embedding"].pin
    assert llm is not None and llm.prefix() == ["/usr/bin/numactl", "--membind=1"]
    assert embedding is not None and embedding.prefix() == []  # cores alone: no node to bind memory to


@pytest.mark.parametrize(("host", "affinity", "message"), [
    (SIXTEEN, {"llm": "99"}, "arm 'x': cpu_affinity.llm.cpus 99: core(s) 99 not in the cores this process may use "
                             "(allowed: 0-15, os.sched_getaffinity)"),
    (replace(SIXTEEN, allowed=frozenset(range(4))), {"embedding": "2-5"},
     "arm 'x': cpu_affinity.embedding.cpus 2-5: core(s) 4-5 not in the cores this process may use (allowed: 0-3"),
    (SIXTEEN, {"asr": {"numa_node": 7}}, "arm 'x': cpu_affinity.asr.numa_node 7: this host has no NUMA node 7 "
                                         "(nodes: 0, 1)"),
    (SIXTEEN, {"llm": {"cpus": "6-9", "numa_node": 0}},
     "arm 'x': cpu_affinity.llm.cpus 6-9: not all on numa node 0 (its cores: 0-7; outside it: 8-9)"),
    (replace(SIXTEEN, allowed=frozenset(range(8))), {"llm": {"numa_node": 1}},
     "arm 'x': cpu_affinity.llm.numa_node 1: none of its cores (8-15) is one this process may use (allowed: 0-7)"),
    (replace(SIXTEEN, numa_nodes={}), {"llm": {"numa_node": 0}},
     "arm 'x': cpu_affinity.llm.numa_node 0: this host has no NUMA node 0 (nodes: none under /sys/devices/system/"),
])
def test_what_this_host_cannot_apply_is_refused_naming_arm_class_and_value(
    tmp_path: Path, host: HostCpus, affinity: dict[str, Any], message: str
) -> None:
    assert refused(planned(tmp_path, host, **affinity)).startswith(message)


def test_the_manual_backend_refuses_different_cores_for_classes_one_process_serves(tmp_path: Path) -> None:
    # the manual backend starts nothing: cpu_affinity labels what the user did, and one server at one URL
    # cannot have run on two sets of cores
    s = apply_overrides(backend(tmp_path, CPU, arms(llm="0", embedding="1")).scenario, tmp_path, arm="x")
    one = {name: "http://127.0.0.1:8000" for name in CLASSES}
    with pytest.raises(ApplyError) as info:
        ManualBackend(s, {**one, "embedding": "http://127.0.0.1:8000/"}).check(s.arm("x"))
    assert str(info.value).startswith("arm 'x': classes llm and embedding are served by one process "
                                      "(http://127.0.0.1:8000), but cpu_affinity gives llm cpus 0 and embedding cpus 1")
    with pytest.raises(ApplyError, match="gives llm cpus 0 and asr no cpu_affinity"):
        ManualBackend(s, {**one, "embedding": "http://127.0.0.1:8001"}).check(s.arm("x"))
    ManualBackend(s, {"llm": "http://a:1", "embedding": "http://b:1", "asr": "http://c:1"}).check(s.arm("x"))


def test_this_hosts_cpus_are_read_from_the_kernel() -> None:
    host = host_cpus()
    assert host.allowed == os.sched_getaffinity(0)
    node0 = Path("/sys/devices/system/node/node0/cpulist")
    if node0.exists():
        assert host.numa_nodes[0] == parse_cpulist(node0.read_text())
    assert read_cores(os.getpid()) == os.sched_getaffinity(0)
    assert read_cores(2**22 + 1) is None  # past pid_max: no such process


# -- real processes on this host ---------------------------------------------------------------------------------

def standin_servers(tmp_path: Path) -> dict[str, dict[str, Any]]:
    return {name: {"kind": "command", "command": ["{python}", "-c", THREADS, str(tmp_path / f"up-{name}")]}
            for name in CLASSES}


def test_apply_pins_every_thread_of_each_server_and_records_what_proc_says(tmp_path: Path) -> None:
    b = backend(tmp_path, CPU, arms(llm="0", embedding={"cpus": "1", "numa_node": 0}), standin_servers(tmp_path))
    x = b.scenario.arm("x")
    b.check(x)
    try:
        placement = b.apply(x, CLASSES, 1, 0)
        for name in CLASSES:
            wait_for(tmp_path / f"up-{name}")
        got = {name: placement.classes[name] for name in CLASSES}
        assert {n: thread_cores(p.pid or 0) for n, p in got.items()} == {
            "llm": {"0"}, "embedding": {"1"}, "asr": {format_cpulist(os.sched_getaffinity(0))}}
        assert [len(list(Path(f"/proc/{p.pid}/task").iterdir())) for p in got.values()] == [4, 4, 4]
        assert (got["llm"].cpus, got["llm"].numa_node, got["llm"].numa_membind) == ("0", None, None)
        assert (got["embedding"].cpus, got["embedding"].numa_node) == ("1", 0)
        assert got["embedding"].numa_membind is (b.host_cpus.numactl is not None)
        assert got["asr"].cpus == format_cpulist(os.sched_getaffinity(0))  # unpinned: what it inherited
        stored = placement.to_json()
        assert stored["llm"]["cpus"] == "0" and "numa_node" not in stored["llm"]
        memory = "bound" if b.host_cpus.numactl else "not bound (no numactl)"
        assert f"# cpus 1, numa node 0, memory {memory}" in Path(got["embedding"].log or "").read_text()
    finally:
        b.release()


def test_a_pin_past_the_allowed_cores_fails_the_start_in_one_line(tmp_path: Path) -> None:
    # what check() refuses beforehand, forced through: refused before the server's process is forked
    b = backend(tmp_path, CPU, arms(llm="4000"), standin_servers(tmp_path))
    with pytest.raises(ApplyError) as info:
        b.apply(b.scenario.arm("x"), CLASSES, 1, 0)
    assert str(info.value) == ("arm 'x': could not start: llm's server cannot be pinned to cpus 4000: not all among "
                               f"the cores this process may use ({format_cpulist(os.sched_getaffinity(0))})")
    assert b.running == [] and not (tmp_path / "up-embedding").exists()


def test_with_numactl_the_server_runs_under_its_membind(tmp_path: Path) -> None:
    # numactl is not installed on every host: a stand-in records its arguments and runs the rest, as
    # numactl does once it has set the memory policy
    record = tmp_path / "numactl-args"
    numactl = tmp_path / "numactl"
    numactl.write_text(f'#!/bin/sh\necho "$@" > {record}\nshift\nexec "$@"\n')
    numactl.chmod(0o755)
    b = backend(tmp_path, CPU, arms(llm={"cpus": "0", "numa_node": 0}), standin_servers(tmp_path))
    b.host_cpus = replace(b.host_cpus, numactl=str(numactl), numa_nodes={0: b.host_cpus.allowed})
    try:
        placement = b.apply(b.scenario.arm("x"), ["llm"], 1, 0)
        wait_for(tmp_path / "up-llm")
        llm = placement.classes["llm"]
        assert llm.command is not None and llm.command[:2] == [str(numactl), "--membind=0"]
        assert record.read_text().split()[0] == "--membind=0"
        assert (llm.numa_membind, thread_cores(llm.pid or 0)) == (True, {"0"})
    finally:
        b.release()


# -- through the real locust command ------------------------------------------------------------------------------

def calibration(tmp_path: Path, arms: list[dict[str, Any]]) -> Path:
    return scenario_variant(tmp_path, "calibration", arms=arms, allow_multiple_changes=False,
                            stages=[{"duration_s": 1.5, "load": {"llm": 4, "embedding": 4}}])


def watch_servers(proc: subprocess.Popen[bytes], under: Path, timeout: float = 240) -> dict[str, set[str]]:
    """While the campaign runs: class -> the Cpus_allowed_list of every thread of its servers, as /proc says."""
    seen: dict[str, set[str]] = {}
    deadline = time.monotonic() + timeout
    while proc.poll() is None:
        assert time.monotonic() < deadline, "the campaign did not end"
        for pid, cmd in server_processes(under).items():
            name = "llm" if "synthetic-llm" in cmd else "embedding"
            seen.setdefault(f"{name} {pid}", set()).update(thread_cores(pid))
        time.sleep(0.1)
    return seen


def test_a_campaign_pins_each_class_and_records_and_reports_its_cores(tmp_path: Path) -> None:
    path = calibration(tmp_path, [{"name": "disjoint", "control": True, "sharing": "time-slicing",
                                   "cpu_affinity": {"llm": 0, "embedding": 1}}])
    results = tmp_path / "results"
    log = tmp_path / "locust.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([LOCUST, "--headless", "--only-summary", "-f", "locustfiles/mixed.py", "--scenario",
                                 str(path), "--results-dir", str(results)], cwd=ROOT, stdout=out,
                                stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    seen = watch_servers(proc, tmp_path)
    assert proc.returncode == 0, log.read_text()[-3000:]

    [trial] = json.loads((results / "summary.json").read_text())["trials"]
    where = trial["placement"]
    assert {n: (w["cpus"], w.get("numa_node")) for n, w in where.items()} == {"llm": ("0", None),
                                                                              "embedding": ("1", None)}
    # every thread of each server, seen in /proc while the campaign ran, kept to the cores recorded
    assert seen[f"llm {where['llm']['pid']}"] == {"0"}, seen
    assert seen[f"embedding {where['embedding']['pid']}"] == {"1"}, seen
    report = (results / "report.md").read_text()
    assert "| llm | cpu | 0 |" in report and "| embedding | cpu | 1 |" in report  # its Servers table, as report.html
    html = (results / "report.html").read_text()
    assert "<th>device</th><th>cpus</th>" in html
    assert "<td>llm</td><td>cpu</td><td>0</td>" in html and "<td>embedding</td><td>cpu</td><td>1</td>" in html


def refusal(tmp_path: Path, affinity: dict[str, Any]) -> tuple[int, str]:
    path = calibration(tmp_path, [{"name": "pinned", "control": True, "sharing": "time-slicing",
                                   "cpu_affinity": affinity}])
    done = run_locust(["-f", "locustfiles/mixed.py", "--scenario", str(path), "--results-dir",
                       str(tmp_path / "results")], timeout=120)
    return done.returncode, done.stdout


@pytest.mark.parametrize(("affinity", "message"), [
    ({"llm": 99}, "arm 'pinned': cpu_affinity.llm.cpus 99: core(s) 99 not in the cores this process may use"),
    ({"embedding": "3-1"}, "arms.0.cpu_affinity.embedding.cpus: range '3-1' runs backwards; write it low-high "
                           "(got '3-1')"),
    ({"llm": {"cpus": "0", "numa_node": 7}}, "arm 'pinned': cpu_affinity.llm.numa_node 7: this host has no "
                                             "NUMA node 7"),
])
def test_a_campaign_refuses_in_one_line_before_any_server_starts(
    tmp_path: Path, affinity: dict[str, Any], message: str
) -> None:
    code, output = refusal(tmp_path, affinity)
    assert code != 0 and "Traceback" not in output, output
    errors = [line for line in output.splitlines() if line.startswith("bench_plugin: error:")]
    assert len(errors) == 1 and message in errors[0], output
    assert str(tmp_path / "scenario.yaml") in errors[0]
    assert not list(tmp_path.glob("results/**/trial-*.log")) and not server_processes(tmp_path)


if __name__ == "__main__":  # pragma: no cover - for running one test by hand
    sys.exit(pytest.main([__file__, "-q"]))
