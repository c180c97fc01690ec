"""``--warm-start-from DIR``: the brackets an earlier campaign's searches left, where this one's first repeats start.

A campaign run again (a new driver, a new model version, the same servers on another host) usually finds its
boundaries near where the last one did. Read here once, as the campaign starts: for each arm of this scenario
that the earlier campaign (its results directory) also searched, and each ray of a segment that loads the same
classes at the same rates at scale 1, the bracket that ray's latest search there ended with, or, for a search
cut short, the bracket its decided probes gave (analysis/search.left_bracket). The conductor starts the ray's
search in the arm's first repeat at that bracket, as a warm start starts a later repeat at an earlier one's
(analysis/search.py, 4): where it first looks, never what it decides. The brackets are recorded with the
campaign (meta ``warm_start_from``), so a resume starts from the same ones without the earlier campaign.

Refused in one line: a directory with no results store, a store this code cannot read, a campaign that searched
nothing, a scenario with no ``search``, and an earlier campaign none of whose searches matches one of this
scenario's (arm, classes, ray, rates).
"""

from __future__ import annotations

from pathlib import Path

from bench_plugin.analysis.search import left_bracket, segment_rays
from bench_plugin.results.store import StoreError, open_campaign
from bench_plugin.results.summary import BorrowedBracket, WarmStartFrom
from bench_plugin.scenario import Scenario

STORE = "results.sqlite"


class WarmStartRefused(Exception):
    """The earlier campaign cannot start this one's searches; the message is one line."""


def borrow(given: str, scenario: Scenario) -> WarmStartFrom:
    """The brackets of the campaign in directory ``given`` that ``scenario``'s searches start from; WarmStartRefused
    naming the problem."""
    where = f"--warm-start-from {given}"
    if scenario.search is None:
        raise WarmStartRefused(f"{where}: the scenario {scenario.name} has no search to start")
    path = Path(given) / STORE
    if not path.is_file():
        raise WarmStartRefused(f"{where}: no {STORE} there (give the earlier campaign's results directory)")
    try:
        with open_campaign(path) as reader:
            record = reader.record()
            earlier = record.scenario.resolved
            if earlier is None or earlier.search is None:
                raise WarmStartRefused(f"{where}: its campaign searched no boundary")
            left: dict[tuple[str, tuple[str, ...], str], BorrowedBracket] = {}
            for trial in reader.trials():  # in run order: a later repeat's bracket replaces an earlier one's
                results = reader.search_results(trial.id)
                steps = reader.search_steps(trial.id)
                for segment in trial.segments:
                    for ray, mix in segment_rays(earlier.search.rays(), segment.classes).items():
                        bracket = left_bracket(
                            [r for r in results if r.segment == segment.index and r.ray == ray],
                            [(s.scale, s.passed) for s in steps if s.segment == segment.index and s.ray == ray])
                        if bracket is not None:
                            key = (trial.arm, tuple(sorted(mix)), ray)
                            left[key] = BorrowedBracket(arm=trial.arm, classes=sorted(mix), ray=ray, mix=mix,
                                                        lo=bracket[0], hi=bracket[1])
    except StoreError as exc:
        raise WarmStartRefused(f"{where}: {exc}") from None
    brackets = [b for b in left.values() if _same_ray(b, scenario)]
    if not brackets:
        raise WarmStartRefused(f"{where}: none of its searches is one of this scenario's (the same arm, ray, classes "
                               "and rates at scale 1)")
    return WarmStartFrom(directory=given, campaign=record.scenario.name, sha256=record.scenario.sha256,
                         started_s=record.started_s, brackets=brackets)


def _same_ray(bracket: BorrowedBracket, scenario: Scenario) -> bool:
    """Whether ``scenario`` has ``bracket``'s arm and ray, loading its classes at the same rates at scale 1."""
    assert scenario.search is not None
    if bracket.arm not in {arm.name for arm in scenario.arms}:
        return False
    mix = scenario.search.rays().get(bracket.ray)
    return mix is not None and {c: mix.get(c) for c in bracket.classes} == bracket.mix
