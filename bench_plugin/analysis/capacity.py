"""Capacity: the outcome of an adaptive boundary search, per arm, over its repeats.

In a campaign with ``search:`` every trial searched its own boundary (analysis/search.py): the scale
of the load mix at which every class still met its SLOs and error budget. Stages of different arms
therefore ran at different loads and are not compared stage by stage; instead each arm is judged by
its capacity within SLOs: the boundary load, summed over classes, per device charged. An exclusive
arm measured alone in turn searched once per class; its boundary is the lowest of those scales,
since each class must keep its SLOs at the same load mix.

The verdict follows the seed's rule on that capacity: sharing is worth it when the capacity within
SLOs per device is significantly higher than the control's (paired by repeat; a ratio, so by its
geometric mean and log-scale interval); below that it is a loss, once at least two paired repeats
show it; with fewer it is inconclusive. There is no trade-off here: at its boundary every arm, by
definition, keeps every SLO.

Where the load generator fell behind before the boundary (a search ``generator-limited`` in some repeat),
that capacity is only a lower bound. The arm is still worth it when only its own capacity is bounded and
is significantly higher, and a loss when only the control's is and the arm's is significantly lower;
otherwise it is not judged.
"""

from __future__ import annotations

from bench_plugin.analysis.selfcheck import advice
from bench_plugin.analysis.significance import describe, ratio_figure
from bench_plugin.analysis.statistics import spread
from bench_plugin.analysis.verdict import CONTROLS, MIN_PAIRS, inconclusive, too_few
from bench_plugin.results.limits import Limit
from bench_plugin.results.summary import Capacity, GeneratorCheck, RepeatCapacity, SearchResult, TrialSummary
from bench_plugin.results.words import ENDED_SEARCHES, Call, ProbeOutcome, SearchStatus, Significance
from bench_plugin.scenario import class_rank


def combined_status(results: list[SearchResult]) -> str:
    """The status of a boundary searched once per class (an exclusive arm, each class alone): the status of
    the class whose boundary is lowest, since that one sets the mix's boundary.

    A search still under way, or one whose boundary is below its minimum, decides it at once; a class whose
    load passed up to the maximum (or whose load generator fell behind first) does not make the boundary
    "above the maximum" (``generator-limited``) while another class's was found below it. Ties go to ``found``.
    """
    statuses = [r.status for r in results]
    if unfinished := [s for s in statuses if s not in ENDED_SEARCHES]:
        return unfinished[0]
    if SearchStatus.BELOW_MINIMUM in statuses:
        return SearchStatus.BELOW_MINIMUM
    estimates = [r.estimate for r in results if r.estimate is not None]
    if len(estimates) < len(results):
        return next((s for s in statuses if s != SearchStatus.FOUND), SearchStatus.FOUND)
    lowest = min(estimates)
    limiting = {r.status for r in results if r.estimate == lowest}
    return SearchStatus.FOUND if SearchStatus.FOUND in limiting else limiting.pop()


def mix_results(trial: TrialSummary) -> list[SearchResult]:
    """The trial's search results along the scenario's ``search.mix`` (the ray ``mix``): the capacity's; the other
    rays make the envelope (analysis/envelope.py)."""
    return [r for r in trial.search if r.ray == "mix"]


def limiting_class(trials: list[TrialSummary], along: dict[str, float] | None = None) -> list[Limit]:
    """Where each class was searched alone (an exclusive arm): the class whose boundary is the lowest, when
    every repeat that found one agrees (the classes, where several tie); empty otherwise, and for a search of the
    whole mix. A repeat counts once it has a capacity along ``along`` (every class searched to an end:
    :func:`_repeat`)."""
    found = set()
    for trial in trials:
        results = mix_results(trial)
        estimates = [r.estimate for r in results if r.estimate is not None]
        if len(results) < 2 or len(estimates) < len(results):
            continue
        repeat = _repeat(trial, along)
        if repeat is None or repeat.scale is None:
            continue
        lowest = min(estimates)
        found.add(tuple(Limit(workload=name) for r in results if r.estimate == lowest for name in r.classes))
    return list(found.pop()) if len(found) == 1 else []


def _repeat(trial: TrialSummary, along: dict[str, float] | None = None) -> RepeatCapacity | None:
    """The trial's capacity along ``along`` (the scenario's ``search.mix``): None where some class of it has no
    search recorded (its segment never ran, or was cut before its search ended or was recorded); no scale while
    a search is still under way (``bracketing``, ``bisecting``)."""
    results = mix_results(trial)
    if not results:
        return None
    searched = {c for r in results for c, rate in r.mix.items() if rate > 0}
    if along is not None and any(rate > 0 and c not in searched for c, rate in along.items()):
        return None
    status = combined_status(results)
    scales = [r.estimate for r in results if r.estimate is not None]
    scale = min(scales) if scales and len(scales) == len(results) and status in ENDED_SEARCHES else None
    mix = results[0].mix if len(results) == 1 else {k: v for r in results for k, v in r.mix.items()}
    per_device = None
    if scale is not None and trial.devices_charged:
        per_device = scale * sum(mix.values()) / trial.devices_charged
    stopped = [r for r in results if r.status == SearchStatus.GENERATOR_LIMITED] \
        if status == SearchStatus.GENERATOR_LIMITED else []
    return RepeatCapacity(repeat=trial.repeat, status=status, scale=scale, runs=sum(r.runs for r in results),
                          fixed_sweep_runs=sum(r.fixed_sweep_runs for r in results), capacity_per_device=per_device,
                          limited=stopped[0].stopped if stopped else None,
                          generator_checks=limited_checks(trial, stopped[0]) if stopped else [])


