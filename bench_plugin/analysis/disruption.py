"""The interruption a disruption caused, as the requests saw it: failures, the latency spike, the time to recover.

From one stage's samples and its ``disruption`` events (the store's readers, no SQL here), per class:

- failed requests: those intended from the disruption's start to the stage's end that failed, with those in
  flight at its start that failed after it (a kill loses what its server had in hand), and their share;
- latency spike: the highest P95 of successful requests over 1 s windows (stepped 0.5 s) from the start on,
  against the P95 of the successful requests intended before it;
- time to recover: RECOVERY_RULE;
- for the LLM class, the same spike of its TTFT;
- on the local backend, from the recorded steps (sharing/restart.py): for the class whose server was
  replaced, how long no server took its connections (``refuse`` or ``kill`` to ``route``), its new server's
  cold start (``spawn`` to ``ready``) and the old one's drain (``stopped``'s ``after_s``); for each other
  class, whether it came through (its ``co-tenant`` step).

Each class's requests are also counted second by second (sent, succeeded, failed, P95), before, during and
after, on the disruption's clock (:func:`second_series`). Requests are placed in time by their intended send
time, as every latency is measured from it. Over an
arm's repeats (:func:`disruption_figures`), each figure is a Spread (mean and 95% interval).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from bench_plugin.analysis.statistics import spread
from bench_plugin.results.samples import Sample
from bench_plugin.results.summary import (
    ClassDisruptionFigures,
    ClassInterruption,
    DisruptionFigures,
    DisruptionStep,
    SecondFigures,
    StageDisruption,
    StageSummary,
)
from bench_plugin.results.timeline import Disruption

WINDOW_S = 1.0
STEP_S = 0.5
SLOW_FACTOR = 1.5
STABLE_S = 2.0

RECOVERY_RULE = (f"recovered once every {WINDOW_S:g} s window (stepped {STEP_S:g} s) has no failed request and a P95 "
                 f"within {SLOW_FACTOR:g}x the pre-disruption P95, for {STABLE_S:g} s up to the stage's end: the "
                 "time from the disruption to the first window after the last bad one (0 when none was bad); a "
                 "request's latency here leaves out how late the load generator itself sent it, which is not the "
                 "disruption's doing")


def _p95(values: Sequence[float]) -> float | None:
    return float(np.percentile(np.asarray(values, dtype=float), 95)) if values else None


def _peak(after: Sequence[Sample], start_s: float, end_s: float,
          value: Callable[[Sample], float | None]) -> float | None:
    """The highest P95 of ``value`` of the successful requests over WINDOW_S windows, STEP_S apart, from ``start_s``."""
    peak: float | None = None
    t = start_s
    while t < end_s:
        window = _p95([v for s in after if s.ok and t <= s.intended_s < t + WINDOW_S
                       and (v := value(s)) is not None])
        if window is not None and (peak is None or window > peak):
            peak = window
        t += STEP_S
    return peak


def _served_ms(s: Sample) -> float:
    """A request's latency less the load generator's own lateness in sending it (its wait for a free slot, the
    servers' backlog, stays in)."""
    return s.latency_ms - max(0.0, s.send_lag_ms)


def _recovered(after: Sequence[Sample], start_s: float, end_s: float, limit: float | None) -> float | None:
    """RECOVERY_RULE over ``after`` (by intended send time; one in flight at the start counts in the first window):
    the seconds from ``start_s`` to the first window after the last bad one, None where the stage ends within
    STABLE_S of it. A window's P95, not each request, is held to the limit: one slow request on a busy host (a
    server descheduled for 15 ms) is the tail every stage has, not a server still recovering."""
    last_bad: float | None = None
    t = start_s
    while t < end_s:
        mine = [s for s in after if t <= max(s.intended_s, start_s) < t + WINDOW_S]
        served = _p95([_served_ms(s) for s in mine if s.ok])
        if any(not s.ok for s in mine) or (limit is not None and served is not None and served > limit):
            last_bad = t
        t += STEP_S
    if last_bad is None:
        return 0.0
    good = last_bad + STEP_S
    return good - start_s if end_s - good >= STABLE_S else None


def _minus(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


def class_interruption(samples: Sequence[Sample], start_s: float, end_s: float) -> ClassInterruption:
    """One class's figures for a disruption beginning at ``start_s`` in a stage ending at ``end_s``."""
    before = [s.latency_ms for s in samples if s.ok and s.intended_s < start_s]
    after = sorted((s for s in samples if s.intended_s >= start_s or (not s.ok and s.end_s >= start_s)),
                   key=lambda s: s.intended_s)  # a request in flight at the start that then failed is its doing
    failed = sum(1 for s in after if not s.ok)
    p95_before = _p95(before)
    peak = _peak(after, start_s, end_s, lambda s: s.latency_ms)
    served_before = _p95([_served_ms(s) for s in samples if s.ok and s.intended_s < start_s])
    limit = SLOW_FACTOR * served_before if served_before is not None else None

    recovered = _recovered(after, start_s, end_s, limit)
    out = ClassInterruption(
        requests=len(after), failed=failed, failed_share=failed / len(after) if after else None,
        p95_before_ms=p95_before, peak_p95_ms=peak,
        spike=peak / p95_before if peak is not None and p95_before else None, recovered_s=recovered,
        added_p95_ms=_minus(peak, p95_before))
    ttft_before = [v for s in samples if s.ok and s.intended_s < start_s and (v := s.ttft_ms) is not None]
    if ttft_before:
        out.ttft_p95_before_ms = _p95(ttft_before)
        out.ttft_peak_p95_ms = _peak(after, start_s, end_s, lambda s: s.ttft_ms)
        out.added_ttft_p95_ms = _minus(out.ttft_peak_p95_ms, out.ttft_p95_before_ms)
    return out


def _first(steps: Sequence[DisruptionStep], *actions: str) -> DisruptionStep | None:
    return next((a for a in steps if a.action in actions), None)


def _server_steps(steps: Sequence[DisruptionStep], interruption: ClassInterruption) -> None:
    """Fill in what one class's recorded steps say (local backend): its replacement, or how it came through."""
    survivor = _first(steps, "co-tenant")
    if survivor is not None:
        interruption.survived = bool((survivor.model_extra or {}).get("survived"))
    spawn, ready, route = _first(steps, "spawn"), _first(steps, "ready"), _first(steps, "route")
    if spawn is None:
        return
    down = _first(steps, "refuse", "kill")
    if route is not None and route.t is not None:
        interruption.unavailable_s = 0.0 if down is None else _minus(route.t, down.t)
    if ready is not None:
        interruption.cold_start_s = _minus(ready.t, spawn.t)
    stopped = _first(steps, "stopped")
    if stopped is not None:
        interruption.stopped_after_s = (stopped.model_extra or {}).get("after_s")


def second_series(samples: Sequence[Sample], start_s: float, end_s: float) -> list[SecondFigures]:
    """A class's requests per whole second from its first request to ``end_s``, seconds counted from ``start_s``
    (the disruption's start: the seconds before it are negative)."""
    if not samples:
        return []
    first = min(s.intended_s for s in samples)
    lo = math.floor(first - start_s)
    seconds: dict[int, list[Sample]] = {k: [] for k in range(lo, max(lo + 1, math.ceil(end_s - start_s)))}
    for s in samples:
        k = math.floor(s.intended_s - start_s)
        if k in seconds:
            seconds[k].append(s)
    out = []
    for k, mine in seconds.items():
        ok = [s.latency_ms for s in mine if s.ok]
        out.append(SecondFigures(t=float(k), sent=len(mine), ok=len(ok), failed=len(mine) - len(ok), p95_ms=_p95(ok)))
    return out


def stage_disruption(events: Sequence[Disruption], samples: Mapping[str, Sequence[Sample]],
                     end_s: float) -> StageDisruption | None:
    """The stage's disruption from its steps (in time order) and its samples per class; None without steps."""
    if not events:
        return None
    start = next((e for e in events if e.action == "start" and e.t is not None), None)
    first = events[0]
    out = StageDisruption(kind=first.disruption, at_s=first.at_s, started_s=start.t if start else None,
                          actions=[e.step() for e in events], rule=RECOVERY_RULE)
    if start is not None:
        out.classes = {name: class_interruption(mine, out.started_s or 0.0, end_s) for name, mine in samples.items()}
        for name, interruption in out.classes.items():
            _server_steps([a for a in out.actions if a.target == f"class/{name}"], interruption)
        out.series = {name: second_series(mine, out.started_s or 0.0, end_s) for name, mine in samples.items()}
    return out


def disruption_figures(stages: Sequence[StageSummary]) -> DisruptionFigures | None:
    """One arm's disrupted stage over its repeats (the same stage of each trial); None where none was disrupted."""
    found = [s.disruption for s in stages if s.disruption is not None and s.disruption.started_s is not None]
    if not found:
        return None
    names = list(dict.fromkeys(name for d in found for name in d.classes))
    classes: dict[str, ClassDisruptionFigures] = {}
    for name in names:
        runs = [d.classes[name] for d in found if name in d.classes]
        checked = [c.survived for c in runs if c.survived is not None]
        fig = ClassDisruptionFigures(
            failed=spread([float(c.failed) for c in runs]), failed_share=spread([c.failed_share for c in runs]),
            added_p95_ms=spread([c.added_p95_ms for c in runs]), recovered_s=spread([c.recovered_s for c in runs]),
            unrecovered=sum(1 for c in runs if c.recovered_s is None),
            survived=sum(checked) if checked else None, checked=len(checked) if checked else None)
        if any(c.added_ttft_p95_ms is not None for c in runs):
            fig.added_ttft_p95_ms = spread([c.added_ttft_p95_ms for c in runs])
        if any(c.unavailable_s is not None for c in runs):
            fig.unavailable_s = spread([c.unavailable_s for c in runs])
        if any(c.cold_start_s is not None for c in runs):
            fig.cold_start_s = spread([c.cold_start_s for c in runs])
        classes[name] = fig
    return DisruptionFigures(kind=found[0].kind, repeats=len(found), classes=classes)
