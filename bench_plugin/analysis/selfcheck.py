"""Self-check: did the load generator keep up with a stage, so that its figures describe the servers?

An open-loop generator promises to send each request at its intended time. Two different things break
that promise without the servers being at fault, and they need different fixes:

- **CPU-bound**: a generator process short of CPU sends late, and the lateness shows up as latency the
  GPU never caused. More load-generating processes (or less load per process) fix it.
- **stalled**: one operation holds a process's event loop (a C call that does not yield to gevent: an
  NVML poll, a blocking read), and every request due meanwhile leaves late, in bursts, while the CPU is
  idle. More processes do not help; moving that operation off the loop does.
- **held back**: a process with little to do, neither short of CPU nor blocked, sends late on a host that
  was busy with other work (other processes, or the hypervisor taking its CPU): its requests were due while
  it was not let run. More processes do not help either; a quieter host does.

Per stage the check reads the send lag of every request (sent - intended - the time it waited for a free
``max_in_flight`` slot: a full slot pool is the servers' backlog, so that wait is queueing, not generator
lag), and per load-generating process what it reported with the stage's usage: its CPU (cores: CPU
seconds / wall seconds), how much CPU its loop's thread wanted (``demand``: time on a CPU plus time
waiting for one, per wall second; on a busy host a starved loop gets little CPU but still wants a
whole core), and the blocks its stall monitor saw (loadgen/stalls.py: stretches of at least 5 ms in
which the loop ran nothing else, each with the code that held it).

The rule, in order:

1. some process used more than CPU_LIMIT_CORES of a core, or its loop wanted more than that
   (demand), of the CPU time the hypervisor left the host over the stage (both divided by 1 - the
   host's steal share: steal is neither CPU time nor a wait the guest sees, so a loop that wanted its
   whole core, with 10% of the time stolen, used and wanted at most 0.9 of one): **CPU-bound**, generator-limited;
2. else, when the send lag P99 of some class exceeds LAG_P99_LIMIT_MS: if no block was seen (but the
   monitor ran), or fewer than half of the requests sent more than LAG_P99_LIMIT_MS late were in flight
   during a block (a request is in flight during a block when its intended send time to its end overlaps
   the block, on the process that sent it), the loop was behind on its work (a backlog), not stopped:
   **CPU-bound**, generator-limited; but where every process used (and its loop wanted) at most the
   sizing's TARGET_CORES and the host was busy over the stage (telemetry.hostload's rule), no backlog was
   there to make: **held back**, generator-limited. Otherwise the stalls made the lag: **stalled**, and the
   stage is still judged when the stalls touched little: the requests held up by a block are at most
   AFFECTED_LIMIT (5%) of each class's requests AND every class's SLO outcome (each of its criteria,
   objectives.class_criteria: P95, llm TTFT/TPOT P95, error rate, against its limit) is the same with
   and without them. Then the stage keeps its verdict and carries the note; else it is
   generator-limited (stalled), naming the cause. (Half, not all: one request held up by a busy host
   outside any block does not turn a stalled loop into a CPU-bound one.) A stalled stage whose servers
   failed an SLO by themselves keeps its verdict too: without the requests held up, some class's P95
   (or TTFT P95) is over its limit by more than all the blocks together, the most that a burst of
   the arrivals they held back could add to a later request's wait. A block only adds latency, so
   such a stage fails however the loop ran. A request is held up by the
   blocks when they overlap more than HELD_SHARE (5%) of its life, from its intended send to its end: a
   loop held 20 ms can delay a request by about that much, which is a third of a 60-ms request and
   nothing that moves a 3-s one. At a server's saturation every request waits seconds in its queue,
   so nearly all of them are in flight during any block; counting those as touched would call every
   overloaded stage generator-limited, and the search would stop there with no boundary.
3. a stage without monitor figures (a store from before the monitor) is judged by rule 1's cores and
   the lag alone, as before, and called CPU-bound.

Wherever the monitor saw blocks, the stage gets the note "stalls: N blocks (X ms in all, longest Y ms,
in <cause>); Z requests (W%) in flight during one; without them P95 would be ..." (GeneratorCheck.note),
a judged stage too: the stalls' share of the latency is shown either way. A CPU-bound reason ends with
what the stage's processes used in all ("2 processes, 1.30 cores in all": per process the larger of its
cores and its loop's demand, since a starved loop used less than it needed); the check keeps both figures
(GeneratorCheck.processes and .cores). :func:`advice` words the fix from the checks, never from the
reasons' words, by the kind, for the verdict: for CPU-bound, ``--processes N`` with N = ceil(cores in all /
the sizing's TARGET_CORES), and at least one more than ran (the worst stage named decides); for stalled, the
operation to move off the loop; for held back, a quieter host. docs/analysis.md ("The instrument checks itself")
has the rule with its figures.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from bench_plugin.analysis.objectives import ClassObjectives, class_criteria
from bench_plugin.loadgen.sizing import TARGET_CORES
from bench_plugin.results.samples import Sample
from bench_plugin.results.summary import ClassStats, GeneratorCheck, GeneratorUse, HostLoad
from bench_plugin.results.words import GeneratorLimit

LAG_P99_LIMIT_MS = 10.0
"""Send lag P99 above this (ms) marks a stage generator-limited (unless the stalls rule judges it)."""
CPU_LIMIT_CORES = 0.9
"""A load-generating process using (or its loop wanting) more than this share of one core is CPU-bound."""
AFFECTED_LIMIT = 0.05
"""A stalled stage is still judged when at most this share of each class's requests was held up by a block."""
HELD_SHARE = 0.05
"""A request is held up by the blocks when they overlap more than this share of its life (intended send to end)."""

