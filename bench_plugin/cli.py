"""The `bench-plugin` command: work with stored results without running Locust.

    bench-plugin report DIR            regenerate summary.json, summary.md, report.html and report.md
    bench-plugin report DIR_A DIR_B    compare two campaigns side by side (refused, with the differing
                                       fixed conditions named, when they are not the same experiment)
    bench-plugin validate FILE...      check scenario files (and warn of stages too short to bound a P95)

A campaign itself runs with `locust --headless -f locustfiles/mixed.py --scenario ...`.
"""

from __future__ import annotations

import argparse
import json
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
    if not (path / "results.sqlite").is_file():
        raise CliError(f"{path}: not a results directory (no results.sqlite)")
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
        load = (f"an adaptive search from scale {search.start_scale:g} up to {search.max_scale:g} of "
                f"{{{mix}}} req/s in {search.stage_duration_s:g}-s stages, to {search.precision:.0%}")
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
