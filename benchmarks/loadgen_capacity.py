"""Benchmark: the plugin's load generator against bare Locust and against its goal, with realistic replies.

    PYTHONPATH=. .venv/bin/python benchmarks/loadgen_capacity.py [--quick] [--rounds N] [--out DIR]
        [--only WORKLOAD,...] [--nullserver BIN] [--rate WORKLOAD=R,...] [--parts cpu,search,default]
        [--default-rates R,...]
    PYTHONPATH=. .venv/bin/python benchmarks/loadgen_capacity.py --profile embedding-float:600 | bare-llm:150
        [--sampler py-spy|threads|perf|strace] [--profile-seconds S] [--profile-hz N]

The goal: at the loads where a campaign's answer is decided, the load generator is never the limit.
The server is the null server (benchmarks/nullserver, loadgen_nullserver.py), which answers with replies
of the real size and shape (16 x 1,024-float embeddings as base64 or JSON floats, 64-token vLLM-style
streams, transcriptions) at almost no CPU of its own; it runs pinned to the server cores, apart from
every load generator measured (loadgen_runs.Layout). Per workload (loadgen_workloads.py:
embedding-base64, embedding-float, llm, asr), in one run:

1. CPU per request, the plugin against bare Locust at the same rate R, in interleaved rounds
   (loadgen_cpu.py);
2. the highest rate ONE plugin process sustains: send lag P99 < 2 ms, >= 98% of the arrivals sent
   within the stage, no failed request (loadgen_search.py);
3. the default command's total (no --processes: the plugin sizes its processes itself), embedding-base64
   alone at rising rates on every core but the server's (loadgen_default.py).

Every process started is stopped on any exit. Results go to --out as loadgen_capacity.json and
loadgen_capacity.md (printed too; what docs/benchmarks.md quotes); --out/runs/ holds each campaign's
results and the logs of every process.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import loadgen_cpu
import loadgen_default
import loadgen_nullserver as nullserver
import loadgen_profile
import loadgen_search
import loadgen_variants
from loadgen_procs import CpuSampler, Processes, cpu_probe
from loadgen_report import Report
from loadgen_runs import Bench, Layout, cpu_list, own_cores
from loadgen_workloads import WORKLOADS

DEFAULT_WORKLOAD = "embedding-base64"
PARTS = ("cpu", "search", "default")


@dataclass(frozen=True)
class Settings:
    """How long and how finely to measure."""

    rounds: int
    """Interleaved rounds of the CPU-per-request comparison (each: bare, then the plugin)."""
    warm_s: float
    """The start of each round left out of its window."""
    window_s: float
    """Each round's measured window."""
    stage_s: float
    """A search stage."""
    coarse_from: float
    """The first coarse rate of a search, as a fraction of its CPU-bound estimate."""
    growth: float
    coarse_steps: int
    fine_steps: int
    coarse_tries: int
    fine_tries: int
    """Stages per rate in a search's sweeps (loadgen_stages.sustained: a rate is sustained when one of its tries is):
    the coarse sweep finds the bracket, the fine one decides within it; the default command's sweep decides too."""
    default_stage_s: float
    default_growth: float


FULL = Settings(rounds=3, warm_s=1.0, window_s=4.0, stage_s=2.5, coarse_from=0.3, growth=1.35, coarse_steps=6,
                fine_steps=2, coarse_tries=1, fine_tries=2, default_stage_s=2.5, default_growth=1.4)
QUICK = Settings(rounds=3, warm_s=1.0, window_s=2.0, stage_s=2.0, coarse_from=0.3, growth=1.5, coarse_steps=5,
                 fine_steps=1, coarse_tries=1, fine_tries=1, default_stage_s=2.0, default_growth=1.5)


def machine(layout: Layout, server: Path) -> dict[str, Any]:
    """Where and with what this run measured."""
    cpu = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                if ln.startswith("model name")), platform.processor())
    go = shutil.which("go")
    sender, busy = layout.sender, str(layout.server[0])
    return {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cpu": cpu,
            "cores": len(layout.server) + len(layout.rest),
            "python": platform.python_version(), "locust": metadata.version("locust"),
            "msgspec": metadata.version("msgspec"), "kernel": platform.release(),
            "go": subprocess.run([go, "version"], capture_output=True, text=True).stdout.strip() if go else None,
            "nullserver": nullserver.describe(server), "pinning": layout.to_dict(),
            "probe_s": {"alone": cpu_probe(sender), "server_core_busy": cpu_probe(sender, busy),
                        "alone_again": cpu_probe(sender)}}


