"""The self-check tells a CPU-bound load generator from a stalled one and from one a busy host held back, and judges a
stage that merely stalled.

Hand-built samples and usage reports (analysis_builders' style: every figure chosen so the answer is
known): 100 embedding requests 100 ms apart, each 30 ms long, sent on time except where a block of the
event loop made them late. The real locust processes behind these figures are in tests/test_selfcheck.py.
"""

from __future__ import annotations

from typing import Any

from analysis_builders import objectives, stage, stats, trial

from bench_plugin.analysis.contention import stage_contention
from bench_plugin.analysis.selfcheck import (
    AFFECTED_LIMIT,
    CPU_ADVICE,
    HELD_BACK_ADVICE,
    advice,
    check_stage,
    cpu_advice,
    processes_needed,
    stalled_advice,
)
from bench_plugin.analysis.summary import class_stats
from bench_plugin.analysis.verdict import stage_verdict
from bench_plugin.results.samples import Sample
from bench_plugin.results.summary import GeneratorCheck, GeneratorUse, HostLoad
from bench_plugin.results.words import Call, GeneratorLimit

T0 = 1_000.0
CAUSE = "blocker.poll (blocker.py:7) via bench_plugin.telemetry.source.PollingSource.poll_once (source.py:160)"


def requests(late: dict[int, float] | None = None, slow: dict[int, float] | None = None) -> list[Sample]:
    """100 embedding requests at T0 + i/10 s, 30 ms each (or ``slow[i]`` ms); ``late[i]``: sent that many ms late."""
    late, slow = late or {}, slow or {}
    out = []
    for i in range(100):
        intended = T0 + i / 10
        sent = intended + late.get(i, 0.0) / 1000
        out.append(Sample(workload="embedding", trial=1, segment=0, stage=0, seq=i, item=0, intended_s=intended,
                          sent_s=sent, end_s=sent + slow.get(i, 30.0) / 1000, ok=True))
    return out


def block_over(i: int, late_ms: float) -> list[float]:
    """A block that begins 2 ms before request ``i`` is due and holds it ``late_ms``."""
    return [T0 + i / 10 - 0.002, late_ms + 2.0]


def usage(blocks: list[list[float]] | None, *, cores: float = 0.1, busy_s: float | None = 1.0) -> dict[str, Any]:
    """One process's stored usage over 10 s; ``blocks`` None: a store from before the stall monitor."""
    out: dict[str, Any] = {"cpu_s": cores * 10, "wall_s": 10.0, "cores": cores}
    if blocks is not None:
        out["stalls"] = {"threshold_ms": 5.0, "count": len(blocks), "total_ms": sum(ms for _, ms in blocks),
                         "max_ms": max((ms for _, ms in blocks), default=0.0),
                         "causes": {CAUSE: [len(blocks), sum(ms for _, ms in blocks)]} if blocks else {},
                         "blocks": blocks, "busy_s": busy_s}
    return out


def check(samples: list[Sample], use: dict[str, Any], p95_slo: float = 1000.0, host: HostLoad | None = None) -> Any:
    obj = objectives(p95=p95_slo, budget=0.05)
    figures = {"embedding": class_stats(samples, "embedding", 10.0, obj["embedding"])}
    return check_stage(figures, [{"local": GeneratorUse.model_validate(use)}], {"embedding": samples},
                       lambda name, mine: class_stats(mine, name, 10.0, obj[name]), obj, host)


def host(others: float, steal: float = 0.0) -> HostLoad:
    """The 2-core host over the stage, other processes using ``others`` cores (busy over 0.5, hostload's rule), the
    hypervisor stealing ``steal`` of its CPU time (under 10%: not busy for that)."""
    reason = f"other processes used {others:.2f} of 2 cores (more than 0.5)" if others > 0.5 else None
    return HostLoad(duration_s=10.0, cores=2, load_avg_1m=None, cpu_busy_cores=others + 0.1, steal_fraction=steal,
                    own_cores=0.1, extra_own_cores=0.0, others_cores=others, busy=reason is not None, reason=reason)


