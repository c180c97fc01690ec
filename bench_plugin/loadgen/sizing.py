"""Sizing: how many load-generating processes a scenario's highest planned load needs on this host.

An open-loop sender keeps its promise (each request at its intended time) only while its process has
CPU to spare: past about half a core (TARGET_CORES) its event loop starts to send late, and the
lateness reads as latency the servers never caused. The load is planned before anything starts:
every stage's rate per class, or, for an adaptive search, every ray at its ``max_scale`` (the most a
search may ask for). Each class's CPU cost per request (COSTS) turns rates into cores; the stage or
ray with the most is the peak. Closed-loop classes have no planned rate (their users send as fast as
the servers answer): each one loaded in a stage counts as one process's worth, TARGET_CORES.

The host bounds the answer. The local backend's servers take a core each (one server per class), the
master keeps one for itself (it applies the arms, merges the samples and keeps the store), and
splitting the load over fewer than two cores only adds the master's messages to the same cores:

    peak   = max over stages (or rays at max_scale) of  sum over classes of  rate x cost per request
                                                        (+ TARGET_CORES per loaded closed-loop class)
    left   = cores this process may run on - one per local server - 1 (the master)
    result = 1 (the local runner)                       if left < 2
             max(MIN_APART, min(ceil(peak / TARGET_CORES), left, MAX_PROCESSES))  otherwise

Where the host has the cores, the master never sends, however light the load: in the local runner
the master's own work shares the senders' event loop, and some of it cannot be made to yield. Its
telemetry reads /proc for the servers' process trees in a thread, and a thread running Python holds
the GIL for up to Python's switch interval (5 ms) each time the loop gives it up at a socket call: on
the 16-core GPU host, the local runner sending 400 embedding req/s at 0.3 cores was held 5 times in
5 s, up to 27 ms (in `psutil`'s core count, and in socket calls that take microseconds unless they wait
for the GIL), and the stage read as generator-limited (send lag P99 11 ms). Workers run none of it.

Pure: the caller reads the cores (``os.sched_getaffinity``) and the backend; nothing here does I/O.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from bench_plugin.scenario import ASRClass, EmbeddingClass, LLMClass, Scenario

TARGET_CORES = 0.5
"""The CPU one load-generating process may use and still send on time (cores): the share the sizing plans for."""
MASTER_CORES = 1
"""Cores kept for the master: it sends nothing, but applies the arms, merges the workers' samples and writes them."""
MAX_PROCESSES = 32
"""The most load-generating processes the sizing asks for: past this the master's merging becomes the bottleneck."""
MIN_APART = 2
"""The fewest workers a master apart from its senders runs (Locust's ``--processes 1`` is our local runner)."""


@dataclass(frozen=True)
class RequestCost:
    """CPU milliseconds one load-generating process spends on one request: a base, plus a part per unit."""

    base_ms: float
    per_unit_ms: float = 0.0
    """Per output token (llm), per input vector (embedding); nothing for asr."""

    def ms(self, units: float) -> float:
        """The cost of a request of ``units`` units."""
        return self.base_ms + self.per_unit_ms * units


COSTS: Mapping[str, RequestCost] = {
    "llm": RequestCost(base_ms=0.3, per_unit_ms=0.04),
    "embedding:base64": RequestCost(base_ms=0.9, per_unit_ms=0.0),
    "embedding:float": RequestCost(base_ms=0.3, per_unit_ms=0.09),
    "asr": RequestCost(base_ms=1.1),
}
"""Each class's CPU cost per request in a load-generating process, the one place these figures live.

Measured by benchmarks/loadgen_capacity.py (docs/benchmarks.md, "Load generator against bare Locust"),
the plugin's CPU per request in one worker, rounded up to cover both machines it ran on (2026-12-04:
the project's 2-core machine and the 16-core H200 host): embedding base64 0.86 and 0.74 ms, float 1.57
and 1.70 ms for 16 vectors of 1,024, llm 2.75 and 2.17 ms for 64 streamed tokens, asr 1.02 and 0.71 ms.
``llm``: per streamed output token plus a base (the decode of each chunk); ``embedding:<encoding_format>``:
per input vector plus a base (a base64 reply is one string per vector, decoded in C: no cost per vector
worth counting; a float reply is a JSON list of numbers per vector); ``asr``: per request (the clip's
upload).
"""


def request_cost_s(name: str, scenario: Scenario, costs: Mapping[str, RequestCost] = COSTS) -> float:
    """CPU seconds one request of class ``name`` costs a load generator, by the scenario's request shape.

    An embedding request's vectors are its ``batch_size``; an LLM request's tokens its ``output_tokens`` (the
    most it generates: a server that stops early costs less).
    """
    spec = scenario.classes.get(name)
    if isinstance(spec, LLMClass):
        return costs["llm"].ms(spec.requests.output_tokens) / 1000.0
    if isinstance(spec, EmbeddingClass):
        return costs[f"embedding:{spec.encoding_format}"].ms(spec.requests.batch_size) / 1000.0
    if isinstance(spec, ASRClass):
        return costs["asr"].ms(0) / 1000.0
    raise KeyError(name)


