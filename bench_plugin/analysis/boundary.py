"""Boundary: the highest offered load at which every class meets its SLOs and its error budget.

Stages are put in order of offered load (the mean over classes of each class's load relative to its
highest). In each repeat, each stage gets a set of criteria per class (objectives.class_criteria: P95
over its SLO, llm TTFT/TPOT P95 over theirs, error rate over its budget), each a ratio measured/limit;
the stage passes when every ratio is at most 1 (its margin, the worst ratio, is at most 1). A stage
skipped or rolled back fails; a stage cut short by Ctrl-C is not judged and ends the search there. A
disrupted stage (a restart, kill, rollout, drain or node failure mid-stage) measured the disruption, not
the load: it is left out, its cost given as such (analysis/disruption.py); where every stage was
disrupted, the boundary is not measured.

The boundary lies between the last passing stage k before the first failing stage k+1. Each criterion's
ratio is interpolated linearly between the two; the boundary is where the first of them reaches 1
(where the margin, their maximum, reaches 1), as a fractional stage position: 1.4 is 40% of the way
from stage 1 to stage 2. The offered load there is the same linear interpolation of the two stages'
loads. The position is exact only as far as the ratios move linearly between stages; what is certain
is that the boundary lies between stage k and k+1. Positions are then averaged over repeats (mean and
95% CI); a repeat where every stage passed counts at the highest stage, one where the lowest stage
failed counts at stage 0, and the text says when repeats disagree.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

from bench_plugin.analysis.objectives import ClassObjectives, Criterion, class_criteria
from bench_plugin.analysis.statistics import spread
from bench_plugin.results.limits import SKIPPED, Limit, limits_text
from bench_plugin.results.summary import Boundary, RepeatBoundary, Spread, StageSummary, TrialSummary
from bench_plugin.results.words import BoundaryStatus, StageStatus


@dataclass(frozen=True)
class StageMargin:
    """One judged stage of one repeat: every class's criteria, and what failed outright."""

    index: int
    offered: dict[str, float]
    criteria: tuple[Criterion, ...]
    failed_outright: tuple[Limit, ...] = ()
    """Reasons the stage fails whatever its ratios: a class skipped after a rollback, a rollback."""

    @property
    def margin(self) -> float:
        """The worst ratio (infinite when the stage failed outright)."""
        if self.failed_outright:
            return math.inf
        return max((c.ratio for c in self.criteria), default=0.0)

    @property
    def passed(self) -> bool:
        """Every class met every criterion."""
        return self.margin <= 1.0


def stage_margin(stage: StageSummary, objectives: dict[str, ClassObjectives]) -> StageMargin:
    """The criteria of a judged stage."""
    criteria: list[Criterion] = []
    outright: list[Limit] = []
    for name in stage.offered:
        stats = stage.classes.get(name)
        if stats is None:
            outright.append(Limit(workload=name, note=SKIPPED))
        elif name in objectives:
            criteria.extend(class_criteria(name, stats, objectives[name]))
    if stage.status == StageStatus.ABORTED:
        outright.append(Limit(note=f"rolled back: {stage.reason}"))
    return StageMargin(stage.index, stage.load, tuple(criteria), tuple(outright))  # the realised load


def load_order(trials: list[TrialSummary]) -> list[int]:
    """Stage indices in increasing offered load (ties keep the scenario's order)."""
    offered: dict[int, dict[str, float]] = {}
    for trial in trials:
        for stage in trial.stages:
            offered.setdefault(stage.index, {}).update(stage.offered)
    highest: dict[str, float] = {}
    for loads in offered.values():
        for name, load in loads.items():
            highest[name] = max(highest.get(name, 0.0), load)

    def level(index: int) -> float:
        loads = offered[index]
        parts = [load / highest[name] for name, load in loads.items() if highest[name] > 0]
        return sum(parts) / len(parts) if parts else 0.0

    return sorted(offered, key=level)


