"""Processes of benchmarks/loadgen_capacity.py: each started pinned to a core, all stopped on any exit.

Every process the benchmark needs (the null server, bare Locust, the plugin's processes, py-spy)
is started through one ``Processes``, which pins it with ``taskset -c`` and, from ``close`` (a
``with`` block's end, whatever ended it), terminates whatever is still running: SIGTERM, then
SIGKILL after a grace period. ``CpuSampler`` reads the CPU time of every process from /proc a few
times a second, so the CPU a process (or its tree) used over any window (a stage) can be read
afterwards, and how much other programs used meanwhile.
"""

from __future__ import annotations

import bisect
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

ROOT = Path(__file__).resolve().parent.parent
"""The repository: every process runs here, with it first on PYTHONPATH (before what PYTHONPATH held: a host
that has its packages installed elsewhere, as the GPU host has them in /tmp/site)."""

TICKS_PER_S = os.sysconf("SC_CLK_TCK")


class Processes:
    """The processes one benchmark run started; ``close`` ends every one still running."""

    def __init__(self, logs: Path) -> None:
        self.logs = logs
        self.started: list[tuple[str, subprocess.Popen[bytes]]] = []
        logs.mkdir(parents=True, exist_ok=True)

    def __enter__(self) -> Processes:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def start(self, name: str, command: list[str], core: str,
              env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        """Start ``command`` pinned to CPU list ``core``, output to logs/<name>.log, in the repository."""
        path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
        environment = {**os.environ, "PYTHONPATH": path, "PYTHONUNBUFFERED": "1", **(env or {})}
        with open(self.logs / f"{name}.log", "wb") as log:
            proc = subprocess.Popen(["taskset", "-c", core, *command], cwd=ROOT, env=environment, stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        self.started.append((name, proc))
        return proc

    def wait(self, proc: subprocess.Popen[bytes], timeout_s: float) -> int:
        """``proc``'s exit status; RuntimeError naming it and its log's last line if it runs past ``timeout_s``."""
        try:
            return proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.stop(proc)
            raise RuntimeError(f"{self.name(proc)} ran past {timeout_s:g} s ({self.last_line(proc)})") from None

    def name(self, proc: subprocess.Popen[bytes]) -> str:
        """The name ``proc`` was started under."""
        return next(name for name, p in self.started if p is proc)

    def last_line(self, proc: subprocess.Popen[bytes]) -> str:
        """The last non-empty line of ``proc``'s log (for one-line errors)."""
        lines = [ln for ln in (self.logs / f"{self.name(proc)}.log").read_text(errors="replace").splitlines() if ln]
        return lines[-1][:200] if lines else "no output"

    def log(self, proc: subprocess.Popen[bytes]) -> Path:
        """Where ``proc``'s output goes."""
        return self.logs / f"{self.name(proc)}.log"

    @staticmethod
    def stop(proc: subprocess.Popen[bytes], grace_s: float = 10.0) -> None:
        """SIGTERM ``proc``'s process group, SIGKILL after ``grace_s``; returns once it has exited."""
        if proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        except ProcessLookupError:  # it exited between poll() and the signal: nothing left to stop
            proc.wait()

    def close(self) -> None:
        """Stop every process still running, newest first."""
        for _, proc in reversed(self.started):
            self.stop(proc)


PROBE = "import time\nt = time.perf_counter()\nn = 0\nwhile n < 5_000_000: n += 1\nprint(time.perf_counter() - t)"
"""A fixed amount of pure-Python work; it prints the seconds it took."""


def cpu_probe(core: str, busy: str | None = None) -> float:
    """Seconds PROBE takes pinned to ``core``, with a busy loop pinned to ``busy`` meanwhile if given.

    On a machine whose cores are independent the two figures match; where they share one physical
    CPU (a virtual machine's vCPUs on one host thread), work on one core slows the other.
    """
    spinner = None
    if busy is not None:
        spinner = subprocess.Popen(["taskset", "-c", busy, sys.executable, "-c", "while True: pass"])
    try:
        done = subprocess.run(["taskset", "-c", core, sys.executable, "-c", PROBE], capture_output=True, text=True,
                              check=True, timeout=60)
    finally:
        if spinner is not None:
            spinner.kill()
            spinner.wait()
    return float(done.stdout)


PF_KTHREAD = 0x00200000
"""/proc/PID/stat's flag of a kernel thread: its CPU (the network stack's, on loopback) is nobody's program."""


@dataclass(frozen=True)
class Proc:
    """One process as /proc/PID/stat shows it."""

    parent: int
    cpu_s: float
    """User plus system CPU seconds so far."""
    kernel: bool


def processes() -> dict[int, Proc]:
    """Every process now (those that end while being read are left out)."""
    out = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                out[int(entry.name)] = Proc(int(fields[1]), (int(fields[11]) + int(fields[12])) / TICKS_PER_S,
                                            bool(int(fields[6]) & PF_KTHREAD))
            except (OSError, IndexError, ValueError):  # gone between the listing and the read
                continue
    return out


def steal() -> dict[int, float]:
    """Core -> the seconds the hypervisor has taken it from this machine since boot (/proc/stat)."""
    out = {}
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith("cpu") and line[3:4].isdigit():
            name, *values = line.split()
            out[int(name[3:])] = int(values[7]) / TICKS_PER_S
    return out


class CpuSampler:
    """Samples the CPU time of processes every ``interval_s`` in a thread of its own, from one read of /proc.

    Watched processes (``watch``) get a series each; ``watch_tree`` watches a process with every process
    it starts, and theirs. Besides, it adds up the CPU of every program that is not this one or one it
    started (kernel threads left out): the **other work** on the host, which would disturb what the
    benchmark measures (``other``); and the hypervisor's steal of each core (``steal``), which on a
    virtual machine grows with the benchmark's own load.
    """

    def __init__(self, interval_s: float = 0.2) -> None:
        self.interval_s = interval_s
        self.root = os.getpid()
        self.series: dict[int, list[tuple[float, float]]] = {}
        self.trees: dict[int, set[int]] = {}
        """Root -> every process of its tree seen so far (the root too)."""
        self.foreign: list[tuple[float, float]] = [(time.time(), 0.0)]
        """(time, CPU seconds of other programs since the sampler started)."""
        self.stolen: list[tuple[float, dict[int, float]]] = []
        """(time, core -> its steal seconds so far)."""
        self._last: dict[int, Proc] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> CpuSampler:
        self._last = processes()
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join()

    def watch(self, pid: int) -> None:
        """Start sampling ``pid``."""
        self.series.setdefault(pid, [])

    def watch_tree(self, root: int) -> None:
        """Start sampling ``root`` and every process it starts, and theirs."""
        self.trees.setdefault(root, {root})
        self.watch(root)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            now, found = time.time(), processes()
            mine = _descendants(found, {self.root})
            for members in self.trees.values():
                for pid in _descendants(found, members) - members:
                    members.add(pid)
                    self.watch(pid)
            other = sum(proc.cpu_s - self._last[pid].cpu_s for pid, proc in found.items()
                        if pid not in mine and not proc.kernel and pid in self._last)
            self.foreign.append((now, self.foreign[-1][1] + max(0.0, other)))
            self.stolen.append((now, steal()))
            self._last = found
            for pid, series in list(self.series.items()):
                if pid in found:
                    series.append((now, found[pid].cpu_s))

    def used(self, pid: int, start_s: float, end_s: float) -> tuple[float, float, float] | None:
        """(CPU seconds, first, last sample time) of ``pid`` over the samples taken between epoch ``start_s``
        and ``end_s``; None with fewer than two samples there."""
        return _delta(self.series.get(pid) or [], start_s, end_s)

    def share(self, pid: int, start_s: float, end_s: float) -> float | None:
        """Cores ``pid`` used on average between epoch ``start_s`` and ``end_s`` (1.0: one whole core)."""
        found = self.used(pid, start_s, end_s)
        if found is None or found[2] - found[1] < 2 * self.interval_s:
            return None
        cpu_s, t0, t1 = found
        return cpu_s / (t1 - t0)

    def other(self, start_s: float, end_s: float) -> float | None:
        """Cores' worth of other programs' work between ``start_s`` and ``end_s``, wherever it ran."""
        return _rate(self.foreign, start_s, end_s, self.interval_s)

    def steal(self, cores: list[int], start_s: float, end_s: float) -> float | None:
        """Cores' worth of time the hypervisor took from ``cores`` between ``start_s`` and ``end_s``."""
        return _rate([(t, sum(by_core.get(c, 0.0) for c in cores)) for t, by_core in self.stolen], start_s, end_s,
                     self.interval_s)

    def tree_share(self, root: int, start_s: float, end_s: float) -> tuple[float, int]:
        """(cores, processes): what the tree of ``root`` used between ``start_s`` and ``end_s``, and how many of
        its processes were sampled over that window."""
        cores, alive = 0.0, 0
        for pid in sorted(self.trees.get(root, {root})):
            found = self.share(pid, start_s, end_s)
            if found is not None:
                cores += found
                alive += 1
        return cores, alive


def _descendants(found: dict[int, Proc], roots: set[int]) -> set[int]:
    """``roots`` and every process below them in ``found``."""
    children: dict[int, list[int]] = {}
    for pid, proc in found.items():
        children.setdefault(proc.parent, []).append(pid)
    out, todo = set(roots), list(roots)
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in out:
                out.add(child)
                todo.append(child)
    return out


def _rate(series: list[tuple[float, float]], start_s: float, end_s: float, interval_s: float) -> float | None:
    """The mean rate of change of ``series`` between ``start_s`` and ``end_s`` (None over too few points)."""
    found = _delta(series, start_s, end_s)
    if found is None or found[2] - found[1] < 2 * interval_s:
        return None
    return found[0] / (found[2] - found[1])


def _delta(series: list[tuple[float, float]], start_s: float, end_s: float) -> tuple[float, float, float] | None:
    """(value change, first time, last time) over the points of ``series`` between ``start_s`` and ``end_s``."""
    times = [t for t, _ in series]
    i, j = bisect.bisect_left(times, start_s), bisect.bisect_right(times, end_s) - 1
    if j - i < 1:
        return None
    (t0, v0), (t1, v1) = series[i], series[j]
    return v1 - v0, t0, t1