def _rates(text: str) -> dict[str, float]:
    out = {}
    for part in text.split(","):
        name, _, rate = part.partition("=")
        if name not in WORKLOADS or not rate:
            raise argparse.ArgumentTypeError(f"{part!r}: give WORKLOAD=RATE, WORKLOAD one of {', '.join(WORKLOADS)}")
        out[name] = float(rate)
    return out


def _names(text: str) -> list[str]:
    names = text.split(",")
    unknown = [n for n in names if n not in WORKLOADS]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown workload(s) {', '.join(unknown)}: {', '.join(WORKLOADS)}")
    return names


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give a whole number of at least 1")
    return int(text)


def _parts(text: str) -> list[str]:
    parts = text.split(",")
    if any(p not in PARTS for p in parts):
        raise argparse.ArgumentTypeError(f"{text!r}: parts are {', '.join(PARTS)}")
    return parts


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f} ms"


def measure(bench: Bench, report: Report, args: argparse.Namespace, s: Settings) -> None:
    """The parts asked for, in order; a part that fails for one workload is noted and the rest goes on."""
    chosen = [WORKLOADS[name] for name in (args.only or WORKLOADS)]
    rates = {name: w.rate for name, w in WORKLOADS.items()} | (args.rate or {})
    cost: dict[str, float] = {}
    for w in chosen if "cpu" in args.parts else []:
        try:
            found = loadgen_cpu.measure(bench, w, rates[w.name], s.rounds, s.warm_s, s.window_s)
        except RuntimeError as exc:
            report.errors[f"cpu {w.name}"] = str(exc)
            continue
        report.cpu.append(found)
        if (ms := found.median(found.plugin)) is not None:
            cost[w.name] = ms
        print(f"cpu per request, {w.name}: bare {_ms(found.median(found.bare))}, plugin {_ms(ms)}", file=sys.stderr)
    one: dict[str, float] = {}
    for w in chosen if "search" in args.parts else []:
        estimate = 1000.0 / cost[w.name] if w.name in cost else 4 * rates[w.name]
        try:
            found = loadgen_search.search(bench, w, estimate, s.coarse_from, s.growth, s.coarse_steps, s.fine_steps,
                                          (s.coarse_tries, s.fine_tries), s.stage_s)
        except RuntimeError as exc:
            report.errors[f"search {w.name}"] = str(exc)
            continue
        report.searches.append(found)
        if found.best is not None:
            one[w.name] = found.best.rate
        print(f"one process, {w.name}: {f'{found.best.rate:,.0f} req/s' if found.best else 'below the lowest rate'}",
              file=sys.stderr)
    if "default" in args.parts and (args.default_rates or any(w.name == DEFAULT_WORKLOAD for w in chosen)):
        w = WORKLOADS[DEFAULT_WORKLOAD]
        base = one.get(w.name) or (1000.0 / cost[w.name] * 0.5 if w.name in cost else rates[w.name])
        offered = args.default_rates or loadgen_default.rates(base, len(bench.layout.rest), s.default_growth,
                                                              args.target)
        try:
            report.default = loadgen_default.run(bench, w, offered, s.default_stage_s, s.fine_tries)
        except RuntimeError as exc:
            report.errors[f"default {w.name}"] = str(exc)


def run(args: argparse.Namespace) -> Report:
    """The whole benchmark."""
    settings = QUICK if args.quick else FULL
    if args.rounds is not None:
        settings = dataclasses.replace(settings, rounds=args.rounds)
    out = Path(args.out or tempfile.mkdtemp(prefix="loadgen-capacity-"))
    if out.exists() and any(out.iterdir()):
        raise RuntimeError(f"--out {out}: not an empty directory (the campaigns' results would mix)")
    out.mkdir(parents=True, exist_ok=True)
    layout = Layout.of(own_cores(), args.server_cores)
    os.sched_setaffinity(0, layout.server)  # this script and its CPU sampler stay off the measured cores
    server = nullserver.binary(args.nullserver)
    port = nullserver.free_port()
    url = f"http://127.0.0.1:{port}"
    report = Report(machine(layout, server), "quick" if args.quick else "full",
                    {**dataclasses.asdict(settings), "bare_arrivals": args.bare_arrivals, "variant": args.variant,
                     "target": args.target},
                    str(out))
    runs = out / "runs"  # every campaign's results and scenario, bare Locust's rounds, logs/ of every process
    with Processes(runs / "logs") as procs, CpuSampler() as sampler:
        proc = procs.start("nullserver", nullserver.command(server, port, itl_ms=2.0), cpu_list(layout.server))
        nullserver.wait_healthy(url)
        bench = Bench(procs, sampler, url, runs, layout, args.bare_arrivals, args.variant)
        if args.profile:
            (out / "profile.md").write_text(loadgen_profile.profile(
                bench, args.profile, WORKLOADS, args.profile_seconds, args.sampler, args.profile_hz))
            return report
        try:
            measure(bench, report, args, settings)
        except (Stopped, KeyboardInterrupt) as exc:  # what was measured is kept; every process is stopped below
            report.errors["run"] = f"stopped ({exc or 'Ctrl-C'}): the parts after it did not run"
        if proc.poll() is not None:
            raise RuntimeError(f"the null server exited during the run: {procs.last_line(proc)}")
    return report