CPU_BOUND = "CPU-bound"
"""A CPU-bound stage's reason starts so (GeneratorLimit.CPU_BOUND, capitalised as prose); a stalled or held-back
one's with GeneratorLimit.STALLED or HELD_BACK."""

CPU_ADVICE = ("rerun with more load-generating processes (--processes N, or --master with workers on other hosts) "
              "or a lighter load per process")
"""The fix for a CPU-bound stage whose reason does not say what its processes used (a summary from before)."""


def cpu_advice(processes: int) -> str:
    """The fix for a CPU-bound stage whose processes' CPU in all asks for ``processes`` processes."""
    return (f"rerun with --processes {processes} (the measured CPU at {TARGET_CORES:g} core a process), or with "
            "--master and workers on other hosts, or with a lighter load per process")


def processes_needed(checks: Iterable[GeneratorCheck]) -> int | None:
    """The ``--processes`` that CPU-bound stages' ``checks`` ask for: per stage, its cores in all over TARGET_CORES and
    at least one more process than it ran on; the most over them (None: no check says what its processes used)."""
    needed = [max(math.ceil(c.cores / TARGET_CORES), c.processes + 1)
              for c in checks if c.cores is not None and c.processes is not None]
    return max(needed, default=None)


def needed(cores: Mapping[str, float], demand: Mapping[str, float]) -> tuple[int, float]:
    """(processes, cores in all) a stage's processes needed: per process the cores it used, or its loop's demand
    where larger (a starved loop used less than it wanted)."""
    return len(cores), sum(max(used, demand.get(member, 0.0)) for member, used in cores.items())


def in_all(processes: int, cores: float) -> str:
    """``2 processes, 1.30 cores in all``: what a stage's processes needed (:func:`needed`)."""
    return f"{processes} process{'es' if processes != 1 else ''}, {cores:.2f} cores in all"


def stalled_advice(causes: Sequence[str]) -> str:
    """What to do about a stalled loop: the operation(s) that held it, and that more processes will not help."""
    what = " and ".join(f"`{cause}`" for cause in causes) or "one operation"
    return (f"the event loop was held by {what}: not a CPU shortage, more workers will not help; make that "
            "operation yield to gevent or move it into an OS thread, then rerun")


