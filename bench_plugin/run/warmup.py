"""Warm-up: unmeasured requests of every request shape, after readiness and before the first measured stage.

Readiness proves a server answers one small request; it does not make the request set fast. A
server's first request of a new shape pays once for what later ones reuse (allocations, kernel
selection, graph capture, caches), so without a warm-up the lowest stage pays it and P95 can even
fall as load rises. Each segment therefore sends, per class and at a small concurrency, one request
of every distinct shape of its request set (``requests: shapes``) or every item (``all``), repeated
until ``duration_s`` has passed where that is set. Nothing of it becomes a sample: it is recorded on
the segment (when it ran, how many requests, how many failed) and drawn on the timeline.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

import gevent
import requests
from gevent.pool import Pool

from bench_plugin.loadgen.state import ClassLoad
from bench_plugin.results.store import ClassWarmup
from bench_plugin.scenario.request_sets import RequestItem
from bench_plugin.users.base import Prepared
from bench_plugin.users.body import PAUSE_BYTES

logger = logging.getLogger(__name__)

JOIN_GRACE_S = 3.0
"""How long past the warm-up's deadline its requests may take to end before they are killed."""

class WarmupTimeout(Exception):
    """A warm-up request without its whole reply in time (not an OSError, which requests would rename)."""


Builder = Callable[[ClassLoad, dict[str, Any]], Prepared]
"""Builds the request for one item of a class's request set (the class's user ``prepare``)."""


def shape_of(workload: str, item: Mapping[str, Any]) -> tuple[Any, ...]:
    """What makes two requests of a class cost the server differently: the sizes it is shaped by."""
    if workload == "llm":
        return (item.get("input_tokens"), item.get("output_tokens"))
    if workload == "embedding":
        return (len(item.get("input") or ()), item.get("input_tokens"))
    if workload == "asr":
        return (round(float(item.get("audio_seconds") or 0.0), 1),)
    return (repr(sorted(item.items())),)


def warmup_items(workload: str, items: list[RequestItem], mode: str) -> list[int]:
    """Indices of the items to send once each: the first item of every distinct shape, or all of them."""
    if mode == "none":
        return []
    if mode == "all":
        return list(range(len(items)))
    seen: dict[tuple[Any, ...], int] = {}
    for index, item in enumerate(items):
        seen.setdefault(shape_of(workload, item), index)
    return sorted(seen.values())


def send(prepared: Prepared, timeout_s: float) -> None:
    """POST one warm-up request and read its whole reply (a stream to its end) within ``timeout_s`` in all;
    raise on a failure.

    ``requests``' own timeout bounds each read, not the whole: a stream that never ends would never time
    out. The event loop turns every PAUSE_BYTES received (users/body.py says why)."""
    with gevent.Timeout(timeout_s, WarmupTimeout(f"no whole reply within {timeout_s:g} s")), \
            requests.post(prepared.url, data=prepared.body, headers=prepared.headers, stream=True,
                          timeout=timeout_s) as reply:
        received = 0
        for chunk in reply.iter_content(chunk_size=65536):
            received += len(chunk)
            if received >= PAUSE_BYTES:
                received = 0
                gevent.idle()
        if reply.status_code >= 400:
            raise RuntimeError(f"HTTP {reply.status_code}")


def warm_class(workload: str, load: ClassLoad, items: list[RequestItem], build: Builder, *, mode: str,
               duration_s: float, concurrency: int, deadline_s: float) -> ClassWarmup:
    """Send one class's warm-up: its chosen items at ``concurrency``, again until ``duration_s`` has passed."""
    chosen = warmup_items(workload, items, mode)
    started = time.time()
    counts = {"requests": 0, "errors": 0}
    first_error: list[str] = []

    def failed(why: str) -> None:
        counts["errors"] += 1
        if not first_error:
            first_error.append(why)

    def one(index: int) -> None:
        counts["requests"] += 1
        try:
            send(build(load, items[index]), timeout_s=max(1.0, min(load.timeout_s, deadline_s - time.time())))
        except Exception as exc:  # a failed warm-up request is recorded, never fatal here (the conductor judges)
            failed(f"{type(exc).__name__}: {str(exc)[:200]}")

    pool = Pool(concurrency)
    rounds = 0
    while chosen and time.time() < deadline_s and (rounds == 0 or time.time() - started < duration_s):
        for index in chosen:
            if time.time() >= deadline_s:
                break
            pool.spawn(one, index)
        # each request ends by the deadline (send's own bound, at least 1 s); this bound only backs it up
        if not pool.join(timeout=max(0.0, deadline_s - time.time()) + JOIN_GRACE_S):
            for _ in range(len(pool)):
                failed("no reply by the end of the warm-up's timeout")
            pool.kill(block=True, timeout=5)
            break
        rounds += 1
    return ClassWarmup(started, time.time(), counts["requests"], counts["errors"],
                       first_error[0] if first_error else None)


def warm_up(loads: Mapping[str, ClassLoad], items: Mapping[str, list[RequestItem]],
            builders: Mapping[str, Builder], *, mode: str, duration_s: float, concurrency: int,
            timeout_s: float) -> dict[str, ClassWarmup]:
    """Warm every class of a segment at once (as they will be loaded); class -> what it sent."""
    if mode == "none":
        return {}
    deadline = time.time() + timeout_s
    jobs = {name: gevent.spawn(warm_class, name, load, items[name], builders[name], mode=mode,
                               duration_s=duration_s, concurrency=concurrency, deadline_s=deadline)
            for name, load in loads.items() if name in builders}
    try:
        ended = gevent.joinall(list(jobs.values()), timeout=timeout_s + 2 * JOIN_GRACE_S + 5)
    finally:  # stopped (Ctrl-C) while warming: no warm-up request may outlive it
        gevent.killall(list(jobs.values()), block=True, timeout=5)
    out = {}
    for name, job in jobs.items():
        if job.successful():
            out[name] = job.value
        else:
            now = time.time()
            why = job.exception if job in ended else "it did not end within its timeout"
            out[name] = ClassWarmup(now, now, 0, 0, f"warm-up did not run: {why}")
        if out[name].errors:
            logger.warning("warm-up of %s: %d of %d requests failed (%s)", name, out[name].errors,
                           out[name].requests, out[name].error)
    return out