class Stopped(Exception):
    """SIGTERM arrived (a time limit): the run ends, keeping what it measured."""


def _stop(signum: int, _: object) -> None:
    raise Stopped(f"signal {signum}")


def main() -> None:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="shorter windows and stages, a coarser search")
    parser.add_argument("--rounds", type=_positive, metavar="N",
                        help="interleaved rounds of the CPU comparison (default 3); more narrow the medians")
    parser.add_argument("--out", help="an empty or new directory for the results (default: a temporary one)")
    parser.add_argument("--nullserver", metavar="BIN", help="a prebuilt null server (default: built with go into "
                        f"{nullserver.CACHE}, rebuilt when its source is newer)")
    parser.add_argument("--only", type=_names, metavar="WORKLOAD,...", help=f"of {', '.join(WORKLOADS)}")
    parser.add_argument("--parts", type=_parts, default=list(PARTS), metavar="PART,...",
                        help=f"of {', '.join(PARTS)} (default: all)")
    parser.add_argument("--rate", type=_rates, metavar="WORKLOAD=R,...",
                        help="R of the CPU-per-request rounds (default: " + ", ".join(
                            f"{n}={w.rate:g}" for n, w in WORKLOADS.items()) + ")")
    parser.add_argument("--bare-arrivals", choices=("poisson", "paced"), default="poisson",
                        help="when bare Locust's users send: one Poisson stream, as the plugin's arrivals (default), "
                             "or each user paced by constant_throughput (its users drift into bursts)")
    parser.add_argument("--variant", choices=sorted(loadgen_variants.VARIANTS),
                        help="change one thing in how the plugin sends, to measure its cost: "
                             + "; ".join(f"{k}: {v}" for k, v in sorted(loadgen_variants.VARIANTS.items())))
    parser.add_argument("--server-cores", type=int, metavar="N",
                        help="cores for the null server and the master (default: a quarter of the cores, at least 1)")
    parser.add_argument("--default-rates", type=lambda t: [float(v) for v in t.split(",")], metavar="R,...",
                        help="the default command's stages (default: from what one process sustained)")
    parser.add_argument("--target", type=float, default=3000.0,
                        help="a rate the default command's sweep includes where it reaches it (default 3000)")
    parser.add_argument("--profile", metavar="[bare-]WORKLOAD:RATE",
                        help="instead, watch the plugin's worker (or bare Locust) at one rate with --sampler")
    parser.add_argument("--sampler", choices=loadgen_profile.SAMPLERS, default="py-spy",
                        help="what --profile watches with (default py-spy; loadgen_profile.py says what each gives)")
    parser.add_argument("--profile-seconds", type=float, default=8.0, metavar="S",
                        help="how long --profile watches, from the stage's second second (default 8)")
    parser.add_argument("--profile-hz", type=_positive, default=250, metavar="N",
                        help="py-spy's and perf's samples a second (default 250)")
    args = parser.parse_args()
    missing = loadgen_profile.missing_tool(args.sampler) if args.profile else None
    if missing:
        parser.error(f"--sampler {args.sampler}: {missing}")
    signal.signal(signal.SIGTERM, _stop)
    started = time.time()
    try:
        report = run(args)
    except (RuntimeError, OSError, subprocess.CalledProcessError) as exc:
        sys.exit(f"loadgen_capacity: error: {exc}")
    report.seconds = time.time() - started
    out = Path(report.out)
    if args.profile:
        print((out / "profile.md").read_text())
        return
    (out / "loadgen_capacity.json").write_text(json.dumps(report.to_dict(), indent=2))
    text = report.markdown()
    (out / "loadgen_capacity.md").write_text(text)
    print(text)
    print(f"results in {out}")
    if "run" in report.errors:
        sys.exit(130)


if __name__ == "__main__":
    main()
