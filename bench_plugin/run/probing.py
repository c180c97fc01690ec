"""One probe of an adaptive search: its stages run one after another until the probe is decided.

The conductor proposes a load along a ray (analysis/search.py); this runs the probe at it through a callback that
runs one stage and drains it (``run_stage``), and decides it with analysis/probe.py's rules:

- a stage that did not complete (rolled back, cut short) fails the probe;
- otherwise the probe is decided over every sample its kept stages gave, pooled;
- a stage whose load generator fell behind, where the probe with it does not pass, is set aside and run again,
  up to ``SET_ASIDE_LIMIT`` times, unless the search's budget of stage-runs is spent;
- an undecided probe runs again at its load up to ``max_extensions`` times, unless the budget is spent or another
  run is not expected to decide it (``skip_futile_extensions``; ``skip_futile_holds`` for a hold);
- the decision then has its load generator's delays judged: a failure those delays may have made is not judged.

The decision says which stages it pooled and which it set aside; the caller numbers the next stage from
``next_index``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from bench_plugin.analysis.objectives import ClassObjectives
from bench_plugin.analysis.probe import decide, extension_futile, failed_stage, judge_lag, set_aside
from bench_plugin.results.samples import Sample
from bench_plugin.results.summary import ProbeDecision
from bench_plugin.results.words import Phase, ProbeOutcome, StageStatus
from bench_plugin.scenario import Search

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class StageRun:
    """What one stage of a probe gave, drained: how it ended, its samples, and why its load generator fell behind
    (analysis/selfcheck.py; None where it kept up)."""

    status: StageStatus
    samples: list[Sample]
    behind: str | None = None


RunStage = Callable[[int, str], StageRun]
"""Runs the probe's stage numbered ``index`` under ``name`` and drains it."""


@dataclass(frozen=True)
class ProbeRun:
    """A probe run to its decision: the decision, the stages it pooled, those it set aside, the next stage's index."""

    decision: ProbeDecision
    stages: list[int]
    aside: list[int] = field(default_factory=list)
    next_index: int = 0


def run_probe(run_stage: RunStage, spec: Search, objectives: Mapping[str, ClassObjectives], label: str,
              phase: Phase, index: int, *, runs_before: int = 0, budget: int | None = None, trial: int = 0) -> ProbeRun:
    """Run trial ``trial``'s probe ``label`` from stage ``index`` until it is decided (the module's rules);
    ``runs_before``: the stage-runs its search had spent before it, against its ``budget`` (None: no budget)."""
    pooled: list[Sample] = []
    stages: list[int] = []
    aside: list[int] = []
    behind: str | None = None  # why the load generator fell behind in some pooled stage of the probe
    judged = dict(objectives)
    while True:
        ran = len(stages) + len(aside)
        run = run_stage(index, label if not ran else f"{label} again {ran}")
        if run.status != StageStatus.COMPLETED:  # rolled back
            decision = failed_stage(spec.confidence, [*stages, index], f"its stage was {run.status}")
        else:
            decision = decide([*pooled, *run.samples], judged, spec.confidence, [*stages, index])
        spent = budget is not None and runs_before + ran + 1 >= budget
        if not spent and set_aside(decision, run.behind, len(aside)):
            logger.warning("trial %d stage %d set aside and run again: %s", trial, index, run.behind)
            aside.append(index)
            index += 1
            continue
        pooled += run.samples
        stages.append(index)
        index += 1
        behind = behind or run.behind
        if decision.outcome != ProbeOutcome.UNDECIDED or len(stages) > spec.max_extensions or spent:
            break
        skip = spec.skip_futile_holds if phase == Phase.SUSTAIN else spec.skip_futile_extensions
        if skip and extension_futile(decision, len(stages), spec.max_extensions + 1 - len(stages)):
            decision = decision.model_copy(update={"futile": True})
            break
    decision = judge_lag(decision, behind)  # a failure the generator's delays may have made: unjudged
    return ProbeRun(decision=decision.model_copy(update={"set_aside": aside}), stages=stages, aside=aside,
                    next_index=index)