def server_cores(scenario: Scenario, backend: str) -> int:
    """Cores the backend's servers need on this host: one per class server the local backend starts; none for
    the manual and kubernetes backends (their servers run elsewhere, or are the user's)."""
    return len(scenario.classes.names()) if backend == "local" else 0


@dataclass(frozen=True)
class PlannedLoad:
    """One stage, or one search ray at its max_scale: what the load generators must send at once."""

    label: str
    """``stage high``, ``ray mix at x64``."""
    rates: dict[str, float]
    """Open-loop class -> req/s (idle classes left out)."""
    users: dict[str, float]
    """Closed-loop class -> users (idle classes left out)."""

    def describe(self) -> str:
        """``stage high (embedding 3,000 req/s, llm 20 req/s)``, closed-loop classes with their users."""
        parts = [f"{name} {_rate(rate)} req/s" for name, rate in self.rates.items()]
        parts += [f"{name} {users:,.0f} users (closed loop)" for name, users in self.users.items()]
        return f"{self.label} ({', '.join(parts) or 'idle'})"


def planned_loads(scenario: Scenario) -> Iterator[PlannedLoad]:
    """Every load the scenario may ask for: its stages, or each search ray scaled to ``max_scale``."""
    if scenario.search is not None:
        scale = scenario.search.max_scale
        for ray, mix in scenario.search.rays().items():
            yield PlannedLoad(f"ray {ray} at x{scale:g}", {n: r * scale for n, r in mix.items() if r > 0}, {})
        return
    closed = {n for n in scenario.classes.names() if scenario.classes.get(n).arrival == "closed"}
    for i, stage in enumerate(scenario.stages):
        loads = {str(n): float(v) for n, v in stage.load.items() if v > 0}
        yield PlannedLoad(f"stage {stage.name or i}", {n: v for n, v in loads.items() if n not in closed},
                          {n: v for n, v in loads.items() if n in closed})


def load_cores(load: PlannedLoad, scenario: Scenario, costs: Mapping[str, RequestCost] = COSTS) -> float:
    """The CPU (cores) sending ``load`` takes: rate x cost per open-loop class, TARGET_CORES per closed-loop one."""
    return (sum(rate * request_cost_s(name, scenario, costs) for name, rate in load.rates.items())
            + TARGET_CORES * len(load.users))


@dataclass(frozen=True)
class Sizing:
    """How many load-generating processes a scenario needs here, with the figures that decided it."""

    processes: int
    """1: the local runner (one process, as without sizing); N > 1: N workers under a master."""
    peak_cores: float
    """The planned CPU of the load generators at the peak (cores)."""
    peak_at: str
    """Where it peaks, with its load: ``stage x4 (embedding 3,000 req/s)``."""
    available_cores: int
    """The cores this process may run on."""
    reserved_cores: int
    """Of those, the cores the local backend's servers need (0 for the manual and kubernetes backends)."""
    why: str
    """One line: the peak, the host's cores, and which bound decided."""


def size(scenario: Scenario, *, cores: int, reserved: int,
         costs: Mapping[str, RequestCost] = COSTS) -> Sizing:
    """The sizing of ``scenario`` on a host whose process may run on ``cores`` cores, ``reserved`` of them for
    the servers (:func:`server_cores`): the module's rule."""
    loads = list(planned_loads(scenario))
    figures = [(load_cores(load, scenario, costs), load) for load in loads]
    peak, at = max(figures, key=lambda pair: pair[0], default=(0.0, PlannedLoad("no stage", {}, {})))
    where = at.describe()
    closed = sorted({name for load in loads for name in load.users})
    counted = (f"; closed-loop {', '.join(closed)} counted as one process's worth each (no planned rate)"
               if closed else "")
    host = f"{cores} cores, {reserved} for the servers, {MASTER_CORES} for the master"
    left = cores - reserved - MASTER_CORES
    head = f"peak {peak:.2f} cores at {where}{counted}"
    wanted = max(1, math.ceil(peak / TARGET_CORES))
    if left < 2:
        if peak <= TARGET_CORES:
            return Sizing(1, peak, where, cores, reserved, f"{head}: one process's {TARGET_CORES:g} core holds it")
        return Sizing(1, peak, where, cores, reserved,
                      f"{head} wants {wanted} processes at {TARGET_CORES:g} core each, but {host} leave "
                      f"{max(left, 0)} for load generators (fewer than 2): one process")
    processes = max(MIN_APART, min(wanted, left, MAX_PROCESSES))
    bound = (f", at least {MIN_APART} so that the master sends nothing" if processes > wanted else
             "" if processes == wanted else
             f", capped by the {left} cores left" if processes == left else f", capped at {MAX_PROCESSES}")
    return Sizing(processes, peak, where, cores, reserved,
                  f"{head}, at {TARGET_CORES:g} core a process{bound}; {host}")


def _rate(rate: float) -> str:
    """A rate as the report writes it: ``3,000``, ``12.5``."""
    return f"{rate:,.0f}" if rate >= 100 else f"{rate:.3g}"
