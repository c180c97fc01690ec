"""Contention: what sharing costs each class, against the control at the same stage (same offered load).

Every figure is computed per repeat first, pairing repeat r of the arm with repeat r of the control
(the campaign interleaves arms, so the two ran close in time), then summarised over the pairs with a
significance call (significance.figure). Ratios of arm to control are summarised by their geometric
mean and a log-scale 95% interval (statistics.ratio_spread), so their interval never reaches zero:

- normalised throughput_c = throughput_c(arm) / throughput_c(control) (a ratio); throughput loss_c =
  1 - that, taken from the ratio's summary (1 - geometric mean, interval [1 - hi, 1 - lo]);
- consolidation gain = sum over classes of normalised throughput (no change = the number of classes;
  above 1 the shared device does more than one class's exclusive device did); a sum of positive
  ratios, summarised like a ratio;
- slowdown_c = P95_c(arm) / P95_c(control), and for llm the same ratio of TTFT P95 and of TPOT P95;
- fairness = Jain's index over the classes' normalised throughputs, (sum x)^2 / (n sum x^2): 1 when
  every class keeps the same share, 1/n when one class gets everything (a value, arithmetic mean);
- goodput per device = sum over classes of goodput (requests within every SLO, per second) / the
  devices the trial was charged, for the arm and for the control (values), and their ratio;
- latency_split_c = where the latency the arm adds to c goes (client, server queue, server compute, the
  rest: differences, arm minus control), where both said their servers' split (queueing.py).

Whether each class keeps its SLOs and error budget is judged on the arm alone, in every repeat (a
stage skipped after a rollback fails); the control arm gets these and its own goodput, no ratios.
The figures are the summary's own models (results.summary.StageComparison, ClassComparison); the
verdict (analysis/verdict.py) is added to them by the comparison.
"""

from __future__ import annotations

from collections.abc import Callable

from bench_plugin.analysis.objectives import ClassObjectives, Criterion, class_criteria
from bench_plugin.analysis.queueing import latency_split
from bench_plugin.analysis.significance import Judged, complement_figure, ratio_figure
from bench_plugin.analysis.statistics import Spread, spread
from bench_plugin.results.limits import ERROR_RATE, NOT_MEASURED, Limit, skipped_note
from bench_plugin.results.reasons import RunFlag
from bench_plugin.results.summary import (
    ClassComparison,
    ClassStats,
    GeneratorCheck,
    StageComparison,
    StageSummary,
    TrialSummary,
)
from bench_plugin.scenario import WORKLOAD_CLASSES

Run = tuple[TrialSummary, StageSummary]
"""One repeat's trial and its judged stage."""


def _flags(runs: dict[int, Run], theirs: dict[int, Run], attribute: str) -> list[RunFlag]:
    """Each run's ``attribute`` reason (generator_limited, host_busy, protocol_failure), with its arm and repeat."""
    out = []
    for group in (runs, theirs):
        for repeat, (trial, stage) in sorted(group.items()):
            reason = getattr(stage, attribute)
            if reason:
                out.append(RunFlag(arm=trial.arm, repeat=repeat, why=reason))
    return out


def jain(values: list[float]) -> float | None:
    """Jain's fairness index (sum x)^2 / (n sum x^2); None for no values or all zeros."""
    square_sum = sum(v * v for v in values)
    if not values or square_sum == 0:
        return None
    return sum(values) ** 2 / (len(values) * square_sum)


def judged_runs(trials: list[TrialSummary], index: int) -> dict[int, Run]:
    """Per repeat, the trial and its stage ``index`` where that stage can be judged."""
    out: dict[int, Run] = {}
    for trial in trials:
        stage = trial.judged_stage(index)
        if stage is not None:
            out[trial.repeat] = (trial, stage)
    return out


def class_names(runs: list[Run]) -> list[str]:
    """The classes offered load in these runs, in the canonical order."""
    offered = {name for _, stage in runs for name in stage.offered}
    return [name for name in WORKLOAD_CLASSES if name in offered]


def goodput_per_device(run: Run, names: list[str]) -> float | None:
    """Sum of the classes' goodput over the devices charged; None if a class has no figures."""
    trial, stage = run
    goodputs = [stage.classes[n].goodput_rps if n in stage.classes else None for n in names]
    if any(g is None for g in goodputs) or trial.devices_charged <= 0:
        return None
    return sum(g for g in goodputs if g is not None) / trial.devices_charged


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b == 0 else a / b


def _breaches(name: str, runs: list[ClassStats | None], objectives: ClassObjectives
              ) -> tuple[tuple[str, ...], tuple[Limit, ...]]:
    """Criteria that failed in some repeat: the mean measured value over repeats, and how often; in words (the
    stage's reasons) and as items (what the answer names)."""
    n = len(runs)
    skipped = sum(1 for s in runs if s is None)
    limits = [Limit(workload=name, note=skipped_note(skipped, n))] if skipped else []
    out = [limits[0].text()] if skipped else []
    per_criterion: dict[str, list[Criterion]] = {}
    for stats in runs:
        for c in class_criteria(name, stats, objectives) if stats else []:
            per_criterion.setdefault(c.name, []).append(c)
    for criteria in per_criterion.values():
        failed = sum(1 for c in criteria if not c.passed)
        if failed:
            measured = [c.measured for c in criteria if c.measured is not None]
            mean = Criterion(name, criteria[0].name, sum(measured) / len(measured) if measured else None,
                             criteria[0].limit)
            out.append(f"{mean.describe()} (mean; over the limit in {failed} of {n} repeats)")
            limits.append(mean.breach())
    return tuple(out), tuple(limits)


