"""The `bench-plugin` command: work with stored results without running Locust.

    bench-plugin report DIR            regenerate summary.json, summary.md, report.html and report.md
    bench-plugin report DIR_A DIR_B    compare two campaigns side by side (refused, with the differing
                                       fixed conditions named, when they are not the same experiment)
    bench-plugin validate FILE...      check scenario files (and warn of stages too short to bound a P95)
    bench-plugin plan DIR --traffic llm=R1,embedding=R2,asr=R3 [--headroom 0.2] [--gpu-cost C]
                                       how many GPUs, shared how, hold that traffic within each arm's
                                       envelope; writes DIR/plan.json and adds the plan to its reports

A campaign itself runs with `locust --headless -f locustfiles/mixed.py --scenario ...`.
"""

from __future__ import annotations

import argparse
import json
import math
import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from bench_plugin.analysis.comparability import Campaign, differences
from bench_plugin.results.store import StoreError
from bench_plugin.results.summary import Summary, SummaryError
from bench_plugin.scenario import Scenario, ScenarioError, load_scenario

T = TypeVar("T")


class CliError(Exception):
    """A problem with the command's input; printed as one line, exit status 2."""


def _results_dir(path: Path) -> Path:
    """``path`` as a results directory: its results.sqlite, or one unpacked from its packed store (results/archive)."""
    from bench_plugin.results.archive import ArchiveError, unpack_store

    if path.is_dir():
        try:
            packed = unpack_store(path)
        except ArchiveError as exc:
            raise CliError(str(exc)) from None
        if packed is not None:
            sys.stderr.write(f"bench-plugin: unpacked {path / 'results.sqlite'} from {packed.name}\n")
    if not (path / "results.sqlite").is_file():
        raise CliError(f"{path}: not a results directory (no results.sqlite, nor a results.tar.xz holding one)")
    return path


def _store_errors(directory: Path, action: Callable[[], T]) -> T:
    """``action``'s result; a store or summary it cannot read is one line naming the directory."""
    try:
        return action()
    except sqlite3.DatabaseError as exc:
        raise CliError(f"{directory / 'results.sqlite'}: unreadable results store: {exc}") from None
    except (StoreError, SummaryError) as exc:
        raise CliError(str(exc)) from None
    except (ValueError, TypeError, KeyError, AttributeError, IndexError, OverflowError) as exc:
        # A value of the wrong type or form in the store (a damaged file, a hand edit): what reading it raised,
        # in one line. JSON and UTF-8 errors, and a Summary that does not validate, are ValueErrors.
        problem = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
        raise CliError(f"{directory / 'results.sqlite'}: holds a value this version cannot read ({problem}); "
                       "if the file is intact, this is a bug: please report this line") from None


def regenerate(directory: Path, summary: Summary | None = None) -> None:
    """Rewrite every derived file of one campaign from its results.sqlite (``summary``: already computed)."""
    from bench_plugin.report.outputs import write_outputs

    _store_errors(directory, lambda: write_outputs(directory, summary))


