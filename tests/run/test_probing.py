"""One search probe run stage by stage until decided (run/probing.py), driven by a scripted stage runner: which
stages it runs under which names, what it pools, sets aside and decides, without a process or a server.
(tests/test_search_e2e.py and tests/launch/test_resume_e2e.py run the same loop in real campaigns.)"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from bench_plugin.analysis.objectives import ClassObjectives
from bench_plugin.results.samples import Sample
from bench_plugin.results.words import Phase, ProbeOutcome, StageStatus
from bench_plugin.run.probing import ProbeRun, StageRun, run_probe
from bench_plugin.scenario import Search, Slo

OBJECTIVES = {"embedding": ClassObjectives(Slo(p95_ms=100.0), 0.01)}
"""P95 within 100 ms: at 95% confidence, 200 requests under it pass and 20 cannot decide."""


def samples(stage: int, n: int, beyond: int = 0) -> list[Sample]:
    """``n`` requests of ``stage``, ``beyond`` of them over the SLO (150 ms), spread evenly, the rest at 50 ms."""
    out = []
    for i in range(n):
        start = stage * 100 + i / 10
        latency = 0.150 if i * beyond // n != (i + 1) * beyond // n else 0.050
        out.append(Sample(workload="embedding", trial=1, segment=0, stage=stage, seq=i, item=0, intended_s=start,
                          sent_s=start, end_s=start + latency, ok=True, error=None, output_tokens=1))
    return out


class Script:
    """Runs the probe's stages as scripted, in order, and keeps what it was asked."""

    def __init__(self, runs: Sequence[tuple[StageStatus, int, int, str | None]]) -> None:
        self.runs = list(runs)  # (status, requests, of them beyond the SLO, why the generator fell behind)
        self.asked: list[tuple[int, str]] = []

    def __call__(self, index: int, name: str) -> StageRun:
        self.asked.append((index, name))
        status, n, beyond, behind = self.runs[len(self.asked) - 1]
        return StageRun(status, samples(index, n, beyond), behind)


def probe(script: Script, *, phase: Phase = Phase.PROBE, budget: int | None = None, runs_before: int = 0,
          **search: object) -> ProbeRun:
    spec = Search.model_validate({"mix": {"embedding": 10.0}, **search})
    return run_probe(script, spec, OBJECTIVES, "x2", phase, 7, runs_before=runs_before, budget=budget)


def test_a_probe_decided_by_its_first_stage_runs_only_that_one() -> None:
    script = Script([(StageStatus.COMPLETED, 200, 0, None)])
    run = probe(script)
    assert script.asked == [(7, "x2")]
    assert run.decision.outcome == ProbeOutcome.PASS and run.stages == [7] and run.next_index == 8
    assert run.decision.stages == [7] and run.decision.set_aside == [] and run.decision.lag_judged


def test_an_undecided_probe_runs_again_at_its_load_and_pools_its_samples() -> None:
    script = Script([(StageStatus.COMPLETED, 20, 0, None)] * 2 + [(StageStatus.COMPLETED, 200, 0, None)])
    run = probe(script, max_extensions=2)
    assert script.asked == [(7, "x2"), (8, "x2 again 1"), (9, "x2 again 2")]
    assert run.decision.outcome == ProbeOutcome.PASS and run.stages == [7, 8, 9] and run.next_index == 10
    assert sum(c.n for c in run.decision.checks if c.criterion == "p95") == 240  # every stage's requests, pooled


def test_extensions_stop_at_max_extensions_with_the_probe_still_undecided() -> None:
    script = Script([(StageStatus.COMPLETED, 20, 0, None)] * 5)
    run = probe(script, max_extensions=1)
    assert [name for _, name in script.asked] == ["x2", "x2 again 1"]
    assert run.decision.outcome == ProbeOutcome.UNDECIDED and run.decision.point and run.stages == [7, 8]


def test_a_stage_rolled_back_fails_the_probe_at_once() -> None:
    script = Script([(StageStatus.COMPLETED, 20, 0, None), (StageStatus.ABORTED, 5, 5, None)])
    run = probe(script, max_extensions=3)
    assert len(script.asked) == 2
    assert run.decision.outcome == ProbeOutcome.FAIL and run.decision.note == "its stage was aborted"
    assert run.decision.stages == [7, 8] and run.stages == [7, 8]


def test_a_stage_the_generator_fell_behind_in_is_set_aside_twice_at_most_and_run_again() -> None:
    behind = "send lag P99 40 ms over 10 ms"
    script = Script([(StageStatus.COMPLETED, 200, 40, behind)] * 3 + [(StageStatus.COMPLETED, 200, 0, None)])
    run = probe(script)
    # the first two failed with the generator behind: set aside; the third failed behind too: kept, and unjudged
    assert script.asked == [(7, "x2"), (8, "x2 again 1"), (9, "x2 again 2")]
    assert run.aside == [7, 8] and run.stages == [9] and run.decision.set_aside == [7, 8] and run.next_index == 10
    assert run.decision.outcome == ProbeOutcome.GENERATOR_LIMITED and run.decision.note == behind


def test_a_rerun_the_generator_kept_up_in_is_judged_after_two_lapses() -> None:
    behind = "send lag P99 40 ms over 10 ms"
    script = Script([(StageStatus.COMPLETED, 200, 40, behind)] * 2 + [(StageStatus.COMPLETED, 200, 0, None)])
    run = probe(script)
    assert run.aside == [7, 8] and run.stages == [9] and run.decision.outcome == ProbeOutcome.PASS


def test_a_pass_with_the_generator_behind_stands_and_a_spent_budget_sets_nothing_aside() -> None:
    behind = "send lag P99 40 ms over 10 ms"
    run = probe(Script([(StageStatus.COMPLETED, 200, 0, behind)]))
    assert run.decision.outcome == ProbeOutcome.PASS and run.aside == []  # the servers passed even with the delays
    script = Script([(StageStatus.COMPLETED, 200, 40, behind)] * 2)
    run = probe(script, budget=5, runs_before=4)  # this stage is the budget's last
    assert len(script.asked) == 1 and run.aside == [] and run.decision.outcome == ProbeOutcome.GENERATOR_LIMITED


def test_the_budget_ends_an_undecided_probe_and_a_futile_extension_is_skipped() -> None:
    script = Script([(StageStatus.COMPLETED, 20, 0, None)] * 3)
    run = probe(script, budget=6, runs_before=4, max_extensions=2)
    assert len(script.asked) == 2 and run.decision.outcome == ProbeOutcome.UNDECIDED
    # exactly at the allowance (5% beyond): more requests are not expected to decide it
    script = Script([(StageStatus.COMPLETED, 400, 20, None)] * 3)
    run = probe(script, max_extensions=2, skip_futile_extensions=True)
    assert len(script.asked) == 1 and run.decision.futile and run.decision.outcome == ProbeOutcome.UNDECIDED
    # a hold runs its extensions whatever they promise, unless skip_futile_holds
    script = Script([(StageStatus.COMPLETED, 400, 20, None)] * 3)
    run = probe(script, phase=Phase.SUSTAIN, max_extensions=2, skip_futile_extensions=True)
    assert len(script.asked) == 3 and not run.decision.futile


@pytest.mark.parametrize("status", [StageStatus.INTERRUPTED, StageStatus.INVALID])
def test_a_stage_cut_short_fails_the_probe_with_its_status(status: StageStatus) -> None:
    run = probe(Script([(status, 3, 0, None)]))
    assert run.decision.outcome == ProbeOutcome.FAIL and run.decision.note == f"its stage was {status}"
