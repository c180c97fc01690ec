"""The load generators in one line, from what the campaign recorded of them (CampaignRecord -> summary.json)."""

from __future__ import annotations

import json
from pathlib import Path

from bench_plugin.report.generators import generators_line
from bench_plugin.results.record import CampaignRecord, GeneratorFacts
from bench_plugin.results.summary import GeneratorProcess, GeneratorSizing, LoadGenerators, load_summary

ROOT = Path(__file__).resolve().parents[2]
WHY = ("peak 2.30 cores at stage x4 (embedding 3,000 req/s), at 0.5 core a process; 16 cores, 3 for the servers, "
       "1 for the master")


def where(pid: int) -> GeneratorProcess:
    return GeneratorProcess(pid=pid, host="gpu-box", cores="0-15")


def sizing(decided: str, processes: int | None, sized: int = 5, why: str = WHY) -> GeneratorSizing:
    return GeneratorSizing.model_validate({"decided": decided, "processes": processes, "sized": sized, "why": why})


def test_each_way_the_number_was_decided_reads_in_one_line() -> None:
    workers = {f"w{i}": where(100 + i) for i in range(5)}
    auto = LoadGenerators(sizing=sizing("auto", 5), master=where(99), processes=workers)
    assert generators_line(auto) == f"load generators: 5 processes under a master (auto: {WHY})"
    light = "peak 0.03 cores at stage high (llm 16 req/s): one process's 0.5 core holds it"
    one = LoadGenerators(sizing=sizing("auto", 1, 1, light), processes={"local": where(7)})
    assert generators_line(one) == f"load generators: 1 process, the local runner (auto: {light})"
    given = LoadGenerators(sizing=sizing("given", 2, 1, light), master=where(99),
                           processes={"a": where(1), "b": where(2)})
    assert generators_line(given) == (f"load generators: 2 processes under a master (--processes 2 given; the "
                                      f"sizing gives 1: {light})")
    assert generators_line(LoadGenerators(sizing=sizing("given", 5), master=where(99), processes=workers)) == \
        "load generators: 5 processes under a master (--processes 5 given)"  # as the sizing gives: nothing to add
    by_hand = LoadGenerators(sizing=sizing("workers", None, 1, light), master=where(99),
                             processes={"a": where(1), "b": where(2), "c": where(3)})
    assert generators_line(by_hand) == (f"load generators: 3 processes under a master (--master, workers started by "
                                        f"hand; the sizing gives 1: {light})")


def test_the_record_keeps_who_took_part_and_a_record_from_before_says_nothing() -> None:
    record = CampaignRecord(
        generator_sizing=sizing("workers", None, 1), master_process=where(99),
        load_generators={"a": GeneratorFacts(state="accepted", process=where(1)),
                         "b": GeneratorFacts(state="lost", process=where(2)),
                         "c": GeneratorFacts(state="refused", process=where(3), reason="locust 2.0 vs 2.47"),
                         "d": GeneratorFacts(state="accepted")})  # a worker from before: where it ran unknown
    generators = record.generators()
    assert generators is not None and sorted(generators.processes) == ["a", "b"]
    assert generators.master == where(99)
    older = CampaignRecord(load_generators={"local": GeneratorFacts(state="accepted", identity={"source": "x"})})
    assert older.generators() is None and generators_line(None) is None
    assert generators_line(LoadGenerators(processes={"local": where(7)})) == \
        "load generators: 1 process, the local runner"  # recorded where it ran, not how the number was decided


def test_the_committed_summaries_still_read_and_the_older_say_nothing_of_their_load_generators() -> None:
    committed = sorted((ROOT / "docs" / "results").glob("*/summary.json"))
    assert committed
    older = 0
    for path in committed:
        recorded = json.loads(path.read_text()).get("load_generators")
        summary = load_summary(path)
        assert (summary.load_generators is None) == (recorded is None), path
        older += recorded is None
    assert older, "campaigns recorded before the load generators were are among them"