def _crossing(low: StageMargin, high: StageMargin) -> tuple[float, list[Limit]]:
    """The fraction of the way from ``low`` (passing) to ``high`` (failing) where a ratio reaches 1, and the
    criterion that reaches it first (of equals, the first by name)."""
    if high.failed_outright and not any(not c.passed for c in high.criteria):
        return 0.0, [high.failed_outright[0]]
    below = {c.label: c.ratio for c in low.criteria}
    best: tuple[float, str, Criterion | None] = (1.0, "", None)
    for c in high.criteria:
        if c.passed:
            continue
        start = below.get(c.label, 1.0)  # a criterion new at the failing stage: no slope to interpolate
        t = 0.0 if math.isinf(c.ratio) else (1.0 - start) / (c.ratio - start)
        if (t, c.label) < best[:2]:
            best = (t, c.label, c)
    return best[0], [best[2].as_limit()] if best[2] is not None else []


def _worst(stage: StageMargin) -> list[Limit]:
    """What failed worst at ``stage``: its first outright failure, else its criterion of the largest ratio."""
    if stage.failed_outright:
        return [stage.failed_outright[0]]
    worst = max(stage.criteria, key=lambda c: c.ratio, default=None)
    return [worst.as_limit()] if worst is not None else []


DISRUPTED = ("every stage was disrupted (a restart, kill, rollout, drain or node failure): its errors and latency "
             "are the disruption's cost, not the load's")
"""The note of a repeat with no stage left to judge once the disrupted ones are left out."""


def every_stage_disrupted(boundary: Boundary) -> bool:
    """Whether ``boundary`` is not measured because every stage of every repeat was disrupted."""
    return (boundary.status == BoundaryStatus.NOT_MEASURED and bool(boundary.per_repeat)
            and all(b.note == DISRUPTED for b in boundary.per_repeat))


def repeat_boundary(trial: TrialSummary, order: list[int], objectives: dict[str, ClassObjectives]
                    ) -> RepeatBoundary | None:
    """The boundary of one repeat; None when not one of its stages can be judged.

    A disrupted stage (``StageSummary.disruption``) measured the disruption, not the load: it is left out, and
    the boundary lies among the other stages, at their positions in load order."""
    margins: list[StageMargin] = []
    ranks: list[int] = []
    """Each margin's position in ``order``."""
    disrupted = False
    cut = None
    for rank, index in enumerate(order):
        stage = trial.judged_stage(index)
        if stage is None:
            cut = f"measured up to stage {margins[-1].index} only" if margins else None
            break  # cut short: what came after was never measured
        if stage.disruption is not None:
            disrupted = True
            continue
        if stage.protocol_failure:  # it measured the protocol, not the load: no boundary from it or above
            if not margins:
                return RepeatBoundary(repeat=trial.repeat, status=BoundaryStatus.NOT_MEASURED, stage_position=0.0,
                                      offered=stage.offered,
                                      note=f"stage {index}: {stage.protocol_failure}")
            cut = f"measured up to stage {margins[-1].index} only"
            break
        margins.append(stage_margin(stage, objectives))
        ranks.append(rank)
    if not margins:
        return RepeatBoundary(repeat=trial.repeat, status=BoundaryStatus.NOT_MEASURED, stage_position=0.0,
                              offered={}, note=DISRUPTED) if disrupted else None
    first_fail = next((k for k, m in enumerate(margins) if not m.passed), None)
    if first_fail is None:
        return RepeatBoundary(repeat=trial.repeat, status=BoundaryStatus.NOT_REACHED,
                              stage_position=float(ranks[-1]), offered=margins[-1].offered, note=cut)
    if first_fail == 0:
        return RepeatBoundary(repeat=trial.repeat, status=BoundaryStatus.BELOW_LOWEST, stage_position=float(ranks[0]),
                              offered=margins[0].offered, limiting=_worst(margins[0]))
    low, high = margins[first_fail - 1], margins[first_fail]
    t, limiting = _crossing(low, high)
    offered = {n: low.offered.get(n, 0.0) + t * (high.offered.get(n, 0.0) - low.offered.get(n, 0.0))
               for n in high.offered}
    note = f"stage {high.index} failed outright ({high.failed_outright[0].text()})" if high.failed_outright else None
    position = ranks[first_fail - 1] + t * (ranks[first_fail] - ranks[first_fail - 1])
    return RepeatBoundary(repeat=trial.repeat, status=BoundaryStatus.REACHED, stage_position=position,
                          offered=offered, limiting=limiting, between=[low.index, high.index], note=note)


