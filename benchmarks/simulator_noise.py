"""How much one short stage says near the boundary: the fraction of requests beyond an SLO, per stage, on the
contention simulator's device (servers/device.py) at 80% load, against its steady-state value.

Each stage starts with the device idle (as a search's stage does, after its drain), sends Poisson arrivals
for ``--stage-s`` seconds on a virtual clock, and counts the requests whose time on the device exceeds
``--room-ms`` (the SLO less the class's own latency). The M/M/1 law gives the steady-state fraction
exp(-(mu - lambda) * room). Run: python benchmarks/simulator_noise.py [--stages 20] [--stage-s 8]
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import tempfile
from pathlib import Path

from bench_plugin.servers.device import SimulatedDevice


def stage_fraction(service_s: float, rate: float, stage_s: float, room_s: float, seed: int, where: Path) -> float:
    """One stage from an idle device: the fraction of its requests longer than ``room_s`` on the device."""
    path = where / f"device-{seed}"
    device = SimulatedDevice(path, service_s, seed=seed)
    arrivals = random.Random(10_000 + seed)
    t, beyond, n = 0.0, 0, 0
    try:
        while (t := t + arrivals.expovariate(rate)) < stage_s:
            _, end = device.admit(now=t)
            beyond += end - t > room_s
            n += 1
    finally:
        device.close()
    return beyond / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stages", type=int, default=20)
    parser.add_argument("--stage-s", type=float, default=8.0)
    parser.add_argument("--service-ms", type=float, default=10.0)
    parser.add_argument("--load", type=float, default=0.8, help="lambda / mu")
    parser.add_argument("--room-ms", type=float, default=130.0, help="the SLO less the class's own latency")
    args = parser.parse_args()
    mu = 1000.0 / args.service_ms
    rate = args.load * mu
    with tempfile.TemporaryDirectory() as where:
        fractions = [stage_fraction(args.service_ms / 1000, rate, args.stage_s, args.room_ms / 1000, seed, Path(where))
                     for seed in range(args.stages)]
    steady = math.exp(-(mu - rate) * args.room_ms / 1000)
    print(f"{args.stages} stages of {args.stage_s:g} s at {args.load:.0%} load (mu {mu:g}/s): fraction beyond "
          f"{args.room_ms:g} ms on the device: mean {statistics.mean(fractions):.1%}, "
          f"sd {statistics.stdev(fractions):.1%}, min {min(fractions):.1%}, max {max(fractions):.1%}; "
          f"steady state {steady:.1%}")


if __name__ == "__main__":
    main()