HELD_BACK_ADVICE = ("the host held the load generator back (other work, or the hypervisor, took the CPU when its "
                    "requests were due): not a shortage of load-generating processes, more will not help; rerun on "
                    "a quieter host, or keep other work off it")
"""The fix for a held-back stage."""


def advice(checks: Iterable[GeneratorCheck]) -> str:
    """The fix for generator-limited stages, by the kinds their ``checks`` found (CPU-bound where none is known)."""
    cpu, stalled, held, causes, bound = False, False, False, [], []
    for check in checks:
        if check.kind == GeneratorLimit.STALLED:
            stalled = True
            if check.cause is not None and check.cause not in causes:
                causes.append(check.cause)
        elif check.kind == GeneratorLimit.HELD_BACK:
            held = True
        else:
            cpu = True
            bound.append(check)
    needed = processes_needed(bound)
    parts = [CPU_ADVICE if needed is None else cpu_advice(needed)] if cpu else []
    if stalled or not (cpu or held):
        parts.append(stalled_advice(causes[:2]))
    if held:
        parts.append(HELD_BACK_ADVICE)
    return "; ".join(parts)


def generator_limited(lag_p99_ms: Mapping[str, float | None], cores: Mapping[str, float]) -> str | None:
    """Why the load generator fell behind in a stage by the lag and the cores alone (one line), or None.

    ``lag_p99_ms``: class -> send lag P99 of its requests; ``cores``: process -> cores it used. The
    rule without the stall monitor's figures (rule 3 of the module's docstring).
    """
    reasons = []
    late = _late(lag_p99_ms)
    if late:
        reasons.append(_lag_text(late))
    busy = {member: used for member, used in cores.items() if used > CPU_LIMIT_CORES}
    if busy:
        member = max(busy, key=lambda m: busy[m])
        reasons.append(f"load generator {member} used {busy[member]:.2f} cores (limit {CPU_LIMIT_CORES:g})")
    return "; ".join(reasons) or None


def _late(lag_p99_ms: Mapping[str, float | None]) -> dict[str, float]:
    return {name: lag for name, lag in lag_p99_ms.items() if lag is not None and lag > LAG_P99_LIMIT_MS}


def _lag_text(late: Mapping[str, float]) -> str:
    worst = max(late, key=lambda name: late[name])
    return f"send lag P99 {late[worst]:.1f} ms for {worst} (limit {LAG_P99_LIMIT_MS:g} ms)"


@dataclass(frozen=True)
class StageCheck:
    """The self-check of one stage: why it is generator-limited (None: judged), and what it found."""

    limited: str | None
    found: GeneratorCheck | None
    """None where there is nothing to say: the generator kept up and its loop never blocked (or no monitor ran)."""


@dataclass
class _Stalls:
    """The stall monitor's figures of one stage over its processes (and segments)."""

    monitored: bool = False
    count: int = 0
    total_ms: float = 0.0
    max_ms: float = 0.0
    listed: int = 0
    causes: dict[str, list[float]] = field(default_factory=dict)
    blocks: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    """Process -> its listed blocks as (start, end) epoch seconds, in time order."""

    @property
    def cause(self) -> str | None:
        """The cause that held the loop longest in all."""
        return max(self.causes, key=lambda c: self.causes[c][1]) if self.causes else None

    def overlap_s(self, sample: Sample) -> float:
        """Seconds of ``sample``'s life (intended send to end) during blocks of the process that sent it."""
        mine = self.blocks.get(sample.worker)
        if not mine:
            return 0.0
        # the blocks of one loop never overlap: from the one starting last before the sample's start, in order
        i = max(0, bisect.bisect_right(mine, (sample.intended_s, float("inf"))) - 1)
        total = 0.0
        for start, end in mine[i:]:
            if start >= sample.end_s:
                break
            total += max(0.0, min(end, sample.end_s) - max(start, sample.intended_s))
        return total

    def hit(self, sample: Sample) -> bool:
        """Whether ``sample`` was in flight (intended send to end) during a block of the process that sent it."""
        return self.overlap_s(sample) > 0.0

    def held(self, sample: Sample) -> bool:
        """Whether blocks of its process overlapped more than HELD_SHARE of ``sample``'s life."""
        overlap = self.overlap_s(sample)
        return overlap > 0.0 and overlap > HELD_SHARE * (sample.end_s - sample.intended_s)


