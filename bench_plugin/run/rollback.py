"""Rollback conditions: stop a stage that is clearly past saturation instead of waiting it out.

The scenario states the conditions beforehand (the seed: define rollback conditions before the
failure, not after): a class whose error rate passes a multiple of its error budget, or whose P95 so
far passes a multiple of its P95 SLO, aborts the stage, and the trial's higher stages are skipped.
Requests still in flight count as well, once they are older than the P95 limit: they will end past
it whatever happens, and an overloaded server whose requests stop ending would otherwise never trip
the condition (nothing ends, so nothing is judged) and be waited out to the end of the stage.

One condition is the campaign's, not the scenario's: when a class's last PROTOCOL_MIN_REQUESTS ended
requests (or more) have all failed with one and the same error that load does not cause (a 4xx for
the body the class sends, a reply it cannot read: samples.protocol_signature), and that error is at
least half of the class's ended requests in the stage, the stage measures the protocol, not capacity,
and so would every stage after it: the campaign stops there, saying why (``protocol_failure``),
rather than report the error rate as the arm's boundary.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from bench_plugin.analysis.statistics import percentile
from bench_plugin.results.samples import Sample, protocol_signature
from bench_plugin.scenario import Scenario

PROTOCOL_MIN_REQUESTS = 5
"""Ended requests of a class, all failing with one protocol error, that stop the campaign."""


@dataclass
class StageTally:
    """Running counts of one stage's ended requests, per class."""

    key: tuple[int, int, int]
    latencies: dict[str, list[float]] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    signatures: dict[str, dict[str | None, int]] = field(default_factory=dict)
    """Class -> protocol_signature (None: success or a load-dependent error) -> requests."""
    streak: dict[str, tuple[str, int, str]] = field(default_factory=dict)
    """Class -> the signature its latest ended requests all failed with, how many in a row, the first's message."""

    def add(self, sample: Sample) -> None:
        """Count a sample if it belongs to this stage."""
        if (sample.trial, sample.segment, sample.stage) != self.key:
            return
        name = sample.workload
        self.latencies.setdefault(name, []).append(sample.latency_ms)
        signature = protocol_signature(sample)
        kinds = self.signatures.setdefault(name, {})
        kinds[signature] = kinds.get(signature, 0) + 1
        if not sample.ok:
            self.errors[name] = self.errors.get(name, 0) + 1
        if signature is None:
            self.streak.pop(name, None)
        else:
            same, count, detail = self.streak.get(name, (signature, 0, sample.detail or sample.error or "failed"))
            self.streak[name] = (signature, count + 1, detail) if same == signature else (
                signature, 1, sample.detail or sample.error or "failed")

    def protocol_failure(self) -> str | None:
        """Why the stage measures only a protocol error (see the module docstring), or None."""
        for name in sorted(self.streak):
            kind, count, detail = self.streak[name]
            ended = sum(self.signatures[name].values())
            if count >= PROTOCOL_MIN_REQUESTS and 2 * self.signatures[name][kind] >= ended:
                return (f"{name}: {self.signatures[name][kind]} of {ended} requests so far failed with {kind}, the "
                        f"last {count} in a row ({detail[:200]}): nothing about capacity can be measured")
        return None


class RollbackGuard:
    """Evaluates the scenario's rollback conditions on a stage's tally."""

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        self.rules = scenario.rollback

    def check(self, tally: StageTally, in_flight: Sequence[tuple[str, float]] = ()) -> str | None:
        """The reason to abort the stage now, or None.

        ``in_flight`` lists (class, seconds in flight when last seen) of the stage's requests not yet ended.
        """
        for name in sorted(set(tally.latencies) | {workload for workload, _ in in_flight}):
            spec = self.scenario.classes.get(name)
            limit_ms = spec.slo.p95_ms * self.rules.max_p95_multiple
            overdue = sum(1 for workload, age_s in in_flight if workload == name and age_s * 1000 > limit_ms)
            latencies = tally.latencies.get(name, [])
            ended = len(latencies)
            if ended + overdue < self.rules.min_requests:
                continue
            errors = tally.errors.get(name, 0)
            if ended and errors / ended > spec.error_budget * self.rules.max_error_rate_multiple:
                return (f"{name} error rate {errors / ended:.1%} passed {self.rules.max_error_rate_multiple:g}x "
                        f"its error budget ({spec.error_budget:.1%})")
            # A stuck request's latency is unknown but past the limit: any value past it decides the same.
            p95 = percentile(latencies + [2 * limit_ms] * overdue, 95)
            assert p95 is not None  # ended + overdue >= min_requests > 0
            if p95 > limit_ms:
                late = sum(1 for v in latencies if v > limit_ms) + overdue
                stuck = f", {overdue} of them still in flight" if overdue else ""
                return (f"{name} P95 passed {self.rules.max_p95_multiple:g}x its SLO ({spec.slo.p95_ms:g} ms): "
                        f"{late} of {ended + overdue} requests took longer than {limit_ms:g} ms{stuck}")
        return None
