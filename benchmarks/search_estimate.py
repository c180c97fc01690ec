"""Benchmark: an envelope campaign's device time, estimated before it runs, for each setting of its search.

    python benchmarks/search_estimate.py [SCENARIO] --boundaries RESULTS [--boundary ARM:RAY=SCALE ...]
        [--stage-s S] [--hold-s S] [--stage-requests N] [--max-extensions N] [--probe-extensions N]
        [--growth G] [--start-scale S] [--skip-futile] [--cold] [--warm] [--from-prior]
        [--warm-start-from RESULTS] [--factor CLASS=F] [--band F] [--gap-s S]
        [--hold-drop D] [--start-s S] [--json]

The campaign's own search (analysis/search.py's ``RaySearches``, warm starts through ``prior_bracket``, each
stage as long as ``Search.stage_length_s`` makes it) is run against an oracle that knows where each ray's
boundary lies, instead of against servers: nothing but the arithmetic of the search is estimated, so the
levers that change which probes run and how long (stage length, ``stage_requests``, holds, warm start,
``skip_futile_extensions``) can be compared in seconds, and only the chosen one spends device time.

The oracle, per probe at scale ``s`` of a ray whose boundary is ``b`` (``--band`` F, default 0.12: the H200's):

- within ``b F sqrt(100 / n)`` of ``b``, ``n`` the requests its least loaded class has been offered over its
  runs: undecided (near a boundary the fraction beyond an SLO is near its allowance, and the bounds on it
  narrow with the square root of the requests), run again up to ``max_extensions`` times, then taken on its
  point estimate (passes where ``s <= b``); with ``skip_futile_extensions`` a probe is not extended where
  even its last extension would leave it in that band (a hold too with ``skip_futile_holds``);
- above it: fails, decided;
- below it: passes, decided once ``n`` is at least :data:`PASS_REQUESTS` (so few that none may be beyond its
  P95 at 95% confidence).

A hold is judged the same way against a boundary ``--hold-drop`` D lower, ``b (1 - D)``: a short probe starts
from idle queues and passes a little above what a long stage holds (docs/benchmarks.md, "Short stages near
the boundary"), so some holds fail after their probes passed.

Boundaries come from ``--boundaries``: a campaign's results directory or tarball (each arm and ray's latest
estimate, or for a search cut short the midpoint of the bracket its probes gave), or a ``search_savings.json``
(the simulator's closed form); ``--boundary ARM:RAY=SCALE`` wins (``RAY@CLASSES`` where a segment measures
some of the ray's classes: ``exclusive:mix@llm``). A ray with no boundary is an error naming it. Each stage
also costs ``--gap-s`` (the drain and the decision between stages) and each segment ``--start-s`` (its
servers started and ready). What the oracle leaves out: set-aside stages and rollbacks; the band and the
drop, fitted to campaigns that ran, stand in for all the noise (docs/benchmarks.md, "Estimating a campaign's
device time").
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from bench_plugin.analysis.search import RaySearches, borrowed_start, prior_bracket, segment_rays
from bench_plugin.results.archive import ArchiveError, results_dir
from bench_plugin.results.summary import BorrowedBracket, SearchResult
from bench_plugin.results.words import Phase
from bench_plugin.scenario import load_scenario
from bench_plugin.scenario.models import Scenario, Search

PASS_REQUESTS = 59
"""The fewest requests a class must be offered for a probe with none beyond its P95 SLO to pass at 95% confidence
(0.95^59 < 0.05)."""


@dataclass
class RayTime:
    arm: str
    repeat: int
    ray: str
    boundary: float
    runs: int
    stage_s: float
    holds_s: float
    lo: float | None
    hi: float | None
    status: str


BAND_REQUESTS = 100
"""The requests of the least loaded class at which the undecided band is ``--band`` wide; with ``n`` it is
``band * sqrt(BAND_REQUESTS / n)`` (a fraction's confidence bounds narrow with the square root of the requests)."""


def near(scale: float, boundary: float, band: float, offered: float) -> bool:
    """Whether ``scale`` lies in the band around ``boundary`` that ``offered`` requests cannot decide."""
    return abs(scale - boundary) <= boundary * band * math.sqrt(BAND_REQUESTS / max(offered, 1.0))


def outcome(scale: float, boundary: float, band: float, offered: float) -> tuple[bool, bool]:
    """(passed, decided) of a probe at ``scale``, its least loaded class offered ``offered`` requests so far."""
    if near(scale, boundary, band, offered):
        return scale <= boundary, False
    if scale > boundary:
        return False, True
    return True, offered >= PASS_REQUESTS


def segments(scenario: Scenario, sharing: str) -> list[list[str]]:
    """The class groups an arm measures together: each class alone in the exclusive control, all at once else."""
    names = scenario.classes.names()
    return [[name] for name in names] if sharing == "exclusive" else [names]


def search_segment(spec: Search, rays: dict[str, dict[str, float]], bounds: dict[str, float], band: float,
                   gap_s: float, priors: dict[str, tuple[float | None, float | None]] | None,
                   probe_extensions: int | None = None, hold_drop: float = 0.0
                   ) -> tuple[list[SearchResult], dict[str, tuple[int, float, float]]]:
    """Every ray of one segment searched against the oracle: their results, and per ray (stage-runs, stage seconds
    with the gaps, of them in holds). ``probe_extensions``: a probe's extensions, if not ``max_extensions`` (a
    hold's stay ``max_extensions``)."""
    searches = RaySearches(rays, spec.start_scale, spec.max_scale, spec.precision, growth=spec.growth,
                           minimum=spec.min_scale, sustain=spec.sustain_duration_s > 0, budget=spec.budget,
                           priors=priors)
    spent: dict[str, tuple[int, float, float]] = {ray: (0, 0.0, 0.0) for ray in rays}
    while (search := searches.propose()) is not None:
        scale = search.propose()
        assert scale is not None
        hold = search.phase == Phase.SUSTAIN
        load = search.offered(scale)
        duration = spec.stage_length_s(load, hold=hold)
        least = min(rate for rate in load.values() if rate > 0)
        runs = 0
        while True:
            runs += 1
            boundary = bounds[search.ray] * (1 - hold_drop if hold else 1)
            passed, decided = outcome(scale, boundary, band, least * duration * runs)
            if decided or runs > (spec.max_extensions if hold or probe_extensions is None else probe_extensions):
                break
            futile = near(scale, boundary, band, least * duration * (spec.max_extensions + 1))
            if (spec.skip_futile_holds if hold else spec.skip_futile_extensions) and futile:
                break
        n, seconds, held = spent[search.ray]
        cost = runs * (duration + gap_s)
        spent[search.ray] = (n + runs, seconds + cost, held + (cost if hold else 0.0))
        search.record(scale, passed, decided=decided, runs=runs)
    return searches.results(0), spent


def estimate(scenario: Scenario, bounds: dict[tuple[str, str], float], band: float, gap_s: float,
             warm: bool, from_prior: bool = False, probe_extensions: int | None = None,
             hold_drop: float = 0.0, borrowed: list[BorrowedBracket] | None = None) -> list[RayTime]:
    """Every arm, repeat and ray of ``scenario`` searched against the oracle. ``from_prior``: repeat 1 also starts
    warm, from a bracket of the search's precision around each boundary (as a campaign started with
    ``--warm-start-from`` an earlier one that found the same boundaries would); ``borrowed``: repeat 1 starts at
    these brackets instead (``--warm-start-from`` a campaign whose boundaries may differ from ``bounds``)."""
    spec = scenario.search
    assert spec is not None
    rows: list[RayTime] = []
    ended: dict[tuple[str, int, str], list[SearchResult]] = {}
    for repeat in range(1, scenario.repeats + 1):
        for arm in scenario.arms:
            for index, classes in enumerate(segments(scenario, arm.sharing)):
                rays = segment_rays(spec.rays(), classes)
                mine = {}
                for ray, mix in rays.items():
                    key = ray_key(ray, list(mix), scenario.classes.names())
                    if (arm.name, key) not in bounds:
                        raise SystemExit(f"search_estimate: no boundary for arm {arm.name} ray {key}: "
                                         f"give --boundary {arm.name}:{key}=SCALE")
                    mine[ray] = bounds[(arm.name, key)]
                priors = None
                if repeat == 1 and from_prior:  # a bracket of the search's precision around each boundary
                    low = 1 - spec.precision / 2
                    priors = {ray: (b * low, b * low / (1 - spec.precision)) for ray, b in mine.items()}
                elif repeat == 1 and borrowed:
                    priors = {ray: b for ray, mix in rays.items()
                              if (b := borrowed_start(borrowed, arm.name, ray, mix)) is not None}
                elif warm:
                    priors = {ray: b for ray in rays
                              if (b := prior_bracket(ended.get((arm.name, index, ray), []))) is not None}
                results, spent = search_segment(spec, rays, mine, band, gap_s, priors, probe_extensions, hold_drop)
                for result in results:
                    ended.setdefault((arm.name, index, result.ray), []).append(result)
                    runs, seconds, held = spent[result.ray]
                    key = ray_key(result.ray, result.classes, scenario.classes.names())
                    rows.append(RayTime(arm.name, repeat, key, mine[result.ray], runs, round(seconds, 1),
                                        round(held, 1), result.lo, result.hi, result.status))
    return rows


def ray_key(ray: str, classes: list[str], names: list[str]) -> str:
    """How a ray is named in boundaries: its name, and ``@classes`` where a segment measures only some of its
    classes (``mix@llm``: the mix ray in the exclusive control's llm segment)."""
    mine = [name for name in names if name in classes]
    return ray if set(mine) == set(names) or ray == "+".join(mine) else f"{ray}@{'+'.join(mine)}"


@contextmanager
def store_of(path: Path) -> Iterator[Path]:
    """The results.sqlite of a results directory, or of a tarball of one (unpacked while in use)."""
    try:
        with results_dir(path) as directory:
            yield directory / "results.sqlite"
    except ArchiveError as exc:
        raise SystemExit(f"search_estimate: {exc}") from None


def recorded_scenario(path: Path) -> Scenario:
    """The scenario a campaign recorded, as it ran (its overrides applied)."""
    from bench_plugin.results.store import open_campaign

    with store_of(path) as db, open_campaign(db) as reader:
        scenario = reader.record().scenario.resolved
    if scenario is None:
        raise SystemExit(f"search_estimate: {path}: its campaign recorded no scenario")
    return scenario


def stored_boundaries(path: Path, names: list[str]) -> dict[tuple[str, str], float]:
    """(arm, ray) -> the latest estimate a campaign's store holds, from a results directory or its tarball; or the
    truths of a ``search_savings.json`` (benchmarks/search_savings.py: the simulator's closed form)."""
    from bench_plugin.results.store import open_campaign

    if path.suffix == ".json":
        data = json.loads(path.read_text())
        rows = data["rays"] if isinstance(data, dict) else data  # "ray": "NAME (CLASS+CLASS)"
        return {(row["arm"], ray_key(row["ray"].split(" (")[0], row["ray"].split(" (")[1].rstrip(")").split("+"),
                                     names)): float(row["truth"]) for row in rows}
    with store_of(path) as db:
        out: dict[tuple[str, str], float] = {}
        with open_campaign(db) as reader:
            for trial in reader.trials():
                ended = {(r.segment, r.ray) for r in reader.search_results(trial.id)}
                for result in reader.search_results(trial.id):
                    if result.estimate is not None:
                        out[(trial.arm, ray_key(result.ray, result.classes, names))] = result.estimate
                cut: dict[tuple[int, str], list[tuple[float, bool]]] = {}
                for step in reader.search_steps(trial.id):
                    if (step.segment, step.ray) not in ended:
                        cut.setdefault((step.segment, step.ray), []).append((step.scale, step.passed))
                classes = {s.index: s.classes for s in trial.segments}
                for (segment, ray), probes in cut.items():  # a search cut short: the midpoint of its probes' bracket
                    fails = [scale for scale, passed in probes if not passed]
                    passes = [scale for scale, passed in probes if passed and (not fails or scale < min(fails))]
                    if passes and fails:
                        key = (trial.arm, ray_key(ray, classes.get(segment, names), names))
                        out.setdefault(key, (max(passes) + min(fails)) / 2)
        return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenario", nargs="?",
                        help="the scenario (default: the one the --boundaries campaign recorded, as it ran)")
    parser.add_argument("--boundaries", help="a campaign's results directory or tarball: its rays' estimates")
    parser.add_argument("--boundary", action="append", default=[], metavar="ARM:RAY=SCALE")
    parser.add_argument("--stage-s", type=float, help="search.stage_duration_s")
    parser.add_argument("--hold-s", type=float, help="search.sustain_s")
    parser.add_argument("--stage-requests", type=int, help="search.stage_requests")
    parser.add_argument("--max-extensions", type=int, help="search.max_extensions")
    parser.add_argument("--growth", type=float, help="search.growth")
    parser.add_argument("--start-scale", type=float, help="search.start_scale")
    parser.add_argument("--skip-futile", action="store_true", help="search.skip_futile_extensions on")
    parser.add_argument("--skip-futile-holds", action=argparse.BooleanOptionalAction,
                        help="search.skip_futile_holds on (or off: --no-skip-futile-holds)")
    parser.add_argument("--cold", action="store_true", help="search.warm_start off")
    parser.add_argument("--warm", action="store_true", help="search.warm_start on")
    parser.add_argument("--warm-start-from", metavar="RESULTS",
                        help="repeat 1 starts at the brackets this campaign (directory or tarball) left, as the option "
                             "of that name does")
    parser.add_argument("--factor", action="append", default=[], metavar="CLASS=F",
                        help="multiply the boundary of every ray that loads CLASS by F (what if it were slower)")
    parser.add_argument("--from-prior", action="store_true",
                        help="repeat 1 warm too, from brackets around the boundaries (--warm-start-from)")
    parser.add_argument("--band", type=float, default=0.12,
                        help="the oracle's undecided band around a boundary, as a fraction of it, at 100 requests")
    parser.add_argument("--hold-drop", type=float, default=0.0,
                        help="a hold's boundary below a probe's, as a fraction (a short probe's optimism)")
    parser.add_argument("--gap-s", type=float, default=1.0, help="seconds between two stages")
    parser.add_argument("--start-s", type=float, default=10.0, help="seconds to start a segment's servers")
    parser.add_argument("--probe-extensions", type=int,
                        help="a probe's extensions, holds keeping max_extensions (no such key yet: what it would save)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.scenario is None and not args.boundaries:
        raise SystemExit("search_estimate: give a scenario, or --boundaries of a campaign to take its scenario")
    scenario = load_scenario(Path(args.scenario)) if args.scenario else recorded_scenario(Path(args.boundaries))
    if scenario.search is None:
        raise SystemExit(f"search_estimate: {args.scenario or args.boundaries}: not a search campaign")
    changes: dict[str, object] = {"skip_futile_extensions": args.skip_futile or scenario.search.skip_futile_extensions,
                                  "skip_futile_holds": (scenario.search.skip_futile_holds
                                                        if args.skip_futile_holds is None else args.skip_futile_holds),
                                  "warm_start": (scenario.search.warm_start or args.warm) and not args.cold}
    for key, value in (("stage_duration_s", args.stage_s), ("sustain_s", args.hold_s),
                       ("stage_requests", args.stage_requests), ("max_extensions", args.max_extensions),
                       ("growth", args.growth), ("start_scale", args.start_scale)):
        if value is not None:
            changes[key] = value
    spec = Search.model_validate({**scenario.search.model_dump(exclude_unset=True), **changes})
    scenario = scenario.model_copy(update={"search": spec})
    bounds = stored_boundaries(Path(args.boundaries), scenario.classes.names()) if args.boundaries else {}
    for given in args.boundary:
        try:
            key, value = given.split("=")
            arm, ray = key.split(":")
            bounds[(arm, ray)] = float(value)
        except ValueError:
            raise SystemExit(f"search_estimate: --boundary {given!r}: not ARM:RAY=SCALE") from None
    for given in args.factor:
        try:
            name, value = given.split("=")
            factor = float(value)
        except ValueError:
            raise SystemExit(f"search_estimate: --factor {given!r}: not CLASS=F") from None
        rays = spec.rays()
        for (arm, key) in list(bounds):
            ray, _, some = key.partition("@")
            loads = some.split("+") if some else list(rays.get(ray, {}))
            if name in loads:
                bounds[(arm, key)] *= factor
    borrowed = None
    if args.warm_start_from:
        from bench_plugin.launch.warm_from import WarmStartRefused, borrow

        with store_of(Path(args.warm_start_from)) as db:
            try:
                borrowed = borrow(str(db.parent), scenario).brackets
            except WarmStartRefused as exc:
                raise SystemExit(f"search_estimate: {exc}") from None
    rows = estimate(scenario, bounds, args.band, args.gap_s, warm=spec.warm_start, from_prior=args.from_prior,
                    borrowed=borrowed,
                    probe_extensions=args.probe_extensions, hold_drop=args.hold_drop)
    starts = sum(len(segments(scenario, arm.sharing)) for arm in scenario.arms) * scenario.repeats * args.start_s
    total = sum(r.stage_s for r in rows) + starts
    if args.json:
        print(json.dumps({"rays": [asdict(r) for r in rows], "starts_s": starts, "total_s": total}, indent=2))
        return 0
    print("| arm | repeat | ray | boundary | stage-runs | minutes (holds) | ended |")
    print("|---|---:|---|---:|---:|---|---|")
    for r in rows:
        bracket = f"[{r.lo:.3g}, {r.hi:.3g}]" if r.lo is not None and r.hi is not None else r.status
        print(f"| {r.arm} | {r.repeat} | {r.ray} | {r.boundary:.3g} | {r.runs} | {r.stage_s / 60:.2f} "
              f"({r.holds_s / 60:.2f}) | {bracket} |")
    print()
    for arm in scenario.arms:
        for repeat in range(1, scenario.repeats + 1):
            mine = [r for r in rows if r.arm == arm.name and r.repeat == repeat]
            print(f"{arm.name} repeat {repeat}: {sum(r.runs for r in mine)} stage-runs, "
                  f"{sum(r.stage_s for r in mine) / 60:.1f} min")
    print(f"all: {sum(r.runs for r in rows)} stage-runs, {total / 60:.1f} min "
          f"(stages {(total - starts) / 60:.1f}, of them holds {sum(r.holds_s for r in rows) / 60:.1f}; "
          f"starts {starts / 60:.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
