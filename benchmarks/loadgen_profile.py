"""Profiles for benchmarks/loadgen_capacity.py --profile: where the sending process spends its CPU.

``--profile WORKLOAD:RATE`` runs one stage of the plugin's worker at RATE, ``--profile bare-WORKLOAD:RATE``
bare Locust at RATE (loadgen_bare.py), and watches the sender past its first second for
``--profile-seconds`` (default 8) with one of four samplers (``--sampler``):

- ``py-spy`` (the default; ``pip install py-spy``) samples the process from outside, ``--profile-hz``
  times a second (default 250), only while it holds the GIL (``--gil``: an idle thread is no cost), and
  writes collapsed stacks (``--format raw``). It samples ``--nonblocking``: stopping the process for each
  sample (the default) cost the sender so much here that a stage it kept up with fell behind by hundreds
  of milliseconds. A stack read while the process runs can be torn mid-switch between greenlets, so the
  self column (the frame on top) is the one to trust; the inclusive column is indicative. This module
  folds those into the functions with the most samples on top of the stack (self) and anywhere in the
  stack (inclusive).
- ``threads``: each thread's CPU (user + system clock ticks, ``/proc/PID/task/TID/stat``) over the
  window, per second and per request at the rate; a thread that ended within the window is left out.
- ``perf``: ``perf record -e cpu-clock`` on the process (every thread), folded by where the time was
  spent (the kernel, the Python interpreter, each other library): is the excess system calls or Python?
- ``strace``: ``strace -c -f`` on the process (every thread): the system calls, counted and timed.
  strace stops the process at every call, so its CPU figures are not the sender's; the counts are.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from loadgen_cpu import BUNCHED_S, bunched
from loadgen_runs import Bench, cpu_list, sleep_until
from loadgen_workloads import Workload, scenario, write_scenario

FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>[^()]*)\)$")


SAMPLERS = ("py-spy", "threads", "perf", "strace")


PY_SPY = Path(sys.executable).parent / "py-spy"
"""Where --sampler py-spy looks for it: beside this Python (``pip install py-spy`` into the same environment)."""


def command(pid: int, seconds: float, raw: Path, hz: int = 250) -> list[str]:
    """The py-spy command that samples ``pid`` for ``seconds``, ``hz`` times a second, into ``raw``."""
    return [str(PY_SPY), "record", "--pid", str(pid), "--nonblocking", "--gil",
            "--rate", str(hz), "--function", "--format", "raw", "--duration", str(max(1, int(seconds))),
            "--output", str(raw)]


def _short(frame: str) -> str:
    """``function (package/module.py)``: the path shortened to what tells modules apart."""
    found = FRAME.match(frame)
    if not found:
        return frame
    path = found.group("file")
    for marker in ("site-packages/", "/wt-bench/", "/lib/python3"):
        if marker in path:
            path = path.split(marker, 1)[1]
            break
    return f"{found.group('func')} ({path})"


def fold(raw: Path) -> tuple[int, Counter[str], Counter[str]]:
    """(samples, self counts, inclusive counts) from py-spy's raw output."""
    total = 0
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        frames = [_short(f) for f in stack.split(";")]
        frames = [f for f in frames if not f.startswith("process ")]  # py-spy's thread/process label
        if not frames:
            continue
        total += n
        own[frames[-1]] += n
        for frame in set(frames):
            inclusive[frame] += n
    return total, own, inclusive


def table(raw: Path, top: int = 15) -> str:
    """Markdown tables of the top functions by self and inclusive samples."""
    total, own, inclusive = fold(raw)
    if not total:
        return "(py-spy recorded no samples)\n"
    lines = [f"{total} samples", "", "| self % | function |", "|---:|---|"]
    lines += [f"| {100 * n / total:.1f} | `{name}` |" for name, n in own.most_common(top)]
    lines += ["", "| inclusive % | function |", "|---:|---|"]
    lines += [f"| {100 * n / total:.1f} | `{name}` |" for name, n in inclusive.most_common(top)]
    return "\n".join(lines) + "\n"


def _ticks(pid: int) -> dict[int, tuple[str, int]]:
    """Thread id -> (name, user + system clock ticks) of every thread of ``pid`` now."""
    found: dict[int, tuple[str, int]] = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            name = Path(f"/proc/{pid}/task/{tid}/comm").read_text().strip()
            fields = Path(f"/proc/{pid}/task/{tid}/stat").read_text().rpartition(")")[2].split()
        except OSError:  # ended meanwhile
            continue
        found[int(tid)] = (name, int(fields[11]) + int(fields[12]))  # utime, stime (fields 14 and 15 of stat)
    return found


def thread_table(before: dict[int, tuple[str, int]], after: dict[int, tuple[str, int]], seconds: float,
                 rate: float) -> str:
    """Each thread's CPU between two ``_ticks`` reads ``seconds`` apart, per second and per request at ``rate``."""
    hz = os.sysconf("SC_CLK_TCK")
    lines = [f"CPU by thread over {seconds:g} s (clock ticks of 1/{hz} s: about +-{1000 / hz / seconds:.2f} ms/s)",
             "", "| thread | id | ms/s | ms/request |", "|---|---:|---:|---:|"]
    total = 0.0
    for tid, (name, ticks) in sorted(after.items()):
        if tid not in before:
            continue
        ms_s = 1000.0 * (ticks - before[tid][1]) / hz / seconds
        total += ms_s
        lines.append(f"| {name} | {tid} | {ms_s:.1f} | {ms_s / rate:.3f} |" if rate > 0 else
                     f"| {name} | {tid} | {ms_s:.1f} | - |")
    lines.append(f"| all | | {total:.1f} | {total / rate:.3f} |" if rate > 0 else f"| all | | {total:.1f} | - |")
    return "\n".join(lines) + "\n"