def test_a_stage_that_stalled_twice_is_judged_with_the_stalls_share_shown() -> None:
    samples = requests(late={10: 12.0, 60: 12.0})
    result = check(samples, usage([block_over(10, 12.0), block_over(60, 12.0)]))
    assert samples and max(s.send_lag_ms for s in samples) > 10  # the lag P99 alone would withhold the verdict
    assert result.limited is None
    found = result.found
    assert found.kind is None and found.cause == CAUSE and found.in_flight == {"embedding": 2}
    assert found.note == (f"stalls: 2 blocks (28 ms in all, longest 14 ms, in `{CAUSE}`); 2 requests (2.0%) in "
                          "flight during one; without them P95 would be embedding 30 ms (with them 30 ms)")


def test_a_stage_whose_stalls_touched_too_many_requests_is_generator_limited_stalled() -> None:
    hit = range(0, 100, 10)  # 10% of the requests
    result = check(requests(late=dict.fromkeys(hit, 12.0)), usage([block_over(i, 12.0) for i in hit]))
    assert result.found.kind == "stalled" and result.found.in_flight == {"embedding": 10}
    assert result.limited.startswith(f"stalled: send lag P99 12.0 ms for embedding (limit 10 ms) while the event "
                                     f"loop was blocked in `{CAUSE}`, not short of CPU (0.10 cores); ")
    assert f"10 of its 100 embedding requests (10%) were in flight during a block (at most {AFFECTED_LIMIT:.0%}" \
        in result.limited
    text = advice([result.found])
    assert "not a CPU shortage, more workers will not help" in text and f"`{CAUSE}`" in text
    assert CPU_ADVICE not in text


def test_a_stage_whose_stalls_change_an_slo_outcome_is_generator_limited() -> None:
    hit = [0, 20, 40, 60, 80]  # 5%: within the share, but these five, sent 80 ms late, decide the P95
    samples = requests(late=dict.fromkeys(hit, 80.0))
    result = check(samples, usage([block_over(i, 80.0) for i in hit]), p95_slo=32.0)
    assert result.found.kind == "stalled"
    assert result.limited.endswith("without the requests in flight during a block, embedding's SLO outcome would "
                                   "differ")
    assert "without them P95 would be embedding 30 ms (with them 34 ms)" in result.found.note


def test_requests_that_a_block_could_not_have_made_slow_are_the_servers_to_answer_for() -> None:
    # a server past its saturation: every request waits 3 s in its queue, so all 100 are in flight during
    # the blocks (14 ms, one a second), three of which could have added 42 ms to a 3,000-ms latency
    slow = dict.fromkeys(range(100), 3000.0)
    blocked = range(0, 100, 10)
    result = check(requests(late=dict.fromkeys(blocked, 12.0), slow=slow),
                   usage([block_over(i, 12.0) for i in blocked]), p95_slo=200.0)
    assert result.limited is None  # judged: the server's P95 of 3 s fails its SLO however the loop ran
    assert result.found.in_flight == {} and "no request was in flight during one" in result.found.note
    # the same blocks over requests of 30 ms made them late by a third of their life: generator-limited
    fast = check(requests(late=dict.fromkeys(blocked, 12.0)), usage([block_over(i, 12.0) for i in blocked]))
    assert fast.found.kind == "stalled" and fast.found.in_flight == {"embedding": 10}


