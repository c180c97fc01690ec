"""A simulated shared device: one first-come-first-served queue that the synthetic servers of several classes share.

The contention simulator for learning the tool and testing its searches without a GPU. Each synthetic
server started with ``--device PATH`` sends every request through the device named by PATH before its
own latency model runs: the request waits for the device to be free, holds it for a service time drawn
from an exponential distribution of mean ``--service-ms``, and only then gets its TTFT or latency.
Servers of one device (one PATH) share its queue across processes: the device is one number in that
file, the time it next falls free, read and moved under an exclusive lock. A request that arrives at
``now`` is served from ``start = max(now, free)`` to ``end = start + S`` and the file then says ``end``:
that is exactly a single-server FCFS queue, with no process polling or waiting on another.

With Poisson arrivals (the load generator's default) at a total rate λ over the classes on the device
and one mean service time 1/μ for all of them, the device is an M/M/1 FCFS queue: a request's time in
it (wait plus service) is exponential with rate μ - λ whatever its class, so its P95 is
ln(20) / (μ - λ) (:func:`sojourn_p95_s`). A class whose own latency model adds ``L`` (its latency or
TTFT) then has P95 ``L + ln(20) / (μ - λ)``, and keeps an SLO ``p95_ms`` exactly while the total rate is
at most ``μ - ln(20) / (p95_ms - L)`` (:func:`max_total_rate`): the true operating envelope is known.
An exclusive arm runs each class alone, so each class's boundary is its own; a shared arm's boundary
along a load mix is where its strictest class reaches its limit (:func:`boundary_scale`).
"""

from __future__ import annotations

import fcntl
import math
import os
import random
import struct
import time
from collections.abc import Callable, Mapping
from pathlib import Path

P95_FACTOR = math.log(20.0)
"""-ln(1 - 0.95): an exponential distribution's 95th percentile in units of its mean."""

_FREE = struct.Struct("<d")
"""The device file's content: the epoch time the device next falls free."""


class SimulatedDevice:
    """The FCFS queue of one simulated device, shared through ``path`` by every process that opens it."""

    def __init__(self, path: Path, service_s: float, seed: int = 0,
                 clock: Callable[[], float] = time.time) -> None:
        if service_s <= 0:
            raise ValueError(f"service time {service_s} s: give a positive one")
        self.path = path
        self.service_s = service_s
        self._rng = random.Random(seed)  # the servers of one device are given distinct seeds (scenarios/simulator)
        self._clock = clock
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)

    def admit(self, now: float | None = None) -> tuple[float, float]:
        """Queue one request arriving at ``now`` (default: the clock); returns when its service starts and ends."""
        return self._take(self._rng.expovariate(1.0 / self.service_s), now)

    def hold(self, seconds: float, now: float | None = None) -> tuple[float, float]:
        """Take the device for exactly ``seconds`` from when it next falls free (a server's cold start loading onto it:
        every request queued after this one waits for it to end); when the hold starts and ends."""
        return self._take(seconds, now)

    def _take(self, service: float, now: float | None) -> tuple[float, float]:
        """One turn of ``service`` seconds for what arrives at ``now``: from when the device falls free."""
        arrived = self._clock() if now is None else now
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        try:
            data = os.pread(self._fd, _FREE.size, 0)
            free = _FREE.unpack(data)[0] if len(data) == _FREE.size else 0.0
            start = max(arrived, free)
            end = start + service
            os.pwrite(self._fd, _FREE.pack(end), 0)
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        return start, end

    def close(self) -> None:
        """Close this process's handle (the file stays for the other processes of the device)."""
        os.close(self._fd)


def service_ms_for(spec: str, key: str | None) -> float:
    """The mean service time (ms) that ``--service-ms`` gives for ``--service-key`` (the arm, say): ``10`` for every
    key, or ``time-slicing=14,light=8,10`` (a bare number: every other key). ValueError (one line) for a malformed
    spec or a key it has no time for."""
    default: float | None = None
    per_key: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        name, _, value = part.rpartition("=")
        try:
            ms = float(value)
        except ValueError:
            raise ValueError(f"--service-ms {spec}: {value!r} is not a number of milliseconds") from None
        if not (math.isfinite(ms) and ms > 0):
            raise ValueError(f"--service-ms {spec}: {value} is not a positive number of milliseconds")
        if name:
            per_key[name.strip()] = ms
        else:
            default = ms
    found = per_key.get(key or "", default)
    if found is None:
        raise ValueError(f"--service-ms {spec}: no service time for {key!r} (add a bare default)")
    return found


def sojourn_p95_s(service_s: float, total_rate: float) -> float:
    """The P95 of a request's time on an M/M/1 FCFS device (wait plus service): ln(20) / (μ - λ); infinite at or
    past saturation."""
    mu = 1.0 / service_s
    return P95_FACTOR / (mu - total_rate) if total_rate < mu else math.inf


def max_total_rate(service_s: float, p95_ms: float, own_ms: float) -> float:
    """The highest total rate on the device at which a class with latency model ``own_ms`` keeps P95 ``p95_ms``
    (0 when even an idle device cannot)."""
    room_s = (p95_ms - own_ms) / 1000.0
    if room_s <= 0:
        return 0.0
    return max(0.0, 1.0 / service_s - P95_FACTOR / room_s)


def boundary_scale(mix: Mapping[str, float], service_s: float, limits: Mapping[str, tuple[float, float]]) -> float:
    """Along the load ``mix`` (class -> req/s at scale 1) on one shared device, the scale at which the first class
    reaches its SLO: ``limits`` maps class -> (P95 SLO ms, its own latency ms)."""
    per_scale = sum(mix.values())
    if per_scale <= 0:
        raise ValueError("the mix sends nothing")
    return min(max_total_rate(service_s, *limits[name]) for name in mix if mix[name] > 0) / per_scale


def arm_boundary_scale(mix: Mapping[str, float], service_s: float, limits: Mapping[str, tuple[float, float]], *,
                       alone: bool) -> float:
    """The true boundary scale of an arm along ``mix``: every class on one device (``alone`` False: time-slicing
    on the simulator), or each class on a device of its own (``alone``: the exclusive control), where the ray
    ends at the first class's own boundary."""
    if alone:
        return min(boundary_scale({name: rate}, service_s, limits) for name, rate in mix.items() if rate > 0)
    return boundary_scale(mix, service_s, limits)
