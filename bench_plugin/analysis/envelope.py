"""Envelope: an arm's boundary along every ray it searched, over its repeats: its operating envelope's frontier.

Each ray is a load mix ``m`` (class -> req/s at scale 1); the boundary along it is the scale ``s`` at
which the first class leaves its SLOs or error budget, so ``s · m`` is one point of the frontier of
the set of per-class loads the arm holds. A trial measures a ray in every segment that runs some of
its classes: a shared arm in its one segment; an exclusive arm once per class, alone. A segment
searched the ray restricted to its classes, or an earlier ray along the same direction (analysis/search.
segment_rays), at its own rates: ``s`` follows by the ratio of the rates. Segments run on separate
devices and all must keep their SLOs, so the trial's boundary along the ray is the lowest of its
segments' (and its status that segment's, as for the capacity: analysis/capacity.combined_status).

Over repeats each ray gives the mean scale with its Student-t 95% CI (``scale``: the bracket midpoints;
``lo``: the highest scales that passed, the load shown to hold), and what breaks first beyond it: the
criterion furthest beyond its allowance in the lowest failing probe on the ray (analysis/probe.
limiting_check); where the classes were searched alone, that of the class whose boundary is the lowest.
"""

from __future__ import annotations

from collections import Counter

from bench_plugin.analysis.capacity import combined_status
from bench_plugin.analysis.probe import limited_why, limiting_check
from bench_plugin.analysis.search import same_direction
from bench_plugin.analysis.statistics import spread
from bench_plugin.results.limits import Limit
from bench_plugin.results.summary import EnvelopeRay, RayRepeat, SearchResult, TrialSummary
from bench_plugin.results.words import ENDED_SEARCHES, SearchStatus


def _segment_result(results: list[SearchResult], classes: set[str],
                    mix: dict[str, float]) -> tuple[SearchResult, float] | None:
    """The segment's result along ``mix`` restricted to the segment's ``classes``, and the factor from its scale to
    ``mix``'s (None when the segment runs none of the mix's classes, or has no such search ended or under way)."""
    mine = {c: r for c, r in mix.items() if c in classes and r > 0}
    if not mine:
        return None
    for result in results:
        searched = {c: r for c, r in result.mix.items() if r > 0}
        if same_direction(mine, searched):
            first = next(iter(mine))
            return result, searched[first] / mine[first]
    return None


def segment_classes(trial: TrialSummary) -> dict[int, set[str]]:
    """Segment -> the classes it runs, from all the trial says of it: where its servers were placed, what its
    searches and its probes loaded. A segment cut short keeps the classes its unended rays loaded."""
    out: dict[int, set[str]] = {}
    for name, where in trial.placement.items():
        out.setdefault(where.segment, set()).add(name)
    for result in trial.search:
        out.setdefault(result.segment, set()).update(c for c, r in result.mix.items() if r > 0)
    for probe in trial.probes:
        for index in probe.stages:
            if (ran := trial.stage(index)) is not None:
                out.setdefault(probe.segment, set()).update(c for c, r in ran.offered.items() if r > 0)
    return out


def _scaled(value: float | None, factor: float) -> float | None:
    return None if value is None else value * factor


def ray_repeat(trial: TrialSummary, mix: dict[str, float]) -> tuple[RayRepeat, list[Limit]] | None:
    """The trial's boundary along ``mix`` and the criterion (or classes) that set it, empty where none did (None:
    the ray was not searched in this trial)."""
    by_segment: dict[int, list[SearchResult]] = {}
    for result in trial.search:
        by_segment.setdefault(result.segment, []).append(result)
    classes = segment_classes(trial)
    found = [f for segment, results in by_segment.items()
             if (f := _segment_result(results, classes.get(segment, set()), mix)) is not None]
    covered = {c for r, _ in found for c in r.mix}
    if not found or any(r > 0 and c not in covered for c, r in mix.items()):
        return None  # some class of the ray was not searched along it (its segment never ran, or was cut first)
    scaled = [r.model_copy(update={"estimate": _scaled(r.estimate, k), "lo": _scaled(r.lo, k),
                                   "hi": _scaled(r.hi, k)}) for r, k in found]
    estimates = [r.estimate for r in scaled]
    limiting = min(scaled, key=lambda r: r.estimate if r.estimate is not None else float("inf"))
    status = combined_status(scaled)
    # a search under way has no boundary yet
    complete = status in ENDED_SEARCHES and all(e is not None for e in estimates)
    los = [r.lo for r in scaled]
    his = [r.hi for r in scaled if r.hi is not None]
    repeat = RayRepeat(
        repeat=trial.repeat, status=status,
        scale=limiting.estimate if complete else None,
        lo=min(v for v in los if v is not None) if all(v is not None for v in los) else None,
        hi=min(his) if his else None, sustain=limiting.sustain, runs=sum(r.runs for r, _ in found),
        undecided=sum(r.undecided for r, _ in found), stopped=next((r.stopped for r, _ in found if r.stopped), None))
    # nothing broke along the ray (or it was not searched to its end)
    if not complete or repeat.status != SearchStatus.FOUND:
        return repeat, []
    return repeat, _probe_limit(trial, limiting) or (
        [Limit(workload=c) for c in limiting.classes] if len(scaled) > 1 else [])


def _probe_limit(trial: TrialSummary, result: SearchResult) -> list[Limit]:
    """The worst criterion of the lowest failing probe of ``result``'s search (its segment and ray)."""
    failing = [p for p in trial.probes if p.segment == result.segment and p.ray == result.ray and not p.passed
               and p.decision is not None and limited_why(p.decision) is None]
    if not failing:
        return []
    lowest = min(failing, key=lambda p: p.scale)
    assert lowest.decision is not None
    worst = limiting_check(lowest.decision)
    return [] if worst is None else [Limit(workload=worst.workload, figure=worst.criterion)]


def envelope_rays(trials: list[TrialSummary], rays: dict[str, dict[str, float]],
                  held_out: list[str]) -> list[EnvelopeRay]:
    """Each ray's boundary over the arm's ``trials`` (its repeats), in the rays' order."""
    out = []
    for name, mix in rays.items():
        found = [f for t in trials if (f := ray_repeat(t, mix)) is not None]
        if not found:
            continue
        repeats = [r for r, _ in found]
        statuses = Counter(r.status for r in repeats)
        limits = Counter(tuple(limit) for _, limit in found if limit)
        scale = spread([r.scale for r in repeats])
        out.append(EnvelopeRay(
            name=name, mix=dict(mix), held_out=name in held_out,
            status=sorted(statuses),
            scale=scale, lo=spread([r.lo for r in repeats]),
            boundary={} if scale.mean is None else {c: r * scale.mean for c, r in mix.items()},
            limit=list(limits.most_common(1)[0][0]) if limits else [], per_repeat=repeats,
        ))
    return out