def test_a_process_short_of_cpu_is_cpu_bound_by_its_cores_or_by_what_its_loop_wanted() -> None:
    on_time = requests()
    busy = check(on_time, usage([], cores=0.95))
    assert busy.limited == "CPU-bound: load generator local used 0.95 cores (limit 0.9); 1 process, 0.95 cores in all"
    assert busy.found.kind == "cpu-bound"
    assert (busy.found.processes, busy.found.cores) == (1, 0.95)
    assert advice([busy.found]) == cpu_advice(2)  # ceil(0.95 / 0.5)
    # a busy host gives a starved loop little CPU: it still wanted a whole core (on a CPU or waiting for one)
    starved = check(requests(late={5: 40.0, 55: 40.0}), usage([block_over(5, 40.0), block_over(55, 40.0)], cores=0.3,
                                                           busy_s=9.6))
    assert starved.limited.startswith("CPU-bound: the event loop of load generator local wanted 0.96 cores, on a "
                                      "CPU or waiting for one (limit 0.9); send lag P99")
    assert starved.found.kind == "cpu-bound" and starved.found.note.startswith("stalls: 2 blocks (84 ms in all")
    # it used 0.3 cores but wanted 0.96: what it needed is what it wanted
    assert starved.limited.endswith("; 1 process, 0.96 cores in all")
    assert (starved.found.processes, starved.found.cores) == (1, 0.96)
    assert advice([starved.found]) == cpu_advice(2)


def test_a_process_short_of_cpu_is_judged_against_the_cpu_the_hypervisor_left() -> None:
    """Seen in CI: a loop burning 95 ms of every 100 in one greenlet, on a host not flagged busy, used 0.88 of a core
    and wanted no more (0.97 on a quiet host): the rest most likely the hypervisor's, under the 10% of steal that
    flags a host, and steal is neither CPU time nor a wait the guest sees. Its holds read as stalls, and the stage
    was called stalled, 'not short of CPU'. Here the hypervisor took 9.3%."""
    hogged = [block_over(i, 95.0) for i in range(0, 100)]
    samples = requests(late=dict.fromkeys(range(100), 95.0))
    seen = check(samples, usage(hogged, cores=0.88, busy_s=8.8), host=host(0.0, steal=0.093))
    assert seen.found.kind == GeneratorLimit.CPU_BOUND, seen.limited
    assert seen.limited.startswith("CPU-bound: load generator local used 0.88 cores, 0.97 of the CPU the hypervisor "
                                   "left (9.3% stolen) (limit 0.9); send lag P99 95.0 ms for embedding")
    assert seen.limited.endswith("; 1 process, 0.88 cores in all")  # what it used: the sizing is not corrected
    # the loop's demand alone, corrected the same way
    wanted = check(samples, usage(hogged, cores=0.5, busy_s=8.8), host=host(0.0, steal=0.093))
    assert wanted.limited.startswith("CPU-bound: the event loop of load generator local wanted 0.88 cores, on a CPU or "
                                     "waiting for one, 0.97 of the CPU the hypervisor left (9.3% stolen) (limit 0.9)")
    # with no steal it is the stall it looks like; a process over the limit by itself reads as before
    assert check(samples, usage(hogged, cores=0.88, busy_s=8.8), host=host(0.0)).found.kind == GeneratorLimit.STALLED
    assert check(samples, usage(hogged, cores=0.88, busy_s=8.8)).found.kind == GeneratorLimit.STALLED
    over = check(requests(), usage([], cores=0.95), host=host(0.0, steal=0.05))
    assert over.limited == "CPU-bound: load generator local used 0.95 cores (limit 0.9); 1 process, 0.95 cores in all"
    # a light process stays light: 0.5 core with 9.3% stolen is 0.55 of what was left
    assert check(samples, usage(hogged, cores=0.5, busy_s=5.0), host=host(0.0, steal=0.093)).found.kind \
        == GeneratorLimit.STALLED


def test_lag_without_a_stall_or_mostly_outside_the_stalls_is_a_backlog() -> None:
    late = dict.fromkeys(range(0, 100, 10), 15.0)
    none = check(requests(late=late), usage([]))
    assert none.limited.startswith("CPU-bound: send lag P99 15.0 ms for embedding (limit 10 ms) with no stall")
    assert none.limited.endswith("too much for one process; 1 process, 0.10 cores in all")
    assert advice([none.found]) == cpu_advice(2)  # behind on 0.1 core: at least one more process than ran
    outside = check(requests(late=late), usage([block_over(0, 15.0)]))  # 1 of the 10 late requests in a block
    assert outside.found.kind == "cpu-bound"
    assert "9 of the 10 requests sent over 10 ms late were not in flight during a stall" in outside.limited


