"""Profiles for benchmarks/loadgen_capacity.py --profile: where the sending process spends its CPU.

``--profile WORKLOAD:RATE`` runs one stage of the plugin's worker at RATE, ``--profile bare-WORKLOAD:RATE``
bare Locust at RATE (loadgen_bare.py), and samples the sender with py-spy past its first second.

py-spy (``pip install py-spy``) samples the process from outside, 250 times a second, only while
it holds the GIL (``--gil``: an idle thread is no cost), and writes collapsed stacks (``--format
raw``). It samples ``--nonblocking``: stopping the process for each sample (the default) cost the
sender so much here that a stage it kept up with fell behind by hundreds of milliseconds. A stack
read while the process runs can be torn mid-switch between greenlets, so the self column (the
frame on top) is the one to trust; the inclusive column is indicative. This module folds those into the functions
with the most samples on top of the stack (self) and anywhere in the stack (inclusive).
"""

from __future__ import annotations

import re
import sys
import threading
from collections import Counter
from pathlib import Path

from loadgen_runs import Bench, cpu_list, sleep_until
from loadgen_workloads import Workload, scenario, write_scenario

FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>[^()]*)\)$")


def command(pid: int, seconds: float, raw: Path) -> list[str]:
    """The py-spy command that samples ``pid`` for ``seconds`` into ``raw``."""
    return [str(Path(sys.executable).parent / "py-spy"), "record", "--pid", str(pid), "--nonblocking", "--gil",
            "--rate", "250", "--function", "--format", "raw", "--duration", str(max(1, int(seconds))),
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


def profile(bench: Bench, what: str, workloads: dict[str, Workload], seconds: float) -> str:
    """py-spy's top functions of the sender of ``WORKLOAD:RATE`` (the plugin's worker) or ``bare-WORKLOAD:RATE``."""
    name, _, rate_text = what.partition(":")
    bare = name.startswith("bare-")
    w = workloads.get(name.removeprefix("bare-"))
    if w is None or not rate_text:
        raise RuntimeError(f"--profile {what}: give [bare-]WORKLOAD:RATE, WORKLOAD one of {', '.join(workloads)}")
    rate = float(rate_text)
    raw = bench.out / "profile.raw"
    path = write_scenario(bench.out / "profile.yaml", scenario(w, [(rate, seconds + 2.0, None)]))
    spy = cpu_list(bench.layout.server)
    if bare:
        proc, rounds = bench.bare("profile-bare", w, rate, path)
        bench.wait_ready(proc, rounds)
        sampler = threading.Timer(1.0, lambda: bench.procs.wait(
            bench.procs.start("py-spy", command(proc.pid, seconds, raw), spy), seconds + 30))
        sampler.start()
        record = bench.bare_round(proc, rounds, 1, seconds + 2.0)
        sampler.join()
        head = f"bare Locust, {w.name} at {rate:g}/s: {len(record['done'])} requests, {record['failed']} failed"
    else:
        run = bench.plugin("profile", path)
        start, _ = bench.wait_stage(run, 2)  # after the settle and warm stages
        sleep_until(start + 1.0)
        bench.procs.wait(bench.procs.start("py-spy", command(run.workers[0].pid, seconds, raw), spy), seconds + 30)
        bench.finish(run, seconds + 90)
        head = f"plugin worker, {w.name} at {rate:g}/s"
    return head + "\n\n" + table(raw)
