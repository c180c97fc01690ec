"""Objectives: each class's SLOs and error budget, and how a request or a stage is judged against them.

Two judgements use the same limits:

- a request meets the SLO when it succeeded, its end-to-end latency is within ``slo.p95_ms`` and, for
  llm, its TTFT and TPOT are within ``ttft_p95_ms`` and ``tpot_p95_ms`` where those are set; these
  requests make the goodput. A successful llm answer without a first-token time cannot show its TTFT and
  does not count; one with a single output token has no time per output token, so TPOT does not apply.
- a class meets its SLOs in a stage when its P95 (and llm TTFT/TPOT P95) are within them and its error
  rate is within its error budget. Each criterion is a ratio ``measured / limit``; the stage passes
  when every ratio is at most 1, and the largest ratio is the stage's margin (the boundary search
  interpolates these ratios between stages). ``figure_criteria`` is this judge, on the figures alone: the
  summary (``class_criteria``) and the live view's window and stage so far both call it.

The limits come from the results store's ``meta.scenario.resolved.classes.<name>``, so a summary is
judged by the SLOs the campaign ran with, not by today's scenario file.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from bench_plugin.results.limits import ERROR_RATE, NO_SUCCESS, Limit
from bench_plugin.results.record import StoredScenario
from bench_plugin.results.samples import Sample
from bench_plugin.results.summary import ClassStats
from bench_plugin.scenario import Slo


@dataclass(frozen=True)
class ClassObjectives:
    """The limits one class is judged by."""

    slo: Slo
    error_budget: float
    """Largest acceptable fraction of failed requests."""


def objectives_from_scenario(scenario: StoredScenario) -> dict[str, ClassObjectives]:
    """Per class, the SLOs and error budget stored with the campaign."""
    out: dict[str, ClassObjectives] = {}
    for name, spec in scenario.classes.items():
        out[name] = ClassObjectives(spec.slo, spec.error_budget)
    return out


def sample_meets_slo(sample: Sample, objectives: ClassObjectives) -> bool:
    """Whether one request succeeded within every latency SLO of its class."""
    slo = objectives.slo
    if not sample.ok or sample.latency_ms > slo.p95_ms:
        return False
    if sample.workload != "llm":
        return True
    if slo.ttft_p95_ms is not None:
        ttft = sample.ttft_ms
        if ttft is None or ttft > slo.ttft_p95_ms:
            return False
    if slo.tpot_p95_ms is not None:
        tpot = sample.tpot_ms
        if tpot is not None and tpot > slo.tpot_p95_ms:
            return False
    return True


@dataclass(frozen=True)
class Criterion:
    """One judged figure of a class in a stage: a measured value against its limit."""

    workload: str
    name: str
    """``p95``, ``ttft p95``, ``tpot p95`` or ``error rate``."""
    measured: float | None
    """None: nothing succeeded, so the latency cannot be within its SLO."""
    limit: float

    @property
    def label(self) -> str:
        """``llm p95``, ``embedding error rate``: the name used for a limiting criterion."""
        return f"{self.workload} {self.name}"

    @property
    def ratio(self) -> float:
        """measured / limit; infinite when nothing was measured or the limit is zero and was exceeded."""
        if self.measured is None:
            return math.inf
        if self.limit == 0:
            return 0.0 if self.measured == 0 else math.inf
        return self.measured / self.limit

    @property
    def passed(self) -> bool:
        """Within the limit (ratio at most 1)."""
        return self.ratio <= 1.0

    def as_limit(self) -> Limit:
        """The criterion as what limits: its class and figure."""
        return Limit(workload=self.workload, figure=self.name)

    def breach(self) -> Limit:
        """The criterion as what limits, with by how much: :meth:`describe`'s words before the figures in
        brackets."""
        if self.name == ERROR_RATE:
            return Limit(workload=self.workload, figure=self.name, measured=self.measured, budget=self.limit)
        if self.measured is None:
            return Limit(workload=self.workload, figure=self.name, note=NO_SUCCESS)
        return Limit(workload=self.workload, figure=self.name, times=self.ratio)

    def describe(self) -> str:
        """Plain words: ``llm p95 2.10x its SLO (4200 ms vs 2000 ms)``."""
        if self.name == "error rate":
            measured = "-" if self.measured is None else f"{self.measured:.1%}"
            return f"{self.workload} error rate {measured} vs its budget {self.limit:.1%}"
        if self.measured is None:
            return f"{self.workload} {self.name}: no request succeeded (SLO {self.limit:g} ms)"
        return f"{self.label} {self.ratio:.2f}x its SLO ({self.measured:.0f} ms vs {self.limit:g} ms)"


def figure_criteria(workload: str, objectives: ClassObjectives, *, requests: int, error_rate: float,
                    p95_ms: float | None, ttft_p95_ms: float | None = None,
                    tpot_p95_ms: float | None = None) -> list[Criterion]:
    """The criteria of one class's measured figures; empty when it had no requests to judge.

    The one judge of whether a class keeps its SLOs and error budget: the summary and the boundary search
    (through ``class_criteria``) and the live view use it. Latency figures are P95s over successful
    requests (None where none succeeded); ``error_rate`` is failed / ``requests``.
    """
    if requests == 0:
        return []
    slo = objectives.slo
    succeeded = error_rate < 1.0
    out = [Criterion(workload, "p95", p95_ms if succeeded else None, slo.p95_ms)]
    if workload == "llm" and slo.ttft_p95_ms is not None:
        out.append(Criterion(workload, "ttft p95", ttft_p95_ms, slo.ttft_p95_ms))
    # Answers of one token have no TPOT: the criterion does not apply rather than fail.
    if workload == "llm" and slo.tpot_p95_ms is not None and (tpot_p95_ms is not None or not succeeded):
        out.append(Criterion(workload, "tpot p95", tpot_p95_ms, slo.tpot_p95_ms))
    out.append(Criterion(workload, "error rate", error_rate, objectives.error_budget))
    return out


def class_criteria(workload: str, stats: ClassStats, objectives: ClassObjectives) -> list[Criterion]:
    """The criteria of one class in one stage (``figure_criteria`` of its stats); empty without requests."""
    if stats.requests == 0:
        return []
    return figure_criteria(workload, objectives, requests=stats.requests, error_rate=stats.errors / stats.requests,
                           p95_ms=stats.latency_ms.get("p95"),
                           ttft_p95_ms=stats.ttft_ms.get("p95") if stats.ttft_ms else None,
                           tpot_p95_ms=stats.tpot_ms.get("p95") if stats.tpot_ms else None)