def test_lag_of_a_process_with_little_to_do_on_a_busy_host_is_held_back_not_a_backlog() -> None:
    """At 0.1 core the process had no backlog to make: more processes would only compete for the same CPU."""
    late = dict.fromkeys(range(0, 100, 10), 15.0)
    held = check(requests(late=late), usage([]), host=host(0.63))
    assert held.found.kind == GeneratorLimit.HELD_BACK
    assert held.limited == ("held back: send lag P99 15.0 ms for embedding (limit 10 ms), with no stall of the event "
                            "loop, and 1 process, 0.10 cores in all, at most 0.5 core a process: no backlog of work; "
                            "the host was busy (other processes used 0.63 of 2 cores (more than 0.5))")
    assert advice([held.found]) == HELD_BACK_ADVICE and "--processes" not in HELD_BACK_ADVICE
    outside = check(requests(late=late), usage([block_over(0, 15.0)]), host=host(0.63))
    assert outside.found.kind == GeneratorLimit.HELD_BACK
    assert "9 of the 10 requests sent over 10 ms late were not in flight during a stall" in outside.limited
    # a quiet host: the backlog it was (above); a process over the sizing's share: a backlog however busy the host
    assert check(requests(late=late), usage([]), host=host(0.2)).found.kind == GeneratorLimit.CPU_BOUND
    assert check(requests(late=late), usage([], cores=0.6), host=host(0.63)).found.kind == GeneratorLimit.CPU_BOUND
    # a stalled loop stays stalled, and a process short of CPU CPU-bound, on a busy host too
    blocked = range(0, 100, 10)
    stalled = check(requests(late=dict.fromkeys(blocked, 12.0)), usage([block_over(i, 12.0) for i in blocked]),
                    host=host(0.63))
    assert stalled.found.kind == GeneratorLimit.STALLED
    assert check(requests(), usage([], cores=0.95), host=host(0.63)).found.kind == GeneratorLimit.CPU_BOUND
    # runs of one stage held back and CPU-bound: both fixes
    bound = GeneratorCheck(kind=GeneratorLimit.CPU_BOUND, processes=1, cores=0.95)
    assert advice([bound, held.found]) == f"{cpu_advice(2)}; {HELD_BACK_ADVICE}"


def test_a_store_from_before_the_monitor_is_judged_by_lag_and_cores_as_before() -> None:
    result = check(requests(late=dict.fromkeys(range(0, 100, 10), 15.0)), usage(None))
    assert result.limited == "send lag P99 15.0 ms for embedding (limit 10 ms)"
    assert result.found.kind == "cpu-bound" and result.found.note is None
    assert check(requests(), usage(None)) == check(requests(), usage([]))  # nothing to say either way


def test_a_stall_without_lag_is_only_noted() -> None:
    result = check(requests(), usage([[T0 + 0.05, 8.0]]))  # between two requests
    assert result.limited is None
    assert result.found.note == f"stalls: 1 block (8 ms in all, longest 8 ms, in `{CAUSE}`); no request was in " \
                                "flight during one"