def _gather(rows: Sequence[Mapping[str, GeneratorUse]]) -> tuple[dict[str, float], dict[str, float], _Stalls]:
    """Per process its highest cores and loop demand over the stage's rows (segments), and their stalls."""
    cores: dict[str, float] = {}
    demand: dict[str, float] = {}
    stalls = _Stalls()
    for row in rows:
        for member, use in row.items():
            cores[member] = max(cores.get(member, 0.0), use.cores)
            if use.stalls is None:
                continue
            stalls.monitored = True
            if use.demand is not None:
                demand[member] = max(demand.get(member, 0.0), use.demand)
            s = use.stalls
            stalls.count += s.count
            stalls.total_ms += s.total_ms
            stalls.max_ms = max(stalls.max_ms, s.max_ms)
            stalls.listed += len(s.blocks)
            for cause, (n, ms) in s.causes.items():
                entry = stalls.causes.setdefault(cause, [0, 0.0])
                entry[0] += n
                entry[1] += ms
            stalls.blocks.setdefault(member, []).extend((start, start + ms / 1000.0) for start, ms in s.blocks)
    for blocks in stalls.blocks.values():
        blocks.sort()
    return cores, demand, stalls


def _outcome(name: str, stats: ClassStats, objectives: ClassObjectives | None) -> tuple[tuple[str, bool], ...]:
    return tuple((c.name, c.passed) for c in class_criteria(name, stats, objectives)) if objectives else ()


