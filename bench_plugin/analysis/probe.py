"""Probe decision: whether one load of a search keeps every SLO, decided with stated confidence, or undecided.

A P95 within its SLO means at most 5% of requests are slower than the SLO; an error rate within its
budget means at most that fraction failed. So every criterion of a class is a proportion: of the ``n``
requests judged (the successful ones for a latency, every one for errors), ``k`` exceeded, and the true
fraction ``p`` must be at most the allowance ``a`` (0.05, or the budget). With the one-sided Wilson score
bounds ``L`` and ``U`` of ``p`` at confidence ``c`` (z = Φ⁻¹(c))::

    p̂ = k / n,   centre = (p̂ + z²/2n) / (1 + z²/n),   half = z √(p̂(1 - p̂)/n + z²/4n²) / (1 + z²/n)
    L = centre - half,   U = centre + half

Requests queued behind one another are not independent: near the boundary a slow spell makes many of
them slow at once, and Wilson's bounds alone would be far too narrow. So with ``n ≥ 2B`` the requests,
in the order they were meant to be sent, are also cut into ``B = 10`` consecutive batches, and the
batch means give a Student-t interval ``f̄ ± t(c, B-1) · sd(f) / √B`` of the fraction; the bounds used
are the wider of the two (L the lower, U the higher). A criterion's pooled extensions add batches.

A latency criterion **passes** when U ≤ a, **fails** when L > a, and is **undecided** otherwise. The
error budget is a guard rather than the figure searched: it **fails** when L > b (the budget), is
**undecided** while p̂ > b without that confidence, and **passes** otherwise; showing U ≤ 1% would take
some 270 requests per probe even with none failed, so a probe is not held up proving a budget that no
request has touched. A probe passes
when every criterion of every loaded class passes, fails when any fails, and is undecided otherwise; an
undecided probe is run again at the same load and judged on its pooled samples (``search.max_extensions``
times at most), and only then decided on its point estimates (every p̂ ≤ a), which the record says. With
``search.skip_futile_extensions``, an undecided probe is not run again where the extensions it has left are
not expected to decide it (:func:`extension_futile`: at its estimates, with that many more requests, every
undecided criterion's bounds would still hold its allowance between them, as near a boundary where the true
fraction is the allowance itself); it is decided on its point estimates at once, and the record says so
(``futile``).

Latency counts from each request's intended send time, so a load generator that falls behind
(analysis/selfcheck.py) adds its own delays, in sending and in reading the answers, to the latency the
probe judges. A probe the search takes as passed (a pass, or an undecided one whose point estimates are
within) stands: the servers kept the SLOs even with those delays added. A failure does not: the client
may have made it, and the send times alone cannot say how much, since a loop short of CPU also reads
the answers late. So a probe that fails (or stays undecided beyond its allowance, or whose stage the
rollback stopped for its latency) on such a stage is not judged. A lapse can be brief (a virtual machine
stalled for tens of milliseconds, a burst of other work on the host): so such a stage is first **set
aside** and run again at the same load, up to twice per probe (``SET_ASIDE_LIMIT``: a busy host can lapse
twice in a row); its samples are not pooled, and the decision lists it (``set_aside``). Where the generator
falls behind a third time in a probe that does not pass, its outcome is ``generator-limited``, and the search
stops there (analysis/search.py), its boundary at least the last load that passed. The fix is the
generator's (more load-generating processes), not the probe's.

Special cases, each decided: a class with requests but none successful fails its latency criteria; a
zero error budget passes with no error and fails with one; a successful LLM answer without a first-token
time counts as beyond its TTFT SLO (as the goodput counts it), and one of a single token has no TPOT.
Batches shorter than the queue's memory still understate the spread, so near the boundary the stated
confidence can be optimistic; the sustain stage (a longer hold) checks what the probes found.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from itertools import pairwise
from statistics import NormalDist

from bench_plugin.analysis.objectives import ClassObjectives
from bench_plugin.results.samples import Sample
from bench_plugin.results.summary import ProbeCheck, ProbeDecision
from bench_plugin.results.words import ProbeOutcome

P95_ALLOWED = 0.05
"""The fraction of requests a P95 SLO lets be slower than it."""
SET_ASIDE_LIMIT = 2
"""Stages a probe sets aside at most, its load generator behind in them, before it goes unjudged."""
BATCHES = 10
"""Consecutive batches of a criterion's requests for the batch-means bounds."""


