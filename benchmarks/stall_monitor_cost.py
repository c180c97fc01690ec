"""What the stall monitor (bench_plugin/loadgen/stalls.py) costs a load-generating process in CPU.

    .venv/bin/python benchmarks/stall_monitor_cost.py [--seconds 10] [--runs 5] [--rate 50]

Each run is a fresh gevent process (monkey-patched as Locust's are) that for ``--seconds`` keeps a
light open-loop load's timers busy: ``--rate`` wakes per second of greenlets that sleep to their next
Poisson arrival and do a little work, as a generator at light load does. Three kinds of run take
turns, ``--runs`` times each: without a monitor; with the stall monitor (loop hooks and watcher
thread); and with the design it replaced, a heartbeat greenlet that sleeps 2 ms and measures its own
lateness (no watcher). The process CPU (time.process_time: every thread's) over the same wall time is
compared: each cost is the median difference from the run without, in % of one core. Also printed:
the loop's stretches per second and the blocks each monitored run saw.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
from gevent import monkey
monkey.patch_all()
import json, random, sys, time
import gevent
from bench_plugin.loadgen.stalls import StallMonitor

seconds, rate, kind = float(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
monitor = StallMonitor()
rng = random.Random(1)

def sender():
    while True:
        gevent.sleep(rng.expovariate(rate / 10))
        sum(range(200))  # a little work per arrival

for _ in range(10):
    gevent.spawn(sender)
late = []

def heartbeat():
    beat = time.monotonic()
    while True:
        gevent.sleep(0.002)
        now = time.monotonic()
        if now - beat - 0.002 > 0.005:
            late.append(now - beat)
        beat = now

if kind == "monitor":
    monitor.start()
elif kind == "heartbeat":
    gevent.spawn(heartbeat)
gevent.sleep(0.5)  # settled
cpu, wall, turns = time.process_time(), time.monotonic(), monitor.turns
gevent.sleep(seconds)
cpu, wall = time.process_time() - cpu, time.monotonic() - wall
print(json.dumps({"cores": cpu / wall, "turns_per_s": (monitor.turns - turns) / wall,
                  "blocks": len(monitor.blocks) + len(late)}))
monitor.stop()
"""


KINDS = ("none", "monitor", "heartbeat")


def run(seconds: float, rate: float, kind: str) -> dict[str, float]:
    done = subprocess.run([sys.executable, "-c", CHILD, str(seconds), str(rate), kind], cwd=ROOT,
                          capture_output=True, text=True, check=True)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--rate", type=float, default=50.0, help="the light load's wakes per second")
    args = parser.parse_args()
    runs: dict[str, list[dict[str, float]]] = {kind: [] for kind in KINDS}
    for _ in range(args.runs):
        for kind in KINDS:
            runs[kind].append(run(args.seconds, args.rate, kind))
    base = runs["none"]
    print(f"{args.runs} runs of {args.seconds:g} s each, light load of {args.rate:g} wakes/s")
    print(f"without a monitor: {statistics.median(r['cores'] for r in base) * 100:.2f}% of a core (median)")
    for kind in KINDS[1:]:
        diffs = [(a["cores"] - b["cores"]) * 100 for a, b in zip(runs[kind], base, strict=True)]
        extra = (f"; {statistics.median(r['turns_per_s'] for r in runs[kind]):.0f} loop stretches/s"
                 if kind == "monitor" else "")
        print(f"{kind}: cost median {statistics.median(diffs):.2f}% of a core (per run: "
              f"{', '.join(f'{d:.2f}' for d in diffs)}){extra}; blocks per run: "
              f"{[int(r['blocks']) for r in runs[kind]]}")


if __name__ == "__main__":
    main()