def check_stage(classes: Mapping[str, ClassStats], rows: Sequence[Mapping[str, GeneratorUse]],
                samples: Mapping[str, list[Sample]], stats_of: Callable[[str, list[Sample]], ClassStats],
                objectives: Mapping[str, ClassObjectives], host: HostLoad | None = None) -> StageCheck:
    """The self-check of one stage (the module's rule).

    ``classes``: class -> its figures; ``rows``: per segment that ran the stage, process -> what it
    reported (the stored ``generators``); ``samples``: class -> the stage's
    samples; ``stats_of(name, samples)``: a class's figures over some of its samples (for the P95 and the
    SLO outcome without the requests in flight during a block); ``host``: the host's load over the stage
    (None: not measured, and no stage is called held back).
    """
    cores, demand, stalls = _gather(rows)
    lag = {name: c.send_lag_ms.get("p99") for name, c in classes.items()}
    if not stalls.monitored:
        limited = generator_limited(lag, cores)
        return StageCheck(limited, GeneratorCheck(kind=GeneratorLimit.CPU_BOUND) if limited else None)
    limit = f"(limit {CPU_LIMIT_CORES:g})"
    left = _left(host)
    cpu = [f"load generator {m} used {v:.2f} cores{_of_left(v, left)} {limit}"
           for m, v in cores.items() if v / left > CPU_LIMIT_CORES]
    cpu += [f"the event loop of load generator {m} wanted {v:.2f} cores, on a CPU or waiting for one"
            f"{_of_left(v, left)} {limit}"
            for m, v in demand.items() if v / left > CPU_LIMIT_CORES and cores.get(m, 0.0) / left <= CPU_LIMIT_CORES]
    late = _late(lag)
    hit, rest = _split(stalls, samples) if stalls.count else ({}, {})
    note, without = _note(stalls, classes, hit, rest, stats_of) if stalls.count else (None, {})
    processes, total = needed(cores, demand)
    found = GeneratorCheck(cause=stalls.cause, note=note, in_flight={n: len(h) for n, h in hit.items() if h},
                           p95_without_ms=without, processes=processes, cores=round(total, 2))
    used = in_all(processes, total)
    if cpu:
        text = "; ".join([*cpu, *([_lag_text(late)] if late else []), used])
        return StageCheck(f"{CPU_BOUND}: {text}", _kind(found, GeneratorLimit.CPU_BOUND))
    if not late:
        return StageCheck(None, found if note else None)
    light = bool(cores) and all(max(use, demand.get(m, 0.0)) <= TARGET_CORES for m, use in cores.items())
    held = host.reason if host is not None and host.busy and light else None
    if not stalls.count:
        if held is not None:
            return StageCheck(_held_back(late, "with no stall of the event loop", used, held),
                              _kind(found, GeneratorLimit.HELD_BACK))
        return StageCheck(f"{CPU_BOUND}: {_lag_text(late)} with no stall of the event loop: a backlog of work, "
                          f"too much for one process; {used}", _kind(found, GeneratorLimit.CPU_BOUND))
    tardy = [s for mine in samples.values() for s in mine if s.send_lag_ms > LAG_P99_LIMIT_MS]
    unexplained = sum(1 for s in tardy if not stalls.hit(s))
    if unexplained * 2 > len(tardy):
        outside = (f"and {unexplained} of the {len(tardy)} requests sent over {LAG_P99_LIMIT_MS:g} ms late were not "
                   "in flight during a stall of the event loop")
        if held is not None:
            return StageCheck(_held_back(late, outside, used, held), _kind(found, GeneratorLimit.HELD_BACK))
        return StageCheck(f"{CPU_BOUND}: {_lag_text(late)}, {outside}: a backlog of work, not the stalls; {used}",
                          _kind(found, GeneratorLimit.CPU_BOUND))
    why = _unjudged(classes, samples, hit, rest, stats_of, objectives)
    if why is None:
        return StageCheck(None, found)
    alone = _failed_alone(rest, stats_of, objectives, stalls.total_ms)
    if alone is not None:
        return StageCheck(None, found.model_copy(update={"note": f"{found.note}; {alone}"}))
    idle = max(cores.values(), default=0.0)
    return StageCheck(f"{GeneratorLimit.STALLED}: {_lag_text(late)} while the event loop was blocked in "
                      f"`{stalls.cause}`, not short of CPU ({idle:.2f} cores); {why}",
                      _kind(found, GeneratorLimit.STALLED))


def _left(host: HostLoad | None) -> float:
    """The share of the CPU time the hypervisor left the host over the stage (1.0 where steal was not measured)."""
    steal = host.steal_fraction if host is not None and host.steal_fraction is not None else 0.0
    return 1.0 - steal if steal < 1.0 else 1.0


def _of_left(cores: float, left: float) -> str:
    """``, 0.97 of the CPU the hypervisor left (9.3% stolen)``: where steal made the difference in rule 1."""
    if left >= 1.0 or cores > CPU_LIMIT_CORES:
        return ""
    return f", {cores / left:.2f} of the CPU the hypervisor left ({1.0 - left:.1%} stolen)"


def _held_back(late: Mapping[str, float], stalls: str, used: str, host: str) -> str:
    """A held-back stage's reason: the lag, that no stall made it, what the processes used, and the busy host."""
    return (f"{GeneratorLimit.HELD_BACK}: {_lag_text(late)}, {stalls}, and {used}, at most {TARGET_CORES:g} core a "
            f"process: no backlog of work; the host was busy ({host})")


def _split(stalls: _Stalls, samples: Mapping[str, list[Sample]]) -> tuple[dict[str, list[Sample]],
                                                                         dict[str, list[Sample]]]:
    """Per class, its requests held up by the blocks and the rest (each request's overlap read once)."""
    hit: dict[str, list[Sample]] = {}
    rest: dict[str, list[Sample]] = {}
    for name, mine in samples.items():
        held, others = hit.setdefault(name, []), rest.setdefault(name, [])
        for sample in mine:
            (held if stalls.held(sample) else others).append(sample)
    return hit, rest