def wilson_bounds(exceeded: int, n: int, confidence: float) -> tuple[float, float]:
    """One-sided Wilson score bounds (lower, upper) of a proportion at ``confidence``; (0, 1) without data."""
    if n <= 0:
        return 0.0, 1.0
    z = NormalDist().inv_cdf(confidence)
    p = exceeded / n
    denominator = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def batch_bounds(beyond: Sequence[bool], confidence: float, batches: int = BATCHES) -> tuple[float, float] | None:
    """One-sided batch-means bounds (lower, upper) of the fraction of ``beyond`` (in send order) that is True;
    None with fewer than two requests per batch."""
    n = len(beyond)
    if n < 2 * batches:
        return None
    edges = [round(i * n / batches) for i in range(batches + 1)]
    means = [sum(beyond[a:b]) / (b - a) for a, b in pairwise(edges)]
    mean = sum(means) / batches
    sd = math.sqrt(sum((m - mean) ** 2 for m in means) / (batches - 1))
    from scipy import special  # imported when first needed, as in analysis/statistics: stdtrit is t's quantile

    half = float(special.stdtrit(batches - 1, confidence)) * sd / math.sqrt(batches)
    return max(0.0, mean - half), min(1.0, mean + half)


def check(workload: str, criterion: str, beyond: Sequence[bool], allowed: float, confidence: float, *,
          guard: bool = False) -> ProbeCheck:
    """One criterion's count, bounds and outcome over ``beyond`` (per request in send order: beyond its limit);
    see the module docstring (``guard``: the error budget's rule)."""
    exceeded, n = sum(beyond), len(beyond)
    lower, upper = wilson_bounds(exceeded, n, confidence)
    batched = batch_bounds(beyond, confidence)
    if batched is not None:
        lower, upper = min(lower, batched[0]), max(upper, batched[1])
    if n == 0:
        outcome = ProbeOutcome.UNDECIDED
    elif allowed <= 0:
        outcome = ProbeOutcome.PASS if exceeded == 0 else ProbeOutcome.FAIL
    elif lower > allowed:
        outcome = ProbeOutcome.FAIL
    elif upper <= allowed or (guard and exceeded <= allowed * n):
        outcome = ProbeOutcome.PASS
    else:
        outcome = ProbeOutcome.UNDECIDED
    return ProbeCheck(workload=workload, criterion=criterion, n=n, exceeded=exceeded, allowed=allowed,
                      lower=lower, upper=upper, outcome=outcome)


def class_checks(workload: str, samples: list[Sample], objectives: ClassObjectives,
                 confidence: float) -> list[ProbeCheck]:
    """Every criterion of one class over its samples (empty without samples)."""
    if not samples:
        return []
    slo = objectives.slo
    samples = sorted(samples, key=lambda s: s.intended_s)
    ok = [s for s in samples if s.ok]
    if not ok:  # nothing succeeded: no latency can be within its SLO
        out = [ProbeCheck(workload=workload, criterion="p95", n=0, exceeded=0, allowed=P95_ALLOWED,
                          lower=1.0, upper=1.0, outcome=ProbeOutcome.FAIL)]
    else:
        out = [check(workload, "p95", [s.latency_ms > slo.p95_ms for s in ok], P95_ALLOWED, confidence)]
        if workload == "llm" and slo.ttft_p95_ms is not None:
            ttft = slo.ttft_p95_ms
            out.append(check(workload, "ttft p95", [s.ttft_ms is None or s.ttft_ms > ttft for s in ok],
                             P95_ALLOWED, confidence))
        if workload == "llm" and slo.tpot_p95_ms is not None:
            tpots = [t for t in (s.tpot_ms for s in ok) if t is not None]
            if tpots:
                out.append(check(workload, "tpot p95", [t > slo.tpot_p95_ms for t in tpots], P95_ALLOWED,
                                 confidence))
    out.append(check(workload, "error rate", [not s.ok for s in samples], objectives.error_budget, confidence,
                     guard=True))
    return out


