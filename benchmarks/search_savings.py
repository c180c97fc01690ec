"""What a search's levers save, and what they cost in accuracy, on the contention simulator's known envelope.

    python benchmarks/search_savings.py [--stage-s 6] [--hold-s S] [--stage-requests N] [--skip-futile] [--cold]
        [--out DIR] [--results DIR]

Runs scenarios/simulator-envelope.yaml (the exclusive control and time-slicing on one simulated device whose
envelope is known in closed form, bench_plugin/servers/device.py) with 2 repeats, ``--stage-s`` stages and
holds of ``--hold-s`` (default three stages), ``search.warm_start`` on (default) or off (``--cold``); with
``--stage-requests N`` each probe is sized by requests (``search.stage_requests``: ``--stage-s`` is then the
shortest a probe runs, the hold the longest), with ``--skip-futile`` no extension is run that is not expected
to decide its probe (``search.skip_futile_extensions``). It prints, per arm and ray, each repeat's stage-runs
and stage time and its boundary against the closed form (the error, in %, of the bracket's midpoint), how the
probes' and holds' decisions came out and with how many runs, and the campaign's device time by phase
(benchmarks/campaign_time.py). With warm
start, repeat 1 searches cold and repeat 2 starts at repeat 1's brackets, so the two columns compare the
lever on the same campaign; ``--cold`` gives the same table with both repeats cold, for the spread of a
repeat against the other without it.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml
from campaign_time import campaign_time, render

from bench_plugin.results.summary import Summary, load_summary
from bench_plugin.results.words import Phase
from bench_plugin.servers.device import arm_boundary_scale

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "scenarios" / "simulator-envelope.yaml"
SERVICE_S = {"exclusive": 0.010, "time-slicing": 0.014}
"""The simulated device's service time per request, per arm (the scenario's ``--service-ms time-slicing=14,10``)."""
LIMITS = {"llm": (160.0, 40.0), "embedding": (130.0, 20.0), "asr": (200.0, 60.0)}
"""Class -> (its tightest P95 SLO in ms, its own latency there), as the scenario sets them."""


def run_campaign(out: Path, stage_s: float, warm: bool, hold_s: float | None = None,
                 stage_requests: int | None = None, skip_futile: bool = False, skip_futile_holds: bool = False) -> Path:
    """The campaign's results directory under ``out``, run to its end."""
    data = yaml.safe_load(SCENARIO.read_text())
    data["repeats"] = 2
    data["search"].update(stage_duration_s=stage_s, sustain_s=3 * stage_s if hold_s is None else hold_s,
                          warm_start=warm, stage_requests=stage_requests, skip_futile_extensions=skip_futile,
                          skip_futile_holds=skip_futile_holds)
    scenario = out / "scenario.yaml"
    scenario.write_text(yaml.safe_dump(data, sort_keys=False))
    results = out / "results"
    locust = Path(sys.executable).parent / "locust"
    done = subprocess.run([str(locust), "--headless", "--only-summary", "--no-report", "-f",
                           str(ROOT / "locustfiles" / "mixed.py"), "--scenario", str(scenario), "--results-dir",
                           str(results)], cwd=ROOT, capture_output=True, text=True, check=False)
    (out / "locust.log").write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        raise SystemExit(f"search_savings: the campaign failed (exit {done.returncode}): see {out / 'locust.log'}")
    return results


def per_ray(summary: Summary) -> list[dict[str, object]]:
    """Per arm, ray and repeat: stage-runs, stage seconds, status, estimate and its error against the truth."""
    rows: list[dict[str, object]] = []
    for trial in summary.trials:
        stage_s = {stage.index: stage.duration_s or 0.0 for stage in trial.stages}
        for result in trial.search:
            mine = [p for p in trial.probes if p.segment == result.segment and p.ray == result.ray]
            seconds = sum(stage_s.get(i, 0.0) for p in mine for i in [*p.stages, *p.set_aside])
            truth = arm_boundary_scale(result.mix, SERVICE_S[trial.arm], LIMITS, alone=trial.arm == "exclusive")
            error = None if result.estimate is None else (result.estimate - truth) / truth
            ray = f"{result.ray} ({'+'.join(result.classes)})"
            rows.append({"arm": trial.arm, "ray": ray, "repeat": trial.repeat,
                         "runs": result.runs, "stage_s": round(seconds, 1), "status": result.status,
                         "estimate": result.estimate, "truth": round(truth, 3),
                         "error": None if error is None else round(error, 4)})
    return rows