def _kind(found: GeneratorCheck, kind: GeneratorLimit) -> GeneratorCheck:
    return found.model_copy(update={"kind": kind})


def _unjudged(classes: Mapping[str, ClassStats], samples: Mapping[str, list[Sample]],
              hit: Mapping[str, list[Sample]], rest: Mapping[str, list[Sample]],
              stats_of: Callable[[str, list[Sample]], ClassStats],
              objectives: Mapping[str, ClassObjectives]) -> str | None:
    """Why a stalled stage cannot be judged (the stalls rule), or None when it can."""
    for name, mine in samples.items():
        if mine and len(hit.get(name, [])) > AFFECTED_LIMIT * len(mine):
            return (f"{len(hit[name])} of its {len(mine)} {name} requests ({len(hit[name]) / len(mine):.0%}) were "
                    f"in flight during a block (at most {AFFECTED_LIMIT:.0%} keeps a stage judged)")
    for name, stats in classes.items():
        if not hit.get(name):
            continue
        with_them = _outcome(name, stats, objectives.get(name))
        if with_them != _outcome(name, stats_of(name, rest[name]), objectives.get(name)):
            return f"without the requests in flight during a block, {name}'s SLO outcome would differ"
    return None


LATENCY_CRITERIA = ("p95", "ttft p95")
"""The criteria a stall can only raise, by at most the time the loop was held: a request's wait and its first token."""


def _failed_alone(rest: Mapping[str, list[Sample]], stats_of: Callable[[str, list[Sample]], ClassStats],
                  objectives: Mapping[str, ClassObjectives], stalls_ms: float) -> str | None:
    """Why the servers failed a stalled stage on their own (one line), or None where that is not beyond doubt.

    A block only ever adds latency. A class whose P95 (or TTFT P95) over the requests the blocks did not
    hold up (``rest``) is over its limit by more than all the blocks together (``stalls_ms``: the most a
    burst of the arrivals they held back could add to a later request's wait) failed it by itself; the
    stage fails however the loop ran, and its verdict stands.
    """
    for name, mine in rest.items():
        spec = objectives.get(name)
        if not mine or spec is None:
            continue
        for c in class_criteria(name, stats_of(name, mine), spec):
            if c.name in LATENCY_CRITERIA and c.measured is not None and c.measured - c.limit > stalls_ms:
                return (f"{c.label} over its {c.limit:g} ms by more than the {stalls_ms:.0f} ms the loop was held "
                        "in all, without them too: the servers failed it by themselves")
    return None


def _note(stalls: _Stalls, classes: Mapping[str, ClassStats], hit: Mapping[str, list[Sample]],
          rest: Mapping[str, list[Sample]], stats_of: Callable[[str, list[Sample]], ClassStats],
          ) -> tuple[str, dict[str, float | None]]:
    """The stalls note, and class -> its P95 without the requests in flight during a block (classes that had any)."""
    blocks = "block" if stalls.count == 1 else "blocks"
    text = (f"stalls: {stalls.count} {blocks} ({stalls.total_ms:.0f} ms in all, longest {stalls.max_ms:.0f} ms, "
            f"in `{stalls.cause}`)")
    total = sum(len(v) for v in hit.values())
    requests = sum(len(v) for v in hit.values()) + sum(len(v) for v in rest.values())
    if total == 0:
        return text + "; no request was in flight during one", {}
    of = f" (of the {stalls.listed} longest)" if stalls.listed < stalls.count else ""
    text += f"; {total} requests ({total / requests:.1%}) in flight during one{of}"
    without: dict[str, float | None] = {}
    parts = []
    for name in classes:
        if not hit.get(name):
            continue
        p95 = stats_of(name, rest[name]).latency_ms.get("p95") if rest[name] else None
        without[name] = p95
        now = classes[name].latency_ms.get("p95")
        parts.append(f"{name} {_ms(p95) if rest[name] else 'none (every request was)'} (with them {_ms(now)})")
    return text + "; without them P95 would be " + ", ".join(parts), without


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f} ms"