def decide(samples: Iterable[Sample], objectives: dict[str, ClassObjectives], confidence: float,
           stages: list[int]) -> ProbeDecision:
    """The probe's decision over the pooled ``samples`` of ``stages``, judged on the classes of ``objectives``."""
    pooled: dict[str, list[Sample]] = {name: [] for name in objectives}
    for sample in samples:
        if sample.workload in pooled:
            pooled[sample.workload].append(sample)
    checks = [c for name, spec in objectives.items() for c in class_checks(name, pooled[name], spec, confidence)]
    outcomes = {c.outcome for c in checks}
    outcome = (ProbeOutcome.FAIL if ProbeOutcome.FAIL in outcomes
               else ProbeOutcome.PASS if outcomes == {ProbeOutcome.PASS} else ProbeOutcome.UNDECIDED)
    point = all(c.outcome != ProbeOutcome.FAIL and (c.n == 0 or c.exceeded <= c.allowed * c.n) for c in checks)
    return ProbeDecision(outcome=outcome, point=point, confidence=confidence, checks=checks, stages=list(stages))


def extension_futile(decision: ProbeDecision, runs: int, more: int) -> bool:
    """Whether running the undecided probe ``more`` times again (each as long as each of its ``runs``) is not expected
    to decide it (``search.skip_futile_extensions``; the module docstring): at each undecided criterion's estimate
    ``p̂ = k / n``, the bounds it would have with ``more / runs`` times its requests again (each side's distance to
    ``p̂`` shrunk by ``√(runs / (runs + more))``, as both of its bounds shrink with the square root of the
    requests) still hold its allowance between them. False for a decided probe, with nothing more to run, or where
    a criterion has no request yet (or the probe none at all)."""
    undecided = [c for c in decision.checks if c.outcome == ProbeOutcome.UNDECIDED]
    if decision.outcome != ProbeOutcome.UNDECIDED or more <= 0 or runs <= 0 or not undecided:
        return False
    shrink = math.sqrt(runs / (runs + more))
    for c in undecided:
        if c.n == 0:
            return False
        estimate = c.exceeded / c.n
        lower = estimate - (estimate - c.lower) * shrink
        upper = estimate + (c.upper - estimate) * shrink
        if lower > c.allowed or upper <= c.allowed:
            return False
    return True


def failed_stage(confidence: float, stages: list[int], why: str) -> ProbeDecision:
    """A probe whose stage did not complete (rolled back, cut short): a failure, decided without counts."""
    return ProbeDecision(outcome=ProbeOutcome.FAIL, point=False, confidence=confidence, stages=list(stages), note=why)


def set_aside(decision: ProbeDecision, why: str | None, aside: int) -> bool:
    """Whether the stage just run is set aside and run again (the module's rule): its load generator fell behind
    (``why``), the probe with it pooled (``decision``) does not pass, and the probe has set fewer than
    ``SET_ASIDE_LIMIT`` stages aside (``aside``)."""
    return why is not None and decision.outcome != ProbeOutcome.PASS and aside < SET_ASIDE_LIMIT


def judge_lag(decision: ProbeDecision, why: str | None) -> ProbeDecision:
    """``decision`` with its load generator's delays judged (the module's rule): ``why`` says why the generator fell
    behind in one of the probe's stages (None: it kept up)."""
    checked = decision.model_copy(update={"lag_judged": True})
    if why is None or taken_as_passed(decision):  # it kept up, or the servers passed even with its delays
        return checked
    return generator_limited(checked, why)


def generator_limited(decision: ProbeDecision, why: str) -> ProbeDecision:
    """``decision`` unjudged: its stage's load generator fell behind (``why``, analysis/selfcheck.py)."""
    return decision.model_copy(update={"outcome": ProbeOutcome.GENERATOR_LIMITED, "point": False, "note": why})


def limited_why(decision: ProbeDecision | None) -> str | None:
    """Why the probe went unjudged (its load generator fell behind), or None when it was judged."""
    if decision is None or decision.outcome != ProbeOutcome.GENERATOR_LIMITED:
        return None
    return decision.note or "the load generator fell behind"


def taken_as_passed(decision: ProbeDecision) -> bool:
    """What the search takes the probe for: its decision, or its point estimate when still undecided."""
    return decision.outcome == ProbeOutcome.PASS or (decision.outcome == ProbeOutcome.UNDECIDED and decision.point)


def limiting_check(decision: ProbeDecision) -> ProbeCheck | None:
    """The check furthest beyond its allowance (the largest measured fraction / allowance; a class with nothing
    successful first), the one that limits the load; None without a check."""
    if not decision.checks:
        return None

    def beyond(c: ProbeCheck) -> float:
        if c.n == 0:
            return math.inf if c.outcome == ProbeOutcome.FAIL else -math.inf
        if c.allowed <= 0:
            return math.inf if c.exceeded else 0.0
        return c.exceeded / c.n / c.allowed

    return max(decision.checks, key=beyond)