def test_the_verdicts_advice_follows_the_kind() -> None:
    obj = objectives(p95=1000.0, budget=0.05)

    def verdict(reason: str, found: GeneratorCheck | None) -> tuple[str, ...]:
        mine = [trial("mps", r, [stage(0, {"llm": stats(6.0, 300.0), "embedding": stats(6.0, 300.0)})], 1)
                for r in (1, 2)]
        theirs = [trial("exclusive", r, [stage(0, {"llm": stats(10.0, 300.0), "embedding": stats(10.0, 300.0)})],
                        2) for r in (1, 2)]
        mine[0].stages[0].generator_limited = reason
        mine[0].stages[0].generator_check = found
        found_verdict = stage_verdict(stage_contention(0, mine, theirs, obj))
        assert found_verdict.call == Call.GENERATOR_LIMITED
        return tuple(str(r) for r in found_verdict.reasons)

    stalled = verdict(f"stalled: send lag P99 14.0 ms for llm (limit 10 ms) while the event loop was blocked in "
                      f"`{CAUSE}`, not short of CPU (0.12 cores); 9 of its 30 llm requests (30%) were in flight",
                      GeneratorCheck(kind=GeneratorLimit.STALLED, cause=CAUSE, processes=1, cores=0.12))
    assert "mps repeat 1: stalled" in stalled[0]
    assert stalled[1] == (f"the event loop was held by `{CAUSE}`: not a CPU shortage, more workers will not help; "
                          "make that operation yield to gevent or move it into an OS thread, then rerun")
    cpu = verdict("CPU-bound: load generator local used 0.97 cores (limit 0.9); 1 process, 0.97 cores in all",
                  GeneratorCheck(kind=GeneratorLimit.CPU_BOUND, processes=1, cores=0.97))
    assert cpu[1] == cpu_advice(2) and cpu[1].startswith("rerun with --processes 2 ")
    assert "--master and workers on other hosts" in cpu[1]
    # the words of the reason are not read: the check's kind and figures decide
    assert verdict("CPU-bound: ...; 1 process, 0.97 cores in all", GeneratorCheck(kind=GeneratorLimit.CPU_BOUND))[1] \
        == CPU_ADVICE  # no figures
    assert verdict("send lag P99 42.0 ms for llm (limit 10 ms)", None)[1] == CPU_ADVICE  # a store from before the kinds


def test_the_advice_asks_for_the_processes_the_measured_cpu_needs() -> None:
    # the stage's CPU in all over 0.5 core a process, and never fewer than one more process than ran
    def cpu(processes: int, cores: float) -> GeneratorCheck:
        return GeneratorCheck(kind=GeneratorLimit.CPU_BOUND, processes=processes, cores=cores)

    assert processes_needed([cpu(2, 1.90)]) == 4
    assert processes_needed([cpu(3, 0.60)]) == 4
    assert processes_needed([cpu(1, 1.00)]) == 2
    # over the runs of a stage (repeats, arms), the worst decides
    checks = [cpu(1, 0.95), cpu(1, 2.40)]
    assert processes_needed(checks) == 5
    assert advice(iter(checks)) == cpu_advice(5)  # capacity.py hands the checks over as a generator
    assert processes_needed([GeneratorCheck(kind=GeneratorLimit.CPU_BOUND)]) is None
    # stalled and CPU-bound runs of one stage: both fixes, the stalled run's figures left out of the sizing
    both = advice([cpu(1, 0.95), GeneratorCheck(kind=GeneratorLimit.STALLED, cause=CAUSE, processes=4, cores=9.0)])
    assert both == f"{cpu_advice(2)}; {stalled_advice([CAUSE])}"


def test_a_stalled_stage_whose_servers_failed_by_themselves_keeps_its_verdict() -> None:
    # 6 blocks of 14 ms (84 ms in all), each holding up its 200-ms request and the one before, still in flight
    blocked = range(0, 60, 10)
    samples = requests(late=dict.fromkeys(blocked, 12.0), slow=dict.fromkeys(range(100), 200.0))
    use = usage([block_over(i, 12.0) for i in blocked])
    failed = check(samples, use, p95_slo=50.0)  # 200 ms without them: 150 ms over, more than the 84 ms held
    assert failed.limited is None and failed.found.in_flight == {"embedding": 11}
    assert failed.found.note.endswith("; embedding p95 over its 50 ms by more than the 84 ms the loop was held in "
                                      "all, without them too: the servers failed it by themselves")
    near = check(samples, use, p95_slo=150.0)  # 50 ms over: a burst of the held arrivals could have done that
    assert near.found.kind == "stalled" and "11 of its 100 embedding requests (11%)" in near.limited