def searched_limit(trials: list[TrialSummary], objectives: dict[str, ClassObjectives]) -> list[Limit]:
    """In a search of the whole mix: what broke first above the boundary. Per repeat, the worst criterion of
    its lowest failing load (stages a probe set aside, its load generator behind, left out); over repeats, the
    most common (empty when no repeat had a failing load)."""
    found: Counter[tuple[Limit, ...]] = Counter()
    for trial in trials:
        left_out = {i for probe in trial.probes
                    for i in ([*probe.stages, *probe.set_aside] if probe.ray != "mix" else probe.set_aside)}
        failing = [m for stage in trial.stages if stage.index not in left_out
                   and (judged := trial.judged_stage(stage.index)) is not None
                   and not (m := stage_margin(judged, objectives)).passed]
        if failing and (worst := _worst(min(failing, key=lambda m: sum(m.offered.values())))):
            found[tuple(worst)] += 1
    return list(found.most_common(1)[0][0]) if found else []


def format_offered(offered: dict[str, float], arrival: dict[str, str] | None = None) -> str:
    """``llm 2 req/s, embedding 8 req/s`` (users for closed-loop classes)."""
    parts = []
    for name, load in offered.items():
        unit = "users" if arrival and arrival.get(name) == "closed" else "req/s"
        parts.append(f"{name} {load:.3g} {unit}")
    return ", ".join(parts)


def arm_boundary(trials: list[TrialSummary], objectives: dict[str, ClassObjectives],
                 arrival: dict[str, str] | None = None) -> Boundary:
    """The boundary of one arm from its trials (one per repeat)."""
    order = load_order(trials)
    found = [b for t in trials if (b := repeat_boundary(t, order, objectives)) is not None]
    if not found:
        return Boundary(status=BoundaryStatus.NOT_MEASURED, text="No stage of this arm could be judged.",
                        stage_position=spread([]), offered={}, stage_order=order)
    if all(b.status == BoundaryStatus.NOT_MEASURED for b in found):
        return Boundary(status=BoundaryStatus.NOT_MEASURED, text=f"Not measured: {found[0].note}.",
                        stage_position=spread([]), offered={}, stage_order=order, per_repeat=found)
    found = [b for b in found if b.status != BoundaryStatus.NOT_MEASURED]
    statuses = Counter(b.status for b in found)
    status = found[0].status if len(statuses) == 1 else BoundaryStatus.REACHED
    names = list(dict.fromkeys(n for b in found for n in b.offered))
    offered = {n: sum(b.offered.get(n, 0.0) for b in found) / len(found) for n in names}
    limits = Counter(tuple(b.limiting) for b in found if b.limiting)
    limiting = list(limits.most_common(1)[0][0]) if limits else []
    position = spread([b.stage_position for b in found])
    text = _text(status, position, offered, limiting, statuses, order, arrival)
    return Boundary(status=status, text=text, stage_position=position, offered=offered, limiting=limiting,
                    stage_order=order, per_repeat=found)


def _text(status: str, position: Spread, offered: dict[str, float], limiting: list[Limit],
          statuses: Counter[str], order: list[int], arrival: dict[str, str] | None) -> str:
    load = format_offered(offered, arrival)
    ci = f" ± {position.ci95:.2f}" if position.ci95 is not None else " (one repeat: no spread)"
    if status == BoundaryStatus.NOT_REACHED:
        highest = order[min(len(order) - 1, round(max(position.values)))]  # the highest stage judged
        text = (f"Every class met its SLOs and error budget at every stage measured, up to stage {highest} "
                f"({load}): the boundary is above the highest load measured"
                + (", and the stages above it did not run to their end." if highest != order[-1] else "."))
    elif status == BoundaryStatus.BELOW_LOWEST:
        text = (f"Already at the lowest stage ({load}), limited by {limits_text(limiting)}: the boundary is below "
                "the lowest load measured.")
    else:
        text = (f"Every class meets its SLOs and error budget up to stage position {position.mean:.2f}{ci} "
                f"(about {load}), limited by {limits_text(limiting)}.")
    if len(statuses) > 1:
        mix = ", ".join(f"{status} in {n}" for status, n in statuses.items())
        text += (f" Repeats disagree ({mix}); a repeat with no failing stage counts at the highest stage, "
                 "one failing at the lowest counts at stage 0.")
    if order != sorted(order):
        text += f" Stage positions follow the stages in load order: {', '.join(map(str, order))}."
    return text