def limited_checks(trial: TrialSummary, result: SearchResult) -> list[GeneratorCheck]:
    """What the self-check found in the stages of ``result``'s probes left unjudged because the load generator fell
    behind (an empty check for a stage where it found nothing, and one for a search whose probes were not
    recorded): what the advice is worded from."""
    indices = {i for p in trial.probes if p.segment == result.segment and p.ray == result.ray
               and p.decision is not None and p.decision.outcome == ProbeOutcome.GENERATOR_LIMITED
               for i in p.stages}
    checks = [s.generator_check or GeneratorCheck() for s in trial.stages
              if s.index in indices and s.generator_limited]
    return checks or [GeneratorCheck()]


def arm_capacity(trials: list[TrialSummary], control: list[TrialSummary] | None,
                 along: dict[str, float] | None = None) -> Capacity | None:
    """The arm's capacity from its trials' searches along ``along`` (the scenario's ``search.mix``: a trial counts
    once every class of it was searched; without it, whatever each trial recorded); None when none searched."""
    mine = [r for t in trials if (r := _repeat(t, along)) is not None]
    if not mine:
        return None
    mix = next(found for t in trials if (found := mix_results(t)))
    given = {k: v for result in mix for k, v in result.mix.items()}
    merged = {name: given[name] for name in sorted(given, key=class_rank)}
    ratio = None
    if control is not None:
        theirs = {r.repeat: r for t in control if (r := _repeat(t, along)) is not None}
        values = []
        for r in mine:
            ref = theirs.get(r.repeat)
            if ref and ref.capacity_per_device and r.capacity_per_device is not None:
                values.append(r.capacity_per_device / ref.capacity_per_device)
        ratio = ratio_figure(values)
    scale = spread([r.scale for r in mine])
    offered = {} if scale.mean is None else {name: rate * scale.mean for name, rate in merged.items()}
    return Capacity(mix=merged, scale=scale, offered=offered, capacity_per_device=spread([r.capacity_per_device
                                                                                           for r in mine]),
                    capacity_per_device_ratio=ratio, per_repeat=mine)


def capacity_text(arm: str, control: str, capacity: Capacity, reference: Capacity) -> tuple[str, str]:
    """The verdict call and sentence for an arm searched adaptively."""
    ratio = capacity.capacity_per_device_ratio
    mine, theirs = capacity.capacity_per_device.mean, reference.capacity_per_device.mean
    runs = spread([r.runs for r in capacity.per_repeat]).mean or 0
    sweep = spread([r.fixed_sweep_runs for r in capacity.per_repeat]).mean or 0
    cost = f" The search took {runs:.0f} stage-runs per trial; an even sweep would have needed {sweep:.0f}."
    if ratio is None or ratio.mean is None or mine is None or theirs is None:
        return Call.NOT_COMPARED, f"{arm}: no boundary found to compare with {control}." + cost
    numbers = (f"capacity within SLOs {mine:.2f} req/s per device against {theirs:.2f} for {control}, "
               f"{describe(ratio, what=CONTROLS)}")
    bounded = {who: [r.limited for r in c.per_repeat if r.limited]
               for who, c in ((arm, capacity), (control, reference))}
    if any(bounded.values()):
        lower_bound = "; ".join(f"{who}'s capacity in {len(why)} of {len(c.per_repeat)} repeats is a lower bound "
                                f"({why[0]})" for (who, why), c in zip(bounded.items(), (capacity, reference),
                                                                       strict=True) if why)
        enough = ratio.spread.n >= MIN_PAIRS
        # the arm's true capacity is higher still
        if enough and not bounded[control] and ratio.call == Significance.HIGHER:
            return Call.WORTH_IT, f"{arm} is worth it: {numbers}; {lower_bound}." + cost
        # the control's true capacity is higher still
        if enough and not bounded[arm] and ratio.call == Significance.LOWER:
            return Call.LOSS, f"{arm} is a loss: {numbers}; {lower_bound}." + cost
        found = (c for r in (*capacity.per_repeat, *reference.per_repeat) if r.limited
                 for c in r.generator_checks or [GeneratorCheck()])
        return Call.GENERATOR_LIMITED, f"{arm} is not judged: {numbers}, but {lower_bound}; {advice(found)}." + cost
    if ratio.spread.n < MIN_PAIRS:
        call = inconclusive(ratio.spread.n)
        return call, f"{arm} is {call}: {numbers}; {too_few(ratio.spread.n)}." + cost
    if ratio.call == Significance.HIGHER:
        return Call.WORTH_IT, f"{arm} is worth it: {numbers}." + cost
    return Call.LOSS, f"{arm} is a loss: {numbers}." + cost
