"""Host load with real processes: CPU burners in and outside this process's tree, on this (busy) host.

Other jobs share this machine, so no test assumes it idle: each compares the monitor's numbers with
the burners' own CPU (read from /proc/<pid>/stat or reported by the burner), within tick tolerances.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress

import psutil
import pytest

from bench_plugin.telemetry.hostload import (
    BUSY_STEAL_FRACTION,
    HostLoad,
    HostMonitor,
    ProcessTreeCpu,
    busy_reason,
    others_limit_cores,
    proc_children,
)

WINDOW_S = 1.5
TICK_TOLERANCE_CORES = 0.05
"""/proc counts CPU in 10 ms ticks: a few ticks at each end of a 1.5 s window."""

SPIN = "while True: pass"
BURN_S = 0.5
BURN_AFTER_GO = f"""
import os, sys, time
def burn(seconds):
    t0 = time.process_time()
    while time.process_time() - t0 < seconds:
        pass
burn({BURN_S})
print("ready", flush=True)
sys.stdin.readline()
t0 = time.process_time()
burn({BURN_S})
print(time.process_time() - t0, time.process_time(), os.getpid(), flush=True)
"""
"""Burns BURN_S CPU seconds, says ready, waits for a line on stdin, burns BURN_S more, prints
(CPU seconds since the line, total CPU seconds, pid) and exits."""

LEAVE_A_ZOMBIE = """
import subprocess, sys, time
subprocess.Popen([sys.executable, "-c", sys.argv[1]])
time.sleep(60)
"""
"""Starts BURN_AFTER_GO (given as argv[1]) and never waits for it: it stays a zombie while this runs."""


def cpu_s(pid: int) -> float:
    times = psutil.Process(pid).cpu_times()
    return float(times.user) + float(times.system)


def tree_cpu_s(*exclude: int) -> dict[int, float]:
    """CPU seconds so far of this process and of each live descendant outside ``exclude`` and theirs: what the
    monitor counts as own besides a test's burners (a session's servers that a lane started before the test)."""
    mine = psutil.Process()
    skip = set(exclude)
    for pid in exclude:
        with suppress(psutil.NoSuchProcess):
            skip |= {p.pid for p in psutil.Process(pid).children(recursive=True)}
    out = {mine.pid: cpu_s(mine.pid)}
    for proc in mine.children(recursive=True):
        if proc.pid not in skip:
            with suppress(psutil.NoSuchProcess):
                out[proc.pid] = cpu_s(proc.pid)
    return out


def used_since(before: dict[int, float], after: dict[int, float]) -> float:
    """The CPU seconds between two ``tree_cpu_s`` readings: one gone by the second adds nothing, one born meanwhile
    all it used."""
    return sum(after.get(pid, cpu) - cpu for pid, cpu in before.items()) + sum(
        cpu for pid, cpu in after.items() if pid not in before)


def kill(pid: int) -> None:
    with suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


@contextmanager
def child_burner() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen([sys.executable, "-c", SPIN])
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


@contextmanager
def detached_burner() -> Iterator[int]:
    """A burner started through a shell that exits at once: reparented away from this process."""
    shell = subprocess.Popen(["sh", "-c", f'"$0" -c "{SPIN}" >/dev/null 2>&1 & echo $!', sys.executable],
                             stdout=subprocess.PIPE, text=True)
    assert shell.stdout is not None
    pid = int(shell.stdout.readline())
    try:
        shell.wait()
        yield pid
    finally:
        kill(pid)


def measure(monitor: HostMonitor, pid: int | None = None) -> tuple[HostLoad, float]:
    """A window of WINDOW_S, and the cores that ``pid`` used over (slightly more than) it."""
    before = cpu_s(pid) if pid is not None else 0.0
    window = monitor.start()
    time.sleep(WINDOW_S)
    load = monitor.stop(window)
    used = cpu_s(pid) - before if pid is not None else 0.0
    return load, used / load.duration_s


def assert_consistent(load: HostLoad) -> None:
    assert load.cores is not None and load.cores == psutil.cpu_count()
    assert load.cpu_busy_cores is not None and load.own_cores is not None and load.others_cores is not None
    assert 0.0 <= load.cpu_busy_cores <= load.cores
    assert load.others_cores == pytest.approx(max(0.0, load.cpu_busy_cores - load.own_cores - load.extra_own_cores))
    assert load.steal_fraction is None or 0.0 <= load.steal_fraction <= 1.0
    assert load.load_avg_1m is not None and load.load_avg_1m >= 0.0
    assert load.reason == busy_reason(load)
    assert load.busy == (load.reason is not None)


def test_an_idle_window_gives_consistent_fields() -> None:
    load, _ = measure(HostMonitor())
    assert load.duration_s >= WINDOW_S
    assert_consistent(load)
    assert load.own_cores is not None and load.own_cores < 0.2
    assert load.extra_own_cores == 0.0
    assert set(load.model_dump()) == {"duration_s", "cores", "load_avg_1m", "cpu_busy_cores", "steal_fraction",
                                   "own_cores", "extra_own_cores", "others_cores", "busy", "reason"}


def test_a_child_burner_counts_as_own() -> None:
    with child_burner() as proc:
        time.sleep(0.2)
        tree = ProcessTreeCpu()
        load, burner_cores = measure(HostMonitor(tree), proc.pid)
        assert proc.pid in tree.pids()
    assert_consistent(load)
    assert load.own_cores is not None and load.cpu_busy_cores is not None
    assert burner_cores >= 0.25  # it ran, whatever else shares the host
    assert burner_cores - TICK_TOLERANCE_CORES <= load.own_cores <= burner_cores + 0.15
    assert load.own_cores <= load.cpu_busy_cores + TICK_TOLERANCE_CORES


def test_a_burner_outside_the_tree_counts_as_others_and_flags_busy() -> None:
    with detached_burner() as pid:
        assert psutil.Process(pid).ppid() != os.getpid()
        tree = ProcessTreeCpu()
        load, burner_cores = measure(HostMonitor(tree), pid)
        assert pid not in tree.pids()
    assert_consistent(load)
    assert load.own_cores is not None and load.others_cores is not None
    assert load.own_cores < 0.2
    assert load.others_cores >= burner_cores - load.own_cores - TICK_TOLERANCE_CORES
    assert load.busy
    assert load.reason is not None and load.reason.startswith("other processes used ")
    assert f"of {load.cores} cores (more than {others_limit_cores(load.cores):g})" in load.reason


def test_extra_own_cpu_is_not_others() -> None:
    with detached_burner() as pid:
        monitor = HostMonitor()
        before = cpu_s(pid)
        window = monitor.start()
        time.sleep(WINDOW_S)
        extra = cpu_s(pid) - before
        load = monitor.stop(window, extra_own_cpu_s=extra)
    assert_consistent(load)
    assert load.extra_own_cores == pytest.approx(extra / load.duration_s)
    assert load.extra_own_cores > 0.25


def _wait_zombie(pid: int) -> None:
    deadline = time.monotonic() + 10
    while psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline
        time.sleep(0.01)


def _exit_mid_window_command(how: str) -> list[str]:
    if how == "grandchild":  # a shell that waits for the burner: its CPU reaches us through the shell
        return ["sh", "-c", '"$0" -c "$1"; true', sys.executable, BURN_AFTER_GO]
    if how == "zombie_grandchild":  # a live child that leaves the exited burner unreaped
        return [sys.executable, "-c", LEAVE_A_ZOMBIE, BURN_AFTER_GO]
    return [sys.executable, "-c", BURN_AFTER_GO]


@pytest.mark.parametrize("how", ["reaped", "grandchild", "zombie_grandchild", "born_in_window"])
def test_a_child_that_exits_mid_window_still_counts(how: str) -> None:
    """Seen at the start and gone (or a zombie) at the end, or never seen at all: its CPU is counted.

    The burner uses CPU before the window too: counted twice (its last reading and its parent's
    reaped CPU), that would show.

    Under gevent (Locust's monkey-patching, as in the plugin) this process reaps an exited child at
    once (SIGCHLD), so a zombie is left by a child of ours instead.
    """
    tree = ProcessTreeCpu()
    monitor = HostMonitor(tree)
    own_before, middle_before = tree_cpu_s(), 0.0
    window = monitor.start() if how == "born_in_window" else None
    proc = subprocess.Popen(_exit_mid_window_command(how), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdin is not None and proc.stdout is not None
        assert proc.stdout.readline() == "ready\n"
        if window is None:
            own_before = tree_cpu_s(proc.pid)
            window = monitor.start()  # the burner waits on stdin, having used BURN_S already
            assert proc.pid in tree.pids()
            middle_before = cpu_s(proc.pid) if how == "zombie_grandchild" else 0.0
        proc.stdin.write("go\n")
        proc.stdin.flush()
        burned, total, burner = proc.stdout.readline().split()
        burned_s, total_s = float(burned), float(total)
        if how == "zombie_grandchild":
            _wait_zombie(int(burner))
        else:
            proc.wait()
        time.sleep(0.2)
        load = monitor.stop(window)
        # what else the tree used meanwhile: this process (a long pytest run may hold busy threads), the servers
        # a lane's session started (0.4 s more over a 3.7 s window once), and the live parent of the zombie
        others_in_tree_s = used_since(own_before, tree_cpu_s(proc.pid))
        if how == "zombie_grandchild":
            others_in_tree_s += cpu_s(proc.pid) - middle_before
    finally:
        proc.kill()
        proc.wait()
    assert_consistent(load)
    assert load.own_cores is not None
    in_window_s = (total_s if how == "born_in_window" else burned_s) + others_in_tree_s
    assert in_window_s - 0.05 <= load.own_cores * load.duration_s <= in_window_s + 0.25


def test_a_descendant_reparented_away_keeps_its_cpu_so_far_and_stops_counting() -> None:
    """The shell between us and the burner exits: the burner leaves the tree while it runs on."""
    shell = subprocess.Popen(["sh", "-c", f'"$0" -c "{SPIN}" >/dev/null 2>&1 & echo $!; read line',
                              sys.executable], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert shell.stdin is not None and shell.stdout is not None
    pid = int(shell.stdout.readline())
    try:
        tree = ProcessTreeCpu()
        time.sleep(0.5)
        first = tree.cpu_s()
        assert pid in tree.pids()
        shell.stdin.write("\n")
        shell.stdin.flush()
        shell.wait()
        second = tree.cpu_s()
        assert pid not in tree.pids()
        time.sleep(0.7)
        burner_before = cpu_s(pid)
        third = tree.cpu_s()
        time.sleep(0.7)
        burned = cpu_s(pid) - burner_before
        fourth = tree.cpu_s()
    finally:
        kill(pid)
        shell.kill()
        shell.wait()
    assert first is not None and second is not None and third is not None and fourth is not None
    assert first <= second <= third <= fourth
    assert burned > 0.1
    assert fourth - third < 0.1


def _load(cores: int | None, others: float | None, steal: float | None) -> HostLoad:
    return HostLoad(duration_s=2.0, cores=cores, load_avg_1m=1.0, cpu_busy_cores=others, steal_fraction=steal,
                    own_cores=0.0, extra_own_cores=0.0, others_cores=others, busy=False, reason=None)


def test_busy_reason_applies_the_rule() -> None:
    assert busy_reason(_load(2, 0.5, 0.0)) is None
    assert busy_reason(_load(2, 1.6, None)) == "other processes used 1.6 of 2 cores (more than 0.5)"
    assert busy_reason(_load(16, 3.9, 0.02)) is None
    assert busy_reason(_load(16, 4.25, 0.02)) == "other processes used 4.25 of 16 cores (more than 4)"
    assert busy_reason(_load(None, None, 0.25)) == "steal took 25% of CPU time (more than 10%)"
    both = busy_reason(_load(2, 0.54, BUSY_STEAL_FRACTION + 0.05))
    assert both == "other processes used 0.54 of 2 cores (more than 0.5); steal took 15% of CPU time (more than 10%)"


def test_proc_children_lists_what_psutil_finds_by_parent_pid() -> None:
    sleepers = [subprocess.Popen(["sleep", "30"]) for _ in range(3)]
    try:
        listed = proc_children(os.getpid())
        assert listed is not None
        assert {p.pid for p in sleepers} <= set(listed)
        assert set(listed) == {child.pid for child in psutil.Process().children()}
        assert proc_children(sleepers[0].pid) == []
    finally:
        for proc in sleepers:
            proc.kill()
            proc.wait()
