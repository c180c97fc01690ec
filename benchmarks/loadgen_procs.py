"""Processes of benchmarks/loadgen_capacity.py: each started pinned to a core, all stopped on any exit.

Every process the benchmark needs (nginx, bare Locust, the plugin's master and workers, py-spy)
is started through one ``Processes``, which pins it with ``taskset -c`` and, from ``close`` (a
``with`` block's end, whatever ended it), terminates whatever is still running: SIGTERM, then
SIGKILL after a grace period. ``CpuSampler`` reads the CPU time of chosen processes from /proc a
few times a second, so the CPU a process used over any window (a stage) can be read afterwards.
"""

from __future__ import annotations

import bisect
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import TracebackType

ROOT = Path(__file__).resolve().parent.parent
"""The repository: every process runs here, with it first on PYTHONPATH."""

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
        environment = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1", **(env or {})}
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


def cpu_seconds(pid: int) -> float | None:
    """User plus system CPU seconds of ``pid`` so far (None once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / TICKS_PER_S


class CpuSampler:
    """Samples the CPU time of watched processes every ``interval_s`` in a thread of its own."""

    def __init__(self, interval_s: float = 0.2) -> None:
        self.interval_s = interval_s
        self.series: dict[int, list[tuple[float, float]]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> CpuSampler:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join()

    def watch(self, pid: int) -> None:
        """Start sampling ``pid``."""
        self.series.setdefault(pid, [])

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            now = time.time()
            for pid, series in list(self.series.items()):
                value = cpu_seconds(pid)
                if value is not None:
                    series.append((now, value))

    def share(self, pid: int, start_s: float, end_s: float) -> float | None:
        """Cores ``pid`` used on average between epoch ``start_s`` and ``end_s`` (1.0: one whole core)."""
        series = self.series.get(pid) or []
        times = [t for t, _ in series]
        i, j = bisect.bisect_left(times, start_s), bisect.bisect_right(times, end_s) - 1
        if j - i < 2:
            return None
        (t0, c0), (t1, c1) = series[i], series[j]
        return (c1 - c0) / (t1 - t0)
