"""Self-check: did the load generator keep up with a stage, so that its figures describe the servers?

An open-loop generator promises to send each request at its intended time. Two things break that
promise without the servers being at fault: a generator process short of CPU (it sends late, and
the lateness shows up as latency the GPU never caused), and collection pauses or event-loop stalls
(the same, in bursts). Per stage the check reads:

- the send lag of every request: sent - intended - the time it waited for a free ``max_in_flight``
  slot (a full slot pool is the servers' backlog, so that wait is queueing, not generator lag);
- each load-generating process's CPU use while it sent the stage (CPU seconds / wall seconds).

A stage is **generator-limited** when the send lag P99 over its requests exceeds LAG_P99_LIMIT_MS, or
a generator process used more than CPU_LIMIT_CORES of a core (a gevent process runs on one core:
near a full core it cannot be on time). Its verdict then says so rather than blaming the GPU.
"""

from __future__ import annotations

from collections.abc import Mapping

LAG_P99_LIMIT_MS = 10.0
"""Send lag P99 above this (ms) marks a stage generator-limited."""
CPU_LIMIT_CORES = 0.9
"""A load-generating process using more than this share of one core marks the stage generator-limited."""


def generator_limited(lag_p99_ms: Mapping[str, float | None], cores: Mapping[str, float]) -> str | None:
    """Why the load generator fell behind in a stage (one line), or None when it kept up.

    ``lag_p99_ms``: class -> send lag P99 of its requests; ``cores``: process -> cores it used.
    """
    reasons = []
    late = {name: lag for name, lag in lag_p99_ms.items() if lag is not None and lag > LAG_P99_LIMIT_MS}
    if late:
        worst = max(late, key=lambda name: late[name])
        reasons.append(f"send lag P99 {late[worst]:.1f} ms for {worst} (limit {LAG_P99_LIMIT_MS:g} ms)")
    busy = {member: used for member, used in cores.items() if used > CPU_LIMIT_CORES}
    if busy:
        member = max(busy, key=lambda m: busy[m])
        reasons.append(f"load generator {member} used {busy[member]:.2f} cores (limit {CPU_LIMIT_CORES:g})")
    return "; ".join(reasons) or None
