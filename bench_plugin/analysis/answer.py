"""Answer: each arm's answer in short, from its comparison: its figure per device against the control's, what
limits it, and the next step.

The figure is what the verdict rests on. In a search it is the capacity within SLOs per device (the
boundary's load, summed over classes, per device charged). In a fixed sweep it is the goodput per
device (requests meeting every SLO per second, per device) at the stage the verdict rests on: the
highest stage of a worth-it run that starts at the lowest stage, else the first stage whose call is
the arm's call, else the first stage with a goodput ratio. The control's own answer has its figure
only in a search (its capacity); in a sweep its figures are the sharing arms' reference.

The next step is the first rule that holds, in this order (NEXT_STEPS says each):

1. some trial of the arm or of the control did not run to its end: resume the campaign;
2. a load generator fell behind at a stage of the arm: rerun with more load generators;
3. fewer than 2 paired repeats: run 3 repeats;
4. the boundary lies outside the loads measured (above the highest, below the lowest; a search above
   its maximum or below its minimum): measure there; every stage was disrupted (so none measured the load:
   analysis/boundary.py): add one that is not;
5. the figure per device does not differ significantly from the control's: run more repeats;
6. otherwise none: the answer holds for the loads measured.
"""

from __future__ import annotations

from bench_plugin.analysis.boundary import every_stage_disrupted, format_offered
from bench_plugin.analysis.queueing import answer_growth
from bench_plugin.analysis.verdict import MIN_PAIRS
from bench_plugin.results.limits import Limit
from bench_plugin.results.summary import Answer, ArmComparison, Judged, Spread, StageComparison, TrialSummary
from bench_plugin.results.words import BoundaryStatus, Call, SearchStatus, Significance, TrialStatus

SEARCHED = "the searched boundary"
"""``Answer.at`` of a search: the figure is the capacity within SLOs per device there."""

NEXT_STEPS: dict[str, str] = {
    "unfinished": "resume the campaign (--resume DIR) to measure what it left out",
    "generator": "rerun with more load generators (--master with --worker processes) or a lighter load per "
                 "process: a load generator fell behind",
    "repeats": "run 3 repeats (--repeats 3): with {n} paired, no spread can tell a difference",
    "above": "measure above {load}: every SLO held up to the highest load measured",
    "below": "measure below {load}: an SLO broke already at the lowest load measured",
    "above_search": "search above {load} (raise search.max_scale): every SLO held up to the maximum",
    "below_search": "search below {load} (lower search.min_scale): an SLO broke already at the minimum",
    "disrupted": "add a stage without a disruption to find the load boundary: every stage was disrupted, and its "
                 "errors and latency are the disruption's cost (the 'disrupted' lines), not the load's",
    "spread": "run more repeats (now {n}): the figure does not differ significantly from the control's",
    "none": "none: the answer holds for the loads measured",
}
"""The next step per rule (see the module docstring for their order)."""


def arm_answer(comparison: ArmComparison, control: ArmComparison | None, trials: list[TrialSummary],
               highest: dict[str, float], lowest: dict[str, float]) -> Answer:
    """The answer of one arm from its comparison and the control arm's (``control``; None without one).
    ``trials`` are the arm's and the control's; ``highest`` and ``lowest`` the arm's highest and lowest loads
    measured per class, for a next step outside them."""
    is_control = comparison.is_control or control is None
    at: str | None
    per_device: Spread | None
    if comparison.search is not None:
        at, per_device = SEARCHED, comparison.search.capacity_per_device
        ref = None if is_control or control is None or control.search is None else control.search.capacity_per_device
        ratio = None if is_control else comparison.search.capacity_per_device_ratio
        limiting = comparison.boundary.limiting
        growth = None if is_control else answer_growth(comparison.stages, None)
    else:
        stage = None if is_control else decisive_stage(comparison)
        growth = None if is_control else answer_growth(comparison.stages, stage)
        at = None if stage is None else f"stage {stage.index}"
        per_device = None if stage is None else stage.goodput_per_device
        ref = None if stage is None else stage.control_goodput_per_device
        ratio = None if stage is None else stage.goodput_per_device_ratio
        limiting = _limiting(stage) or comparison.boundary.limiting
    call = Call.CONTROL if is_control else (comparison.verdict.call if comparison.verdict else Call.NO_VERDICT)
    return Answer(call=call, at=at, per_device=per_device, control_per_device=ref, ratio=ratio, limiting=limiting,
                  next_step=next_step(comparison, trials, ratio, highest, lowest), growth=growth)


def decisive_stage(comparison: ArmComparison) -> StageComparison | None:
    """The stage a fixed sweep's verdict rests on (see the module docstring)."""
    stages = comparison.stages
    call = comparison.verdict.call if comparison.verdict else None
    if call == Call.WORTH_IT and stages and stages[0].verdict == Call.WORTH_IT:
        last = stages[0]
        for stage in stages:
            if stage.verdict != Call.WORTH_IT:
                break
            last = stage
        return last
    return (next((s for s in stages if s.verdict == call), None)
            or next((s for s in stages if s.goodput_per_device_ratio is not None), None))


def _limiting(stage: StageComparison | None) -> list[Limit]:
    """The classes past an SLO or error budget at ``stage``, with the figures that broke (``llm p95 3.06x its
    SLO``); empty where none is."""
    if stage is None:
        return []
    broken = [limit for c in stage.classes.values() for limit in c.limits or []]
    broken += [Limit(workload=name) for name, c in stage.classes.items() if not (c.meets_slo and c.within_error_budget)
               and not c.limits]
    return broken


def next_step(comparison: ArmComparison, trials: list[TrialSummary], ratio: Judged | None,
              highest: dict[str, float], lowest: dict[str, float]) -> str:
    """The first rule of the module docstring that holds for this arm."""
    if any(t.status != TrialStatus.COMPLETED for t in trials):
        return NEXT_STEPS["unfinished"]
    if comparison.boundary.status == SearchStatus.GENERATOR_LIMITED or any(
            s.verdict == Call.GENERATOR_LIMITED or s.generator_limited for s in comparison.stages):
        return NEXT_STEPS["generator"]
    pairs = None if ratio is None else ratio.n
    if pairs is not None and pairs < MIN_PAIRS:
        return NEXT_STEPS["repeats"].format(n=pairs)
    boundary = comparison.boundary
    if boundary.status == BoundaryStatus.NOT_REACHED and highest:
        return NEXT_STEPS["above"].format(load=format_offered(highest))
    if boundary.status == BoundaryStatus.BELOW_LOWEST and lowest:
        return NEXT_STEPS["below"].format(load=format_offered(lowest))
    if boundary.status == SearchStatus.ABOVE_MAXIMUM and boundary.offered:
        return NEXT_STEPS["above_search"].format(load=format_offered(boundary.offered))
    if boundary.status == SearchStatus.BELOW_MINIMUM:
        return NEXT_STEPS["below_search"].format(load=format_offered(lowest) if lowest else "the minimum")
    if every_stage_disrupted(boundary):
        return NEXT_STEPS["disrupted"]
    if ratio is not None and ratio.call == Significance.NO_DIFFERENCE:
        return NEXT_STEPS["spread"].format(n=pairs)
    return NEXT_STEPS["none"]