def judge_class(name: str, runs: list[ClassStats | None], objectives: ClassObjectives | None) -> ClassComparison:
    """A class's own figures over its repeats, and whether it kept its SLOs and error budget."""
    measured = [s for s in runs if s is not None]
    criteria = [c for s in measured for c in (class_criteria(name, s, objectives) if objectives else [])]
    # A skipped stage failed (it came after a rollback); a stage never judged cannot be said to pass.
    judged = bool(runs) and len(measured) == len(runs)
    breaches, limits = _breaches(name, runs, objectives) if objectives else ((), ())
    if not runs:
        limits = (Limit(workload=name, note=NOT_MEASURED),)
        breaches = (limits[0].text(),)
    return ClassComparison(
        slo_attainment=spread([s.slo_attainment for s in measured]),
        goodput_rps=spread([s.goodput_rps for s in measured]),
        meets_slo=judged and all(c.passed for c in criteria if c.name != ERROR_RATE),
        within_error_budget=judged and all(c.passed for c in criteria if c.name == ERROR_RATE),
        breaches=list(breaches),
        limits=list(limits) or None,
    )


Getter = Callable[[ClassStats], float | None]

_THROUGHPUT: Getter = lambda s: s.throughput_rps  # noqa: E731
_P95: Getter = lambda s: s.latency_ms.get("p95")  # noqa: E731
_TTFT: Getter = lambda s: s.ttft_ms.get("p95") if s.ttft_ms else None  # noqa: E731
_TPOT: Getter = lambda s: s.tpot_ms.get("p95") if s.tpot_ms else None  # noqa: E731


def _paired(pairs: list[tuple[Run, Run]], name: str, get: Getter) -> list[float | None]:
    """Per paired repeat, the arm's figure over the control's (None where either is missing)."""
    out = []
    for (_, mine), (_, theirs) in pairs:
        a, b = mine.classes.get(name), theirs.classes.get(name)
        out.append(_ratio(get(a), get(b)) if a and b else None)
    return out


def _compare_class(base: ClassComparison, name: str, pairs: list[tuple[Run, Run]]) -> ClassComparison:
    """The class's own figures with its paired ratios against the control's added."""
    norm = ratio_figure(_paired(pairs, name, _THROUGHPUT))
    llm = name == "llm"
    return base.model_copy(update={
        "normalised_throughput": norm,
        "throughput_loss": complement_figure(norm),
        "slowdown_p95": ratio_figure(_paired(pairs, name, _P95)),
        "slowdown_ttft_p95": ratio_figure(_paired(pairs, name, _TTFT)) if llm else None,
        "slowdown_tpot_p95": ratio_figure(_paired(pairs, name, _TPOT)) if llm else None,
        "latency_split": latency_split([(mine.classes.get(name), ref.classes.get(name))
                                        for (_, mine), (_, ref) in pairs]),
    })


def _gain_and_fairness(norms: list[list[float | None]], n_classes: int) -> tuple[Judged, Spread]:
    """Per repeat, the sum and Jain's index of the classes' normalised throughputs (complete repeats only).

    The gain is a sum of positive ratios, so it is summarised like one (geometric mean, log-scale
    interval) against its own no change, the number of classes.
    """
    complete = [[v for v in per_repeat if v is not None] for per_repeat in norms]
    complete = [values for values in complete if len(values) == n_classes]
    return ratio_figure([sum(v) for v in complete], float(n_classes)), spread([jain(v) for v in complete])


def stage_contention(
    index: int, trials: list[TrialSummary], control: list[TrialSummary] | None,
    objectives: dict[str, ClassObjectives],
) -> StageComparison:
    """Stage ``index`` of an arm's ``trials``, against the ``control`` trials (None: this is the control)."""
    runs = judged_runs(trials, index)
    theirs = judged_runs(control, index) if control is not None else {}
    names = class_names([*runs.values(), *theirs.values()])
    first = next(iter(runs.values()), None) or next(iter(theirs.values()), None)
    offered = first[1].load if first else {}
    classes: dict[str, ClassComparison] = {}
    for name in names:
        stats = [stage.classes.get(name) for _, stage in runs.values() if name in stage.offered]
        classes[name] = judge_class(name, stats, objectives.get(name))
    own = spread([goodput_per_device(run, names) for run in runs.values()])
    limited, busy = _flags(runs, theirs, "generator_limited"), _flags(runs, theirs, "host_busy")
    failed = _flags(runs, theirs, "protocol_failure")
    checks = [stage.generator_check or GeneratorCheck() for group in (runs, theirs)
              for _, (_, stage) in sorted(group.items()) if stage.generator_limited]
    if control is None:
        return StageComparison(index=index, offered=offered, repeats=len(runs), classes=classes,
                               generator_limited=limited, generator_checks=checks, host_busy=busy,
                               protocol_failure=failed, goodput_per_device=own)
    pairs = [(runs[r], theirs[r]) for r in sorted(set(runs) & set(theirs))]
    classes = {name: _compare_class(c, name, pairs) for name, c in classes.items()}
    norms = [[_paired([pair], name, _THROUGHPUT)[0] for name in names] for pair in pairs]
    gain, fairness = _gain_and_fairness(norms, len(names))
    gpd = [(goodput_per_device(mine, names), goodput_per_device(ref, names)) for mine, ref in pairs]
    return StageComparison(
        index=index, offered=offered, repeats=len(runs), classes=classes,
        generator_limited=limited, generator_checks=checks, host_busy=busy, protocol_failure=failed,
        goodput_per_device=own,
        paired_repeats=len(pairs), consolidation_gain=gain, fairness=fairness,
        control_goodput_per_device=spread([goodput_per_device(run, names) for run in theirs.values()]),
        goodput_per_device_ratio=ratio_figure([_ratio(a, b) for a, b in gpd]),
    )
