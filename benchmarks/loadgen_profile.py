"""Profiles for benchmarks/loadgen_capacity.py --profile: where the sending process spends its CPU.

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
from collections import Counter
from pathlib import Path

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