def load_campaign(directory: Path) -> Campaign:
    """A campaign's summary (computed afresh from its store, nothing written) and resolved scenario."""
    from bench_plugin.report.outputs import summarise

    try:
        scenario = json.loads((directory / "scenario.resolved.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise CliError(f"{directory}: cannot read its scenario: {exc}") from None
    summary = _store_errors(directory, lambda: summarise(directory))
    return Campaign(name=str(directory), summary=summary, scenario=scenario)


def cmd_report(args: argparse.Namespace) -> int:
    dirs = [_results_dir(Path(d)) for d in args.dirs]
    if len(dirs) > 2:
        raise CliError("give one results directory (regenerate) or two (compare)")
    campaigns = [load_campaign(d) for d in dirs] if len(dirs) == 2 else []
    if campaigns:  # judged before anything is written: a refused comparison leaves both folders as they were
        fixed = differences(campaigns[0], campaigns[1])
        if fixed:
            for diff in fixed:
                sys.stderr.write(f"bench-plugin: error: not the same experiment: {diff}\n")
            return 2
    for index, directory in enumerate(dirs):
        regenerate(directory, campaigns[index].summary if campaigns else None)
        print(f"bench-plugin: wrote {directory}/summary.json, summary.md, report.html, report.md")
    if len(dirs) == 1:
        return 0
    from bench_plugin.report.side_by_side import render_side_by_side

    a, b = campaigns
    text = render_side_by_side(a, b, differences(a, b, context=True))
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
        print(f"bench-plugin: wrote {args.out}")
    else:
        sys.stdout.write(text)
    return 0


def _count(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else many or one + 's'}"


def outline(scenario: Scenario) -> str:
    """One line of what a scenario runs: arms, repeats, its stages or its search, its classes."""
    if scenario.search is not None:
        search = scenario.search
        mix = ", ".join(f"{name} {rate:g}" for name, rate in search.mix.items())
        rays = len(search.rays())
        along = (f" along {rays} rays" + (f" ({len(search.held_out)} held out)" if search.held_out else "")
                 if rays > 1 else "")
        stages = (f"{search.stage_duration_s:g}-s stages" if search.stage_requests is None else
                  f"{search.stage_duration_s:g}-{search.longest_probe_s:g}-s stages of {search.stage_requests} "
                  "requests of the least loaded class")
        load = (f"an adaptive search from scale {search.start_scale:g} up to {search.max_scale:g} of "
                f"{{{mix}}} req/s{along} in {stages}, to {search.precision:.0%}")
    else:
        load = _count(len(scenario.stages), "stage")
    return (f"{_count(len(scenario.arms), 'arm')} x {_count(scenario.repeats, 'repeat')}, {load}, "
            f"classes {', '.join(scenario.classes.names())}")


def cmd_validate(args: argparse.Namespace) -> int:
    from bench_plugin.analysis.planning import sample_warnings

    failed = 0
    for name in args.files:
        try:
            scenario = load_scenario(Path(name))
        except ScenarioError as exc:
            failed += 1
            for line in str(exc).splitlines():
                sys.stderr.write(f"bench-plugin: error: {line}\n")
            continue
        print(f"{name}: ok ({scenario.name}: {outline(scenario)})")
        for line in sample_warnings(scenario):
            sys.stderr.write(f"bench-plugin: warning: {name}: {line}\n")
    return 2 if failed else 0


def parse_traffic(text: str, classes: list[str]) -> dict[str, float]:
    """``llm=20,embedding=200`` -> {class: req/s}; CliError naming the part that is wrong."""
    out: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, sep, value = part.partition("=")
        name = name.strip()
        if not sep:
            raise CliError(f"--traffic {text}: {part!r} is not CLASS=REQ_PER_S")
        if name not in classes:
            raise CliError(f"--traffic {text}: {name!r} is not a class of this campaign ({', '.join(classes)})")
        if name in out:
            raise CliError(f"--traffic {text}: {name} is given twice")
        try:
            rate = float(value)
        except ValueError:
            raise CliError(f"--traffic {text}: {value!r} is not a number of requests per second") from None
        if not (math.isfinite(rate) and rate >= 0):
            raise CliError(f"--traffic {text}: {name}={value}: give a rate of 0 or more")
        out[name] = rate
    if not any(out.values()):
        raise CliError(f"--traffic {text}: give some class a rate above 0")
    return {name: out.get(name, 0.0) for name in classes if name in out}


def cmd_plan(args: argparse.Namespace) -> int:
    from bench_plugin.analysis.packing import capacity_plans
    from bench_plugin.report.plan import terminal
    from bench_plugin.results.plan import FILENAME, write_plan

    directory = _results_dir(Path(args.dir))
    if not (math.isfinite(args.headroom) and 0 <= args.headroom <= 10):
        raise CliError(f"--headroom {args.headroom:g}: give a fraction from 0 to 10 (0.2: 20% headroom)")
    if args.gpu_cost is not None and not (math.isfinite(args.gpu_cost) and args.gpu_cost > 0):
        raise CliError(f"--gpu-cost {args.gpu_cost:g}: give a positive cost per GPU")
    campaign = load_campaign(directory)
    summary = campaign.summary
    classes = summary.classes or []
    traffics = [parse_traffic(text, classes) for text in args.traffic]
    if summary.comparison is None or not any(arm.envelope for arm in summary.comparison.arms.values()):
        raise CliError(f"{directory}: no envelope to plan on: the campaign searched no rays "
                       "(give its scenario search.mixes, e.g. `mixes: default`)")
    document = capacity_plans(summary, str(directory), traffics, args.headroom, args.gpu_cost)
    write_plan(directory / FILENAME, document)
    if args.json:
        sys.stdout.write(document.model_dump_json(indent=2, by_alias=True) + "\n")
    else:
        sys.stdout.write(terminal(document, summary.control))
    sys.stdout.flush()  # the plan before the line on stderr, where both go to one file
    regenerate(directory, summary)
    sys.stderr.write(f"bench-plugin: wrote {directory / FILENAME}; report.html and report.md show the plan\n")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of `bench-plugin`."""
    parser = argparse.ArgumentParser(prog="bench-plugin", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    report = sub.add_parser("report", help="regenerate a campaign's reports, or compare two campaigns")
    report.add_argument("dirs", nargs="+", metavar="DIR", help="results directories")
    report.add_argument("--out", help="with two directories: write the comparison here instead of stdout")
    report.set_defaults(run=cmd_report)
    validate = sub.add_parser("validate", help="check scenario files")
    validate.add_argument("files", nargs="+", metavar="FILE")
    validate.set_defaults(run=cmd_validate)
    plan = sub.add_parser("plan", help="how many GPUs, shared how, hold a traffic within each arm's envelope")
    plan.add_argument("dir", metavar="DIR", help="results directory of a campaign that searched rays")
    plan.add_argument("--traffic", action="append", required=True, metavar="CLASS=R,...",
                      help="the traffic to hold, req/s per class (repeat for several traffics)")
    plan.add_argument("--headroom", type=float, default=0.2,
                      help="load each GPU to its boundary / (1 + HEADROOM) (default 0.2)")
    plan.add_argument("--gpu-cost", type=float, default=None, help="cost of one GPU, to price each plan")
    plan.add_argument("--json", action="store_true", help="print plan.json's document instead of the text")
    plan.set_defaults(run=cmd_plan)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `bench-plugin` console script."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.run(args))
    except CliError as exc:
        sys.stderr.write(f"bench-plugin: error: {exc}\n")
        return 2


if __name__ == "__main__":
    sys.exit(main())
