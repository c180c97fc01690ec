"""Comparison: every arm against the control, stage by stage, with its boundary and verdict.

This assembles the results of contention (per-stage figures), boundary and verdict into the typed
``comparison`` section of summary.json (results.summary.Comparison).
"""

from __future__ import annotations

from collections.abc import Mapping

from bench_plugin.analysis.answer import arm_answer
from bench_plugin.analysis.boundary import arm_boundary, format_offered, load_order, searched_limit
from bench_plugin.analysis.capacity import arm_capacity, capacity_text, limiting_class
from bench_plugin.analysis.contention import stage_contention
from bench_plugin.analysis.envelope import envelope_rays
from bench_plugin.analysis.envelope_model import arm_model
from bench_plugin.analysis.objectives import ClassObjectives
from bench_plugin.analysis.statistics import spread
from bench_plugin.analysis.verdict import StageVerdict, overall_verdict, stage_verdict
from bench_plugin.results.facts import BackendFacts
from bench_plugin.results.limits import limits_text
from bench_plugin.results.placement import ClassPlacement
from bench_plugin.results.record import StoredScenario
from bench_plugin.results.summary import (
    ArmComparison,
    Boundary,
    Comparison,
    Conditions,
    Envelope,
    Provenance,
    StageComparison,
    TrialSummary,
    Verdict,
)
from bench_plugin.results.words import BoundaryStatus, SearchStatus
from bench_plugin.scenario import Arm, Search

METHOD: dict[str, str] = {
    "pairing": "repeat r of each arm against repeat r of the control, at the same stage (same offered load)",
    "offered": "a stage's load is its realised rate: arrivals sent / planned duration (exactly round(rate x "
               "duration) arrivals with the default conditioned Poisson process)",
    "spread": "each figure says its kind. value and difference: arithmetic mean and Student-t 95% CI, "
              "mean ± ci95 = [lo, hi]; ratio (arm over control: normalised throughput, slowdowns, goodput "
              "and capacity per device ratios, consolidation gain): geometric mean exp(m) and the asymmetric "
              "95% CI [lo, hi] = exp(m ± t(0.975, n-1)·sd/√n), m and sd the mean and standard deviation of "
              "the logs of the per-repeat ratios, ci95 null; a ratio that is not positive or is missing is "
              "left out, with a note; complement (throughput loss, 1 - normalised throughput): 1 - the "
              "ratio's geometric mean, [1 - hi, 1 - lo]; no interval with one repeat",
    "significance": "significant when the 95% CI [lo, hi] of the paired per-repeat values excludes no change "
                    "(1 for ratios, 0 for differences, the number of classes for consolidation gain); "
                    "otherwise 'no significant difference'; one repeat is never significant",
    "slo": "a request meets the SLO when it succeeded within p95_ms (and, for llm, ttft_p95_ms and "
           "tpot_p95_ms where set); a class keeps its SLOs at a stage when its P95 (llm TTFT/TPOT P95) "
           "and error rate are within limits in every repeat",
    "goodput_per_device": "requests meeting the SLO per second, summed over classes, divided by the devices "
                          "charged to the trial (distinct devices per segment, summed over segments)",
    "boundary": "per repeat, linear interpolation of measured/limit ratios between the last passing stage "
                "and the first failing one, where the worst reaches 1; mean and CI over repeats",
    "verdict": "generator-limited: the load generator fell behind in some run of the arm or the control "
               "(send lag P99 > 10 ms or a generator process above 0.9 core), so nothing is concluded about "
               "the GPU there; inconclusive (n repeats): fewer than 2 paired repeats measured goodput per "
               "device, so no spread can show a rise or its absence; otherwise worth it: goodput per device "
               "significantly higher and every class within its SLOs and error budget; trade-off: higher "
               "but some class breaks one; loss: not higher (lower or no significant difference, or no "
               "goodput in some repeat). The arm's call is the first of worth it, trade-off, loss that a "
               "stage has, else inconclusive, else not compared",
    "answer": "per arm, the figure its verdict rests on: capacity within SLOs per device at the searched boundary, "
              "or goodput per device at the highest stage of a worth-it run from the lowest stage, else at the "
              "first stage with the arm's call; against the control's at the same load; the next step is the first "
              "of: resume an unfinished campaign, more load generators, 3 repeats (fewer than 2 paired), measure "
              "beyond the loads measured (boundary outside them), more repeats (no significant difference), none",
}


def _device_name(placement: ClassPlacement, models: Mapping[str, str | None]) -> str:
    """``cuda:0 (NVIDIA H200)``; a MIG instance also names the GPU under it."""
    device, gpu = str(placement.device), placement.gpu
    where = f"{device} on {gpu}" if gpu and gpu != device else device
    model = models.get(gpu or device)
    return f"{where} ({model})" if model else where


def _conditions(arm: Arm, control: Arm | None, trials: list[TrialSummary],
                conditions: Provenance) -> Conditions:
    backend = conditions.backend or BackendFacts()
    models = backend.device_models()
    used = sorted({_device_name(p, models) for t in trials for p in t.placement.values() if p.device})
    loads: dict[str, list[float]] = {}
    arrival: dict[str, str] = {}
    for trial in trials:
        for stage in trial.stages:
            arrival.update(stage.arrival)
            for name, load in stage.load.items():
                loads.setdefault(name, []).append(load)
    return Conditions(
        backend=backend.backend,
        devices=used,
        driver=backend.driver,
        sharing=arm.sharing,
        control_sharing=control.sharing if control else None,
        load_range={name: (min(v), max(v)) for name, v in loads.items()},
        arrival=arrival,
        repeats=len({t.repeat for t in trials}),
    )


