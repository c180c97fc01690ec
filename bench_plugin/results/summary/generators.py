"""summary.json's load-generator figures: each process's use and stalls, the sizing, the self-check."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from bench_plugin.results.server_figures import Sparse
from bench_plugin.results.spread import Model
from bench_plugin.results.words import GeneratorLimit


class GeneratorStalls(Model):
    """What one load-generating process's stall monitor saw while it sent a stage (loadgen/stalls.py)."""

    threshold_ms: float
    """A stretch of the event loop longer than this without polling counted as a block."""
    count: int
    total_ms: float
    max_ms: float
    causes: dict[str, tuple[int, float]] = Field(default_factory=dict)
    """Cause (``module.function (file:line)``) -> (blocks, their ms in all)."""
    blocks: list[tuple[float, float]] = Field(default_factory=list)
    """(start in epoch seconds, length in ms) of the longest blocks (at most 200), in time order."""
    busy_s: float | None = None
    """Seconds the process's event-loop thread was on a CPU or waiting for one (Linux schedstat); None: unknown."""
    collections: int | None = None
    """Garbage collections that ran in the process while it sent the stage (loadgen/collector.py holds them off
    then, so any is its guard's or another thread's); None in stores from before they were counted."""
    collection_max_ms: float | None = None
    """The longest of them (ms; 0.0 when none ran)."""


class GeneratorUse(Model):
    """One load-generating process's CPU while it sent a stage."""

    cpu_s: float
    wall_s: float
    cores: float
    stalls: GeneratorStalls | None = None
    """What its stall monitor saw; None in stores from before the monitor."""

    @property
    def demand(self) -> float | None:
        """Cores its event loop wanted (on a CPU or waiting for one) per wall second; None where unknown."""
        busy = self.stalls.busy_s if self.stalls is not None else None
        return busy / self.wall_s if busy is not None and self.wall_s > 0 else None


class GeneratorProcess(Model):
    """Where one process of the load-generating side ran (a load generator, or the master): what it says of
    itself when it starts (results/provenance.generator_process)."""

    pid: int
    host: str
    cores: str
    """The CPU cores it may run on (``os.sched_getaffinity``), as a cpulist: ``0-15``."""


class GeneratorSizing(Model):
    """How the number of load-generating processes was decided (launch/processes.py; the rule: loadgen/sizing.py)."""

    decided: Literal["auto", "given", "workers"]
    """``auto``: sized to the scenario's planned load on this host; ``given``: ``--processes N``; ``workers``: a
    ``--master`` whose workers were started by hand."""
    processes: int | None = None
    """Load-generating processes asked for (1: the local runner); None for hand-started workers (as many as came)."""
    sized: int | None = None
    """What the sizing rule gives on this host (``processes`` itself when ``auto``); None where it was not sized."""
    why: str | None = None
    """The sizing's reason, one line: the peak, the host's cores, the bound that decided."""
    peak_cores: float | None = None
    """The planned CPU of the load generators at the scenario's peak (cores)."""
    peak_at: str | None = None
    """The stage (or search ray at its max_scale) where the planned load peaks, with its load."""
    available_cores: int | None = None
    """The cores the campaign's process may run on."""
    reserved_cores: int | None = None
    """Of those, the cores taken out for the local backend's servers."""


class LoadGenerators(Model):
    """Who sent the campaign's load: how their number was decided, and where each process ran."""

    sizing: GeneratorSizing | None = None
    """None in campaigns recorded before the sizing, or whose command line was not sized."""
    master: GeneratorProcess | None = None
    """The master's own process (it applies the arms and keeps the results, it sends nothing); None on one process."""
    processes: dict[str, GeneratorProcess] = Field(default_factory=dict)
    """Load generator (``local``, or a worker's id) -> where it ran, for each that took part (not the refused)."""


class GeneratorCheck(Sparse):
    """What the self-check made of a stage's load generator (analysis/selfcheck.py)."""

    SPARSE: ClassVar[frozenset[str]] = frozenset({"processes", "cores"})

    kind: GeneratorLimit | None = None
    """Why the stage is generator-limited, where it is: ``cpu-bound`` (a process short of CPU, or a loop behind
    on its work: more load-generating processes help) or ``stalled`` (an operation held the event loop while
    the CPU was idle: more processes do not). None: judged."""
    cause: str | None = None
    """What held the event loop longest in all, where the stall monitor saw blocks."""
    note: str | None = None
    """``stalls: N blocks (...); Z requests (W%) in flight during one; without them P95 would be ...``, where
    blocks were seen: a stage judged in spite of them shows it too."""
    in_flight: dict[str, int] = Field(default_factory=dict)
    """Class -> its requests held up by the blocks (they overlapped over 5% of its intended send to its end)."""
    p95_without_ms: dict[str, float | None] = Field(default_factory=dict)
    """Class -> its P95 without those requests (the classes that had any)."""
    processes: int | None = None
    """How many load-generating processes sent the stage, where the stall monitor reported (written only where
    set: absent in files written before it)."""
    cores: float | None = None
    """What they needed in all: per process the larger of the cores it used and its loop's demand (a starved loop
    used less than it wanted). With ``processes``, what the advice for a CPU-bound stage sizes ``--processes`` by."""


class HostLoad(Model):
    """The host's own load over a stage, as bench_plugin.telemetry.hostload measures it."""

    duration_s: float
    cores: int | None
    load_avg_1m: float | None
    cpu_busy_cores: float | None
    steal_fraction: float | None
    own_cores: float | None
    extra_own_cores: float
    others_cores: float | None
    busy: bool
    reason: str | None
