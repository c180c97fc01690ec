"""Attribution: which workload class a GPU process belongs to, and per-class sums of per-process series.

NVML names processes by pid. The campaign knows the pid of each class's server; the process that
holds GPU memory may be a child of it (a worker or engine process), so a pid is attributed by walking
up its parents until one is a known server. Parents can only be looked up while the process lives, so
the sampler resolves each pid when it first sees it; what remains here is pure and takes the parent
lookup as an argument. Under time-slicing and MPS every class shares one device: per-process memory
is then the only way to tell whose VRAM is whose. A process that belongs to no class is counted under
UNATTRIBUTED, never dropped: another tenant on the GPU is contention the report must show.

Pids are those of the host's PID namespace, as NVML reports them: a server inside a container has a
different pid inside it.

A server the local backend started anew mid-stage (a restart, a kill, a rollout: sharing/restart.py) is
no child of the server it replaced; its environment says whose it is (results/placement.CLASS_ENV, beside
the campaign's CAMPAIGN_ENV), which :func:`proc_marked_class` reads where the parents lead nowhere.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from bench_plugin.results.placement import CAMPAIGN_ENV, CLASS_ENV
from bench_plugin.results.telemetry_rows import TelemetryRow
from bench_plugin.telemetry.fields import PROCESS_MEMORY

UNATTRIBUTED = "unattributed"
"""The class of a GPU process that is no known server and descends from none."""

ParentOf = Callable[[int], "int | None"]


def proc_parent(pid: int) -> int | None:
    """The parent pid of a live process, from /proc; None where it is gone or there is no /proc."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and ')'; the fields after the LAST ')' are fixed.
    rest = text.rpartition(")")[2].split()
    return int(rest[1]) if len(rest) > 1 and rest[1].isdigit() else None


def proc_marked_class(pid: int, campaign: str) -> str | None:
    """The class a live process's environment names (CLASS_ENV) when it is a server of ``campaign`` (CAMPAIGN_ENV,
    the results directory), from /proc; None otherwise, or where the environment cannot be read."""
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return None
    env = dict(item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item)
    if env.get(CAMPAIGN_ENV.encode()) != campaign.encode():
        return None
    marked = env.get(CLASS_ENV.encode())
    return marked.decode(errors="replace") if marked else None


def resolve_class(
    process: str | int, pid_classes: Mapping[int, str], parent_of: ParentOf | None = None, max_depth: int = 64
) -> str | None:
    """The class of a process: its own entry in ``pid_classes``, else its nearest known ancestor's, else None.

    ``process`` is a pid (int or text). Without ``parent_of`` only the pid itself is looked up.
    """
    try:
        pid: int | None = int(process)
    except ValueError:
        return None
    seen: set[int] = set()
    while pid is not None and pid > 0 and pid not in seen and len(seen) < max_depth:
        if pid in pid_classes:
            return pid_classes[pid]
        if parent_of is None:
            return None
        seen.add(pid)
        pid = parent_of(pid)
    return None


@dataclass(frozen=True, slots=True)
class ClassValue:
    """The sum of one per-process series over the processes of one class, on one device, at one poll."""

    t: float
    device: str
    workload: str
    value: float


def class_series(
    rows: Iterable[TelemetryRow],
    process_classes: Mapping[str, str],
    metric: str = PROCESS_MEMORY,
) -> list[ClassValue]:
    """Per-class sums of ``metric`` at each (t, device), from rows and a ``process -> class`` map.

    ``process_classes`` is keyed like ``TelemetryRow.process`` (the pid as text), as NvmlSampler's
    ``process_classes()`` returns it; a process missing from it counts as UNATTRIBUTED.
    """
    sums: dict[tuple[float, str, str], float] = defaultdict(float)
    for row in rows:
        if row.metric != metric or row.process is None:
            continue
        workload = process_classes.get(row.process, UNATTRIBUTED)
        sums[(row.t, row.device, workload)] += row.value
    return [ClassValue(t, device, workload, value) for (t, device, workload), value in sorted(sums.items())]


def peak_by_class(
    rows: Iterable[TelemetryRow],
    process_classes: Mapping[str, str],
    metric: str = PROCESS_MEMORY,
) -> dict[str, float]:
    """Each class's peak of ``metric`` summed over its processes and devices at one poll (e.g. peak VRAM, MiB).

    Rows of one poll share their ``t`` (the NVML sampler stamps a poll once), so summing at equal t
    adds a class's devices together, as a class spread over two GPUs holds both.
    """
    per_t: dict[tuple[float, str], float] = defaultdict(float)
    for value in class_series(rows, process_classes, metric):
        per_t[(value.t, value.workload)] += value.value
    peaks: dict[str, float] = {}
    for (_, workload), total in per_t.items():
        peaks[workload] = max(peaks.get(workload, total), total)
    return peaks


def classify_processes(
    processes: Iterable[str], pid_classes: Mapping[int, str], parent_of: ParentOf | None = None
) -> dict[str, str]:
    """``process -> class`` for each process (pid as text), UNATTRIBUTED where no class claims it."""
    return {p: resolve_class(p, pid_classes, parent_of) or UNATTRIBUTED for p in processes}