def build_comparison(trials: list[TrialSummary], scenario: StoredScenario, conditions: Provenance,
                     objectives: dict[str, ClassObjectives]) -> Comparison:
    """Compare every arm of the stored scenario with its control arm: the summary's ``comparison`` section."""
    arms = scenario.arms
    control = scenario.control
    control_trials = [t for t in trials if control and t.arm == control.name]
    out: dict[str, ArmComparison] = {}
    adaptive = scenario.searched
    for arm in arms:
        mine = [t for t in trials if t.arm == arm.name]
        is_control = control is not None and arm.name == control.name
        reference = None if is_control or control is None else control_trials
        if adaptive:
            out[arm.name] = _searched_arm(arm, mine, reference, control, control_trials, conditions, objectives,
                                          scenario.resolved.search if scenario.resolved else None)
            continue
        arrival = next((s.arrival for t in mine for s in t.stages), None)
        boundary = arm_boundary(mine, objectives, arrival)
        order = load_order(mine + (reference or []))
        stages = {i: stage_contention(i, mine, reference, objectives) for i in order}
        verdicts = {i: stage_verdict(s) for i, s in stages.items()} if reference is not None else {}
        verdict = None
        if reference is not None and control is not None:
            verdict = overall_verdict(arm.name, control.name, [(stages[i], verdicts[i]) for i in order],
                                      boundary, _conditions(arm, control, mine, conditions))
        out[arm.name] = ArmComparison(
            sharing=arm.sharing, is_control=is_control,
            devices_charged=spread([t.devices_charged for t in mine]), boundary=boundary,
            stages=[_with_verdict(stages[i], verdicts.get(i)) for i in sorted(stages)],
            verdict=verdict,
        )
    reference_arm = out.get(control.name) if control else None
    for arm in arms:
        mine = [t for t in trials if t.arm == arm.name]
        low, high = _measured_range(mine)
        out[arm.name].answer = arm_answer(out[arm.name], reference_arm, mine + (
            [] if out[arm.name].is_control else control_trials), high, low)
    return Comparison(control=control.name if control else None, method=METHOD, arms=out)


def _measured_range(trials: list[TrialSummary]) -> tuple[dict[str, float], dict[str, float]]:
    """The offered loads of the lowest and the highest stage (in load order) that some trial measured."""
    order = load_order(trials)
    loads = [s.offered for i in order for t in trials if (s := t.judged_stage(i)) is not None]
    return (dict(loads[0]), dict(loads[-1])) if loads else ({}, {})


def _searched_arm(arm: Arm, mine: list[TrialSummary], reference: list[TrialSummary] | None,
                  control: Arm | None, control_trials: list[TrialSummary],
                  conditions: Provenance, objectives: dict[str, ClassObjectives],
                  search: Search | None) -> ArmComparison:
    """An arm of an adaptive campaign: its searched boundary and capacity per device against the control's."""
    mix = {str(c): float(r) for c, r in search.mix.items()} if search is not None else None
    capacity = arm_capacity(mine, reference, mix)
    envelope = None
    if search is not None and search.mixes:
        rays = envelope_rays(mine, search.rays(), search.held_out)
        envelope = Envelope(rays=rays, model=arm_model(mine, rays, objectives))
    status = BoundaryStatus.NOT_MEASURED if capacity is None else next(
        (r.status for r in capacity.per_repeat if r.status == SearchStatus.GENERATOR_LIMITED),
        capacity.per_repeat[0].status)
    offered = capacity.offered if capacity else {}
    bounded = status == SearchStatus.GENERATOR_LIMITED  # no boundary found: nothing limits it yet
    alone = [] if bounded else limiting_class(mine, mix)  # each class searched alone: the lowest one
    limiting = [] if bounded else alone or searched_limit(mine, objectives)
    text = (f"boundary at {format_offered(offered)} (scale {capacity.scale.mean:.3g} of the mix; "
            f"search status: {status}"
            + (f"; limited by {limits_text(alone)}, each class searched alone" if alone else "")
            + ")" if capacity and capacity.scale.mean is not None
            else f"no boundary found (search status: {status})")
    if capacity is not None:
        runs = spread([r.runs for r in capacity.per_repeat]).mean or 0
        sweep = spread([r.fixed_sweep_runs for r in capacity.per_repeat]).mean or 0
        text += (f". The search took {runs:.0f} stage-runs per trial; an even sweep to the same precision "
                 f"would have needed {sweep:.0f}.")
    boundary = Boundary(status=status, text=text, stage_position=capacity.scale if capacity else spread([]),
                        offered=offered, limiting=limiting)
    verdict = None
    ref_capacity = arm_capacity(control_trials, None, mix) if reference is not None else None
    if capacity is not None and ref_capacity is not None and control is not None:
        call, sentence = capacity_text(arm.name, control.name, capacity, ref_capacity)
        verdict = Verdict(call=call, text=sentence, worth_it_up_to_stage=None,
                          conditions=_conditions(arm, control, mine, conditions))
    return ArmComparison(sharing=arm.sharing, is_control=reference is None,
                         devices_charged=spread([t.devices_charged for t in mine]), boundary=boundary,
                         verdict=verdict, search=capacity, envelope=envelope)


def _with_verdict(stage: StageComparison, verdict: StageVerdict | None) -> StageComparison:
    """The stage's figures with its verdict, where it has one (a non-control arm)."""
    if verdict is None:
        return stage
    return stage.model_copy(update={"verdict": verdict.call, "reasons": list(verdict.reasons)})
