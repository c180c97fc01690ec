"""Host load: how busy the host was during a stage, and how much of that was the run's own CPU.

A stage measured on a host where other jobs compete for the CPU, or whose vCPUs the hypervisor
takes away (steal), is slower for reasons that have nothing to do with GPU sharing; so is one whose
load generator was starved. ``HostMonitor`` reads cumulative counters when a window starts and when
it stops (no sleep; under gevent in an OS thread of its own, so the event loop turns meanwhile) and
returns a ``HostLoad``:

- the host's busy CPU over the window, in cores, from /proc/stat (``psutil.cpu_times()``): every
  field but idle, iowait and steal; guest and guest_nice are left out because the kernel already
  counts them in user and nice;
- the share the hypervisor stole (steal over all the time the CPUs were accounted);
- the CPU of this process and its descendants (the model servers the plugin started), in cores,
  and of any co-located process the caller knows is part of the run (``extra_own_cpu_s``);
- what remains, the other processes', and the verdict of ``busy_reason``.

The host counters are Linux's; elsewhere the host fields are None and no window is busy. In a
container without lxcfs /proc/stat and the load average are the whole host's, and a CPU quota
(cgroup ``cpu.max``) does not show: ``cores`` is the host's logical CPU count.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import psutil

from bench_plugin.results.offloop import OffLoop
from bench_plugin.results.summary import HostLoad

BUSY_OTHERS_MIN_CORES = 0.5
"""Other processes using more than this many cores on average over a window make it busy (a small host's floor)."""

BUSY_OTHERS_FRACTION = 0.25
"""... or more than this fraction of the host's logical CPUs, where that is more cores than the floor."""

BUSY_STEAL_FRACTION = 0.10
"""A hypervisor stealing more than this fraction of the CPU time over a window makes it busy."""

HOST_BUSY_FIELDS = ("user", "nice", "system", "irq", "softirq")
"""/proc/stat fields that are this host's CPU work; user and nice already hold guest and guest_nice."""

HOST_IDLE_FIELDS = ("idle", "iowait")
"""/proc/stat fields of a CPU with nothing to run (iowait: idle while some task waits on I/O)."""

Key = tuple[int, float]
"""A process as (pid, create time): a pid the kernel reuses is another process."""


class CpuCounter(Protocol):
    """A cumulative CPU-seconds counter; None where it cannot be read."""

    def cpu_s(self) -> float | None:
        """CPU seconds (user + system) used so far; only differences between two calls mean anything."""
        ...


def process_cpu_s() -> float:
    """CPU seconds (user + system, all threads) this process has used."""
    return time.process_time()


class ProcessCpu:
    """The CPU of this process alone: the load generator without the servers it started."""

    def cpu_s(self) -> float | None:
        """CPU seconds this process has used."""
        return process_cpu_s()


@dataclass(frozen=True)
class _Reading:
    own_s: float
    """user + system of the process itself."""
    reaped_s: float
    """children_user + children_system: the descendants it has waited for, once they exited."""
    parent: int


def _read_process(proc: psutil.Process) -> tuple[Key, _Reading] | None:
    """One process's counters; None where it is gone. Raises psutil.AccessDenied where it may not be read."""
    try:
        with proc.oneshot():
            times = proc.cpu_times()
            key = (int(proc.pid), float(proc.create_time()))
            reading = _Reading(float(times.user) + float(times.system),
                               float(times.children_user) + float(times.children_system), int(proc.ppid()))
    except psutil.NoSuchProcess:
        return None
    return key, reading


def proc_children(pid: int) -> list[int] | None:
    """The children of a process from /proc/<pid>/task/<tid>/children, one file per thread.

    Cost grows with the tree's threads, not with the host's processes. [] where the process is gone;
    None where there is no /proc or the kernel lacks the files (CONFIG_PROC_CHILDREN). The kernel
    lists a thread's children without locking the tree: a child may be missed while another exits.
    """
    task = Path(f"/proc/{pid}/task")
    try:
        tids = [entry.name for entry in os.scandir(task)]
    except FileNotFoundError:
        return None if not Path("/proc/self/task").is_dir() else []
    except OSError:
        return None
    children: list[int] = []
    for tid in tids:
        try:
            text = (task / tid / "children").read_text()
        except FileNotFoundError:
            if (task / tid).is_dir():
                return None  # the thread is there, its children file is not
            continue  # the thread exited
        except OSError:
            continue
        children.extend(int(word) for word in text.split())
    return children


def _alive(key: Key) -> bool:
    """Whether the process of ``key`` still runs (or is a zombie): same pid, same create time."""
    try:
        return float(psutil.Process(key[0]).create_time()) == key[1]
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


class ProcessTreeCpu:
    """The CPU of a process and all its descendants, e.g. the load generator and its model servers.

    Each reading lists the descendants (each after its parent) and sums, for each, its own CPU and
    that of the descendants it has reaped (the kernel adds an exited child's CPU, its own reaped
    ones included, to the parent that waits for it). So a child that starts and exits between two
    readings still counts, through its parent. A descendant that disappears between readings is
    settled by where its CPU went:

    - it exited and its parent is still in the tree (or exited too, and so on up): the parent's
      reaped CPU holds it; its last reading is dropped, or it would count twice;
    - it still runs outside the tree (its parent died and it was reparented), or its CPU went to a
      parent outside the tree: its last reading is kept, so the CPU it used for the run is not lost.
      What it used after that reading is not seen (nor, for a reparented process, what it uses later).

    A descendant that may not be read (AccessDenied) keeps its previous reading. One that a listing
    missed while it still ran (see ``proc_children``) is kept at its last reading, and counted live
    again when it is seen again. Descendants are listed from /proc/<pid>/task/<tid>/children: the
    cost grows with the tree; without those files psutil scans every process's parent pid (about
    45 us a process on the host).
    """

    def __init__(self, pid: int | None = None) -> None:
        self._root = psutil.Process(pid)
        self._children_files = proc_children(os.getpid()) is not None
        self._tracked: dict[Key, _Reading] = {}
        self._departed: dict[Key, float] = {}

    def cpu_s(self) -> float | None:
        """CPU seconds the tree has used (cumulative, monotone but for unreadable processes); None: root gone."""
        current = self._read_tree()
        if current is None:
            return None
        self._settle(current)
        self._tracked = current
        total = sum(r.own_s + r.reaped_s for r in current.values()) + sum(self._departed.values())
        # the kernel counts in clock ticks (10 ms): rounded to the microsecond, a process moving from the tree to
        # the departed does not change the float sum's last bit (116.42999999999999, then 116.42999999999998)
        return round(total, 6)

    def pids(self) -> frozenset[int]:
        """The processes of the tree at the last reading, the root included."""
        return frozenset(pid for pid, _ in self._tracked)

    def _read_tree(self) -> dict[Key, _Reading] | None:
        # The root first, then each process before its descendants: a child reaped between two
        # reads is then missed for one reading (its parent's next reading has it), never counted twice.
        try:
            root = _read_process(self._root)
            children = self._descendants()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            return None
        if root is None:
            return None
        current = dict([root])
        previous = {key[0]: (key, reading) for key, reading in self._tracked.items()}
        for child in children:
            try:
                found = _read_process(child)
            except psutil.AccessDenied:
                found = previous.get(child.pid)  # unreadable now: keep what was read before
            if found is not None:
                current[found[0]] = found[1]
        return current

    def _descendants(self) -> list[psutil.Process]:
        """The root's descendants, each after its parent."""
        if not self._children_files:
            return list(self._root.children(recursive=True))  # scans every process's parent pid
        found: list[psutil.Process] = []
        parents = [int(self._root.pid)]
        while parents:
            pid = parents.pop(0)
            for child in proc_children(pid) or ():
                try:
                    found.append(psutil.Process(child))
                except psutil.NoSuchProcess:
                    continue
                parents.append(child)
        return found

    def _settle(self, current: Mapping[Key, _Reading]) -> None:
        for key in current:
            self._departed.pop(key, None)  # seen again (a listing raced with a reparenting): counted live
        gone = {key: r for key, r in self._tracked.items() if key not in current}
        live_pids = {pid for pid, _ in current}
        exited = {key[0]: r for key, r in gone.items() if not _alive(key)}
        for key, reading in gone.items():
            if not _absorbed(key[0], reading, live_pids, exited):
                self._departed[key] = reading.own_s + reading.reaped_s


def _absorbed(pid: int, reading: _Reading, live_pids: set[int], exited: Mapping[int, _Reading]) -> bool:
    """Whether a vanished process's CPU reached a live tree process's reaped counter through its parents."""
    if pid not in exited:
        return False  # still runs, outside the tree
    seen = {pid}
    parent = reading.parent
    while parent not in live_pids:
        if parent not in exited or parent in seen:
            return False
        seen.add(parent)
        parent = exited[parent].parent
    return True


@dataclass(frozen=True)
class HostCpuTimes:
    """The host's cumulative CPU seconds, all CPUs together, from /proc/stat."""

    busy_s: float
    total_s: float
    steal_s: float | None


def _host_cpu() -> HostCpuTimes | None:
    """The host's cumulative CPU times (all CPUs, seconds) from /proc/stat; None off Linux or unreadable."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        times = psutil.cpu_times()
    except (OSError, psutil.Error):
        return None
    busy = sum(float(getattr(times, name, 0.0)) for name in HOST_BUSY_FIELDS)
    idle = sum(float(getattr(times, name, 0.0)) for name in HOST_IDLE_FIELDS)
    steal = getattr(times, "steal", None)
    steal_s = None if steal is None else float(steal)
    return HostCpuTimes(busy_s=busy, total_s=busy + idle + (steal_s or 0.0), steal_s=steal_s)


def _load_avg_1m() -> float | None:
    try:
        return os.getloadavg()[0]
    except (OSError, AttributeError):
        return None


@dataclass(frozen=True)
class HostWindow:
    """The counters at a window's start, as ``HostMonitor.start`` read them."""

    start_s: float
    host: HostCpuTimes | None
    own_cpu_s: float | None


def _num(value: float) -> str:
    """A number in at most two decimals, without trailing zeros: 1.6, 0.54, 2."""
    return f"{value:.2f}".rstrip("0").rstrip(".")


def others_limit_cores(cores: int | None) -> float:
    """How many cores other processes may use on average before a window is busy: max(0.5, 0.25 x cores)."""
    return max(BUSY_OTHERS_MIN_CORES, BUSY_OTHERS_FRACTION * (cores or 0))


def busy_reason(load: HostLoad) -> str | None:
    """Why ``load``'s window was too busy to trust, in one line; None when it was not.

    Busy when other processes used more than max(0.5, 0.25 x cores) cores on average over the
    window, or when steal took more than 10% of the CPU time.
    """
    reasons: list[str] = []
    limit = others_limit_cores(load.cores)
    if load.others_cores is not None and load.others_cores > limit:
        of = f" of {load.cores}" if load.cores else ""
        reasons.append(f"other processes used {_num(load.others_cores)}{of} cores (more than {_num(limit)})")
    if load.steal_fraction is not None and load.steal_fraction > BUSY_STEAL_FRACTION:
        reasons.append(f"steal took {load.steal_fraction:.0%} of CPU time (more than {BUSY_STEAL_FRACTION:.0%})")
    return "; ".join(reasons) or None


def _per_s(seconds: float | None, duration_s: float) -> float | None:
    return None if seconds is None or duration_s <= 0 else max(0.0, seconds) / duration_s


def _host_fields(start: HostCpuTimes | None, end: HostCpuTimes | None, duration_s: float,
                 cores: int | None) -> tuple[float | None, float | None]:
    """(cpu_busy_cores, steal_fraction) between two host readings."""
    if start is None or end is None:
        return None, None
    busy = _per_s(end.busy_s - start.busy_s, duration_s)
    if busy is not None and cores:
        busy = min(busy, float(cores))  # 10 ms ticks: a short window can read a tick over
    total = end.total_s - start.total_s
    steal = None
    if start.steal_s is not None and end.steal_s is not None and total > 0:
        steal = max(0.0, end.steal_s - start.steal_s) / total
    return busy, steal


class HostMonitor:
    """Measures host load over windows: ``window = start()`` ... ``stop(window) -> HostLoad``.

    Windows may overlap: each holds its own start counters. ``own`` counts the run's CPU, by default
    this process and its descendants (``ProcessTreeCpu``).
    """

    def __init__(self, own: CpuCounter | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self._own = own if own is not None else ProcessTreeCpu()
        self._clock = clock
        self._cores = psutil.cpu_count(logical=True)
        """Read once: psutil parses /proc/cpuinfo for it, 25 ms on a 16-core host, holding the GIL."""
        self._reader = OffLoop()
        """Where the counters are read (bench_plugin/results/offloop.py): off the event loop under gevent, since
        reading /proc for a tree of model servers with hundreds of threads can take longer than 5 ms."""

    def start(self) -> HostWindow:
        """Read the counters at a window's start."""
        return self._reader.run(self._start)

    def stop(self, window: HostWindow, extra_own_cpu_s: float = 0.0) -> HostLoad:
        """The window's load; ``extra_own_cpu_s``: CPU seconds that co-located processes of the run used in it."""
        return self._reader.run(self._stop, window, extra_own_cpu_s)

    def _start(self) -> HostWindow:
        return HostWindow(start_s=self._clock(), host=_host_cpu(), own_cpu_s=self._own.cpu_s())

    def _stop(self, window: HostWindow, extra_own_cpu_s: float) -> HostLoad:
        own_end = self._own.cpu_s()
        host_end = _host_cpu()
        duration = self._clock() - window.start_s
        cores = self._cores
        busy, steal = _host_fields(window.host, host_end, duration, cores)
        own_s = None if own_end is None or window.own_cpu_s is None else own_end - window.own_cpu_s
        own = _per_s(own_s, duration)
        extra = _per_s(extra_own_cpu_s, duration) or 0.0
        others = None if busy is None or own is None else max(0.0, busy - own - extra)
        load = HostLoad(duration_s=duration, cores=cores, load_avg_1m=_load_avg_1m(), cpu_busy_cores=busy,
                        steal_fraction=steal, own_cores=own, extra_own_cores=extra, others_cores=others,
                        busy=False, reason=None)
        reason = busy_reason(load)
        return load.model_copy(update={"busy": reason is not None, "reason": reason})


def with_extra_own(load: HostLoad, extra_own_cpu_s: float) -> HostLoad:
    """``load`` with ``extra_own_cpu_s`` more CPU seconds counted as the run's own (known once the window closed).

    A co-located load generator reports what it used only after the stage; its CPU moves from the
    other processes' share to the run's, and the busy verdict is taken again.
    """
    extra = _per_s(extra_own_cpu_s, load.duration_s) or 0.0
    others = None if load.others_cores is None else max(0.0, load.others_cores - extra)
    moved = load.model_copy(update={"extra_own_cores": load.extra_own_cores + extra, "others_cores": others,
                                    "busy": False, "reason": None})
    reason = busy_reason(moved)
    return moved.model_copy(update={"busy": reason is not None, "reason": reason})