def decisions(summary: Summary) -> dict[str, dict[str, int]]:
    """Per phase (probe, hold): how its decisions came out (``pass``, ``fail``, ``undecided``, ...) and with how many
    stage-runs pooled (``undecided in 3``), ``futile`` where extensions were skipped, over every trial."""
    out: dict[str, dict[str, int]] = {}
    for trial in summary.trials:
        for probe in trial.probes:
            if probe.decision is None:
                continue
            phase = "hold" if probe.phase == Phase.SUSTAIN else "probe"
            key = (f"{probe.decision.outcome} in {len(probe.decision.stages)}"
                   + (", futile" if probe.decision.futile else ""))
            counts = out.setdefault(phase, {})
            counts[key] = counts.get(key, 0) + 1
    return {phase: dict(sorted(counts.items())) for phase, counts in sorted(out.items())}


def render_decisions(counts: dict[str, dict[str, int]]) -> str:
    lines = ["| phase | decisions (outcome in stage-runs pooled: how many) |", "|---|---|"]
    for phase, outcomes in counts.items():
        lines.append(f"| {phase} | " + "; ".join(f"{key}: {n}" for key, n in outcomes.items()) + " |")
    return "\n".join(lines)


def render_totals(rows: list[dict[str, object]]) -> str:
    """Per repeat: its stage-runs and stage seconds over every ray, and how many of its boundaries fall within 10%
    and 20% of the closed form."""
    lines = []
    for repeat in sorted({int(str(r["repeat"])) for r in rows}):
        mine = [r for r in rows if r["repeat"] == repeat]
        errors = [abs(e) for r in mine if isinstance(e := r["error"], float)]
        runs = sum(int(str(r["runs"])) for r in mine)
        seconds = sum(float(str(r["stage_s"])) for r in mine)
        lines.append(f"repeat {repeat}: {runs} stage-runs, {seconds:.0f} s of stages; of {len(mine)} boundaries "
                     f"{sum(e <= 0.1 for e in errors)} within 10% of the truth, {sum(e <= 0.2 for e in errors)} "
                     "within 20%")
    return "\n".join(lines)


def render_rays(rows: list[dict[str, object]]) -> str:
    keys = sorted({(str(r["arm"]), str(r["ray"])) for r in rows}, key=lambda k: (k[0] != "exclusive", k))
    lines = ["| arm | ray | truth | repeat 1: runs, stage s, error | repeat 2: runs, stage s, error |",
             "|---|---|---:|---|---|"]
    for arm, ray in keys:
        cells = []
        truth = ""
        for repeat in (1, 2):
            row = next((r for r in rows if (r["arm"], r["ray"], r["repeat"]) == (arm, ray, repeat)), None)
            if row is None:
                cells.append("-")
                continue
            truth = f"{row['truth']:.3g}"
            error = row["error"]
            cells.append(f"{row['runs']}, {row['stage_s']}, " + (f"{error:+.1%}" if isinstance(error, float) else "-")
                         + ("" if row["status"] == "found" else f" ({row['status']})"))
        lines.append(f"| {arm} | {ray} | {truth} | {cells[0]} | {cells[1]} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stage-s", type=float, default=6.0,
                        help="stage length, s (the shortest, with --stage-requests)")
    parser.add_argument("--hold-s", type=float, help="hold length, s (default: three stages)")
    parser.add_argument("--stage-requests", type=int, help="size each probe to N requests of its least loaded class")
    parser.add_argument("--skip-futile", action="store_true",
                        help="search.skip_futile_extensions: no extension that is not expected to decide its probe")
    parser.add_argument("--skip-futile-holds", action="store_true",
                        help="search.skip_futile_holds: no extension of a hold that is not expected to decide it")
    parser.add_argument("--out", help="an empty or new directory (default: a temporary one)")
    parser.add_argument("--cold", action="store_true", help="both repeats cold (search.warm_start off)")
    parser.add_argument("--results", help="analyse this campaign's results directory instead of running one")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(args.out or tmp)
        out.mkdir(parents=True, exist_ok=True)
        results = Path(args.results) if args.results else run_campaign(
            out, args.stage_s, warm=not args.cold, hold_s=args.hold_s, stage_requests=args.stage_requests,
            skip_futile=args.skip_futile, skip_futile_holds=args.skip_futile_holds)
        summary = load_summary(results / "summary.json")
        rows = per_ray(summary)
        counts = decisions(summary)
        (out / "search_savings.json").write_text(json.dumps({"rays": rows, "decisions": counts}, indent=2))
        print(render_rays(rows))
        print()
        print(render_totals(rows))
        print()
        print(render_decisions(counts))
        print()
        print(render(campaign_time(results)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