def perf_table(data: Path, top: int = 15) -> str:
    """``perf report`` of ``data`` by shared object (kernel, interpreter, libraries) and its top symbols."""
    def report(sort: str) -> list[tuple[float, int, str]]:
        text = subprocess.run(["perf", "report", "-i", str(data), "--sort", sort, "--stdio", "-F",
                               f"overhead,sample,{sort}"], capture_output=True, text=True, check=True).stdout
        rows = []
        for line in text.splitlines():
            parts = line.split(None, 2)
            if len(parts) == 3 and parts[0].endswith("%") and parts[1].isdigit():
                rows.append((float(parts[0][:-1]), int(parts[1]), parts[2].strip()))
        return sorted(rows, key=lambda r: -r[1])

    by_dso = report("dso")
    if not by_dso:
        return "(perf recorded no samples)\n"
    lines = [f"{sum(r[1] for r in by_dso)} samples of cpu-clock", "", "| % | samples | where |", "|---:|---:|---|"]
    lines += [f"| {pct:.1f} | {n} | `{name}` |" for pct, n, name in by_dso]
    lines += ["", "| % | samples | symbol |", "|---:|---:|---|"]
    lines += [f"| {pct:.1f} | {n} | `{name}` |" for pct, n, name in report("sym")[:top]]
    return "\n".join(lines) + "\n"


def _watch(bench: Bench, pid: int, sampler: str, seconds: float, hz: int, rate: float) -> Callable[[], str]:
    """Start watching ``pid`` for ``seconds`` with ``sampler`` now; returns what waits for the end and
    gives the table."""
    out, spy = bench.out, cpu_list(bench.layout.server)
    if sampler == "threads":
        before, started = _ticks(pid), time.time()

        def threads() -> str:
            sleep_until(started + seconds)
            return thread_table(before, _ticks(pid), time.time() - started, rate)
        return threads
    if sampler == "perf":
        data = out / "profile.perf"
        proc = bench.procs.start("perf", ["perf", "record", "-e", "cpu-clock", "-F", str(hz), "-p", str(pid),
                                          "-o", str(data), "--", "sleep", f"{seconds:g}"], spy)
        return lambda: (bench.procs.wait(proc, seconds + 60), perf_table(data))[1]
    if sampler == "strace":
        summary = out / "profile.strace"
        proc = bench.procs.start("strace", ["strace", "-c", "-f", "-p", str(pid), "-o", str(summary)], spy)

        def traced() -> str:
            time.sleep(seconds)
            proc.send_signal(signal.SIGINT)  # strace detaches and writes its summary
            bench.procs.wait(proc, 30)
            return f"strace -c -f over {seconds:g} s\n\n" + "\n".join(
                "    " + line for line in summary.read_text().splitlines()) + "\n"
        return traced
    raw = out / "profile.raw"
    proc = bench.procs.start("py-spy", command(pid, seconds, raw, hz), spy)
    return lambda: (bench.procs.wait(proc, seconds + 30), table(raw))[1]


def missing_tool(sampler: str) -> str | None:
    """Why ``sampler`` cannot run on this machine (its program not found), or None: said before any process starts."""
    if sampler == "py-spy":
        return None if PY_SPY.exists() else f"{PY_SPY} not found (pip install py-spy into this environment)"
    if sampler in ("perf", "strace") and shutil.which(sampler) is None:
        package = "linux-perf" if sampler == "perf" else sampler
        return f"{sampler} not found on PATH (on Debian: apt-get install {package})"
    return None


def profile(bench: Bench, what: str, workloads: dict[str, Workload], seconds: float, sampler: str = "py-spy",
            hz: int = 250) -> str:
    """``sampler``'s table of the sender of ``WORKLOAD:RATE`` (the plugin's worker) or ``bare-WORKLOAD:RATE``,
    watched for ``seconds`` past the stage's first second."""
    name, _, rate_text = what.partition(":")
    bare = name.startswith("bare-")
    w = workloads.get(name.removeprefix("bare-"))
    if w is None or not rate_text:
        raise RuntimeError(f"--profile {what}: give [bare-]WORKLOAD:RATE, WORKLOAD one of {', '.join(workloads)}")
    if sampler not in SAMPLERS:
        raise RuntimeError(f"--sampler {sampler}: one of {', '.join(SAMPLERS)}")
    rate = float(rate_text)
    path = write_scenario(bench.out / "profile.yaml", scenario(w, [(rate, seconds + 2.0, None)]))
    if bare:
        proc, rounds = bench.bare("profile-bare", w, rate, path)
        bench.wait_ready(proc, rounds)
        done: list[str] = []
        watcher = threading.Timer(1.0, lambda: done.append(_watch(bench, proc.pid, sampler, seconds, hz, rate)()))
        watcher.start()
        record = bench.bare_round(proc, rounds, 1, seconds + 2.0)
        watcher.join()
        share = bunched(record["done"], record["opened"], record["closed"])
        head = (f"bare Locust ({bench.bare_arrivals}), {w.name} at {rate:g}/s: {len(record['done'])} requests, "
                f"{record['failed']} failed, {'-' if share is None else f'{share:.0%}'} of them within "
                f"{BUNCHED_S * 1000:g} ms of the one before")
        text = done[0] if done else "(the sampler failed: see logs/)\n"
    else:
        run = bench.plugin("profile", path)
        start, _ = bench.wait_stage(run, 2)  # after the settle and warm stages
        sleep_until(start + 1.0)
        text = _watch(bench, run.workers[0].pid, sampler, seconds, hz, rate)()
        bench.finish(run, seconds + 90)
        head = f"plugin worker, {w.name} at {rate:g}/s"
    return f"{head} ({sampler})\n\n{text}"
