"""Rollback conditions: stop a stage that is clearly past saturation instead of waiting it out.

The scenario states the conditions beforehand (the seed: define rollback conditions before the
failure, not after): a class whose error rate passes a multiple of its error budget, or whose P95 so
far passes a multiple of its P95 SLO, aborts the stage, and the trial's higher stages are skipped.
A server that stops answering altogether trips the condition through its timeouts (each class's
request_timeout_s), which count as errors.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from bench_plugin.samples import Sample
from bench_plugin.scenario import Scenario


@dataclass
class StageTally:
    """Running counts of one stage's ended requests, per class."""

    key: tuple[int, int, int]
    latencies: dict[str, list[float]] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)

    def add(self, sample: Sample) -> None:
        """Count a sample if it belongs to this stage."""
        if (sample.trial, sample.segment, sample.stage) != self.key:
            return
        self.latencies.setdefault(sample.workload, []).append(sample.latency_ms)
        if not sample.ok:
            self.errors[sample.workload] = self.errors.get(sample.workload, 0) + 1


class RollbackGuard:
    """Evaluates the scenario's rollback conditions on a stage's tally."""

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        self.rules = scenario.rollback

    def check(self, tally: StageTally) -> str | None:
        """The reason to abort the stage now, or None."""
        for name, latencies in tally.latencies.items():
            ended = len(latencies)
            if ended < self.rules.min_requests:
                continue
            spec = self.scenario.classes.get(name)
            errors = tally.errors.get(name, 0)
            if errors / ended > spec.error_budget * self.rules.max_error_rate_multiple:
                return (f"{name} error rate {errors / ended:.1%} passed {self.rules.max_error_rate_multiple:g}x "
                        f"its error budget ({spec.error_budget:.1%})")
            p95 = float(np.percentile(latencies, 95))
            if p95 > spec.slo.p95_ms * self.rules.max_p95_multiple:
                return (f"{name} P95 {p95:.0f} ms passed {self.rules.max_p95_multiple:g}x its SLO "
                        f"({spec.slo.p95_ms:g} ms)")
        return None
