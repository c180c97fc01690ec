"""The interruption a disruption caused, as the requests saw it: failures, the latency spike, the time to recover.

From one stage's samples and its ``disruption`` events (the store's readers, no SQL here), per class:

- failed requests: those intended from the disruption's start to the stage's end that failed, and their share;
- latency spike: the highest P95 of successful requests over 1 s windows (stepped 0.5 s) from the start on,
  against the P95 of the successful requests intended before it;
- time to recover: RECOVERY_RULE.

Requests are placed in time by their intended send time, as every latency is measured from it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from bench_plugin.results.samples import Sample
from bench_plugin.results.summary import ClassInterruption, StageDisruption
from bench_plugin.results.timeline import Disruption

WINDOW_S = 1.0
STEP_S = 0.5
SLOW_FACTOR = 1.5
STABLE_S = 2.0

RECOVERY_RULE = (f"recovered once every request succeeds within {SLOW_FACTOR:g}x the pre-disruption P95 for "
                 f"{STABLE_S:g} s up to the stage's end: the time from the disruption to the first request after "
                 "the last failed or slow one (0 when none failed or was slow)")


def _p95(values: Sequence[float]) -> float | None:
    return float(np.percentile(np.asarray(values, dtype=float), 95)) if values else None


def class_interruption(samples: Sequence[Sample], start_s: float, end_s: float) -> ClassInterruption:
    """One class's figures for a disruption beginning at ``start_s`` in a stage ending at ``end_s``."""
    before = [s.latency_ms for s in samples if s.ok and s.intended_s < start_s]
    after = sorted((s for s in samples if s.intended_s >= start_s), key=lambda s: s.intended_s)
    failed = sum(1 for s in after if not s.ok)
    p95_before = _p95(before)
    peak: float | None = None
    t = start_s
    while t < end_s:
        window = _p95([s.latency_ms for s in after if s.ok and t <= s.intended_s < t + WINDOW_S])
        if window is not None and (peak is None or window > peak):
            peak = window
        t += STEP_S
    limit = SLOW_FACTOR * p95_before if p95_before is not None else None

    def bad(s: Sample) -> bool:
        return not s.ok or (limit is not None and s.latency_ms > limit)

    last_bad = max((i for i, s in enumerate(after) if bad(s)), default=None)
    recovered: float | None
    if last_bad is None:
        recovered = 0.0
    elif last_bad + 1 < len(after) and end_s - after[last_bad + 1].intended_s >= STABLE_S:
        recovered = after[last_bad + 1].intended_s - start_s
    else:
        recovered = None
    return ClassInterruption(
        requests=len(after), failed=failed, failed_share=failed / len(after) if after else None,
        p95_before_ms=p95_before, peak_p95_ms=peak,
        spike=peak / p95_before if peak is not None and p95_before else None, recovered_s=recovered)


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
    return out
