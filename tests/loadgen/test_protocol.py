"""The master/worker messages: identities compared, request sets and stages carried whole."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import msgpack
import pytest

from bench_plugin.loadgen.protocol import Hello, Identity, hello_differences
from bench_plugin.loadgen.shares import Share
from bench_plugin.loadgen.state import ClassLoad, StageAssignment
from bench_plugin.results.provenance import generator_process
from bench_plugin.scenario import format_cpulist, load_scenario
from bench_plugin.scenario.request_sets import RequestSet, RequestSetError, build_request_sets

ROOT = Path(__file__).resolve().parents[2]


def over_the_wire(data: object) -> object:
    """What Locust's rpc does to a payload (msgpack both ways)."""
    return msgpack.loads(msgpack.dumps(data), raw=False, strict_map_key=False)


def test_an_identity_equals_itself_and_names_each_difference() -> None:
    me = Identity.here()
    assert me.differences(me) == []
    other = Identity({**me.packages, "locust": "0.0.1"}, "abcdef012345")
    assert me.differences(other) == [f"locust {me.packages['locust']} vs 0.0.1",
                                     f"bench_plugin source {me.source} vs abcdef012345"]


def test_a_worker_with_its_own_scenario_is_compared_on_its_hashes() -> None:
    me = Identity.here()
    hello = Hello.from_message(over_the_wire(Hello(me, ["llm"], "f" * 64, {"llm": "a" * 64}).to_message()))
    assert hello.classes == ["llm"]
    assert hello_differences(me, "f" * 64, {"llm": "a" * 64}, hello) == []
    assert hello_differences(me, "e" * 64, {"llm": "b" * 64}, hello) == [
        f"scenario sha256 {'e' * 12} vs {'f' * 12}", f"llm request-set sha256 {'b' * 12} vs {'a' * 12}"]


def test_a_worker_says_where_it_runs_and_an_older_one_says_nothing() -> None:
    here = generator_process()
    hello = Hello.from_message(over_the_wire(Hello(Identity.here(), ["llm"], process=here).to_message()))
    assert hello.process == here and here.pid == os.getpid()
    assert here.cores == format_cpulist(os.sched_getaffinity(0))  # the cores it may run on, as a cpulist
    older = Hello(Identity.here(), ["llm"]).to_message()
    del older["process"]  # a worker of a bench-plugin from before the field
    assert Hello.from_message(over_the_wire(older)).process is None


def test_request_sets_arrive_whole_or_are_refused() -> None:
    sets = build_request_sets(load_scenario(ROOT / "scenarios" / "short.yaml"), ROOT / "scenarios")
    for name, rs in sets.items():
        back = RequestSet.from_message(over_the_wire(rs.to_message()))  # type: ignore[arg-type]
        assert back == rs, name
    asr = sets["asr"].to_message()
    asr["audio"] = {**asr["audio"], asr["items"][0]["file"]: b"not the clip"}
    with pytest.raises(RequestSetError, match="does not match its sha256"):
        RequestSet.from_message(asr)
    llm = sets["llm"].to_message()
    llm["items"] = llm["items"][1:]
    with pytest.raises(RequestSetError, match="arrived altered"):
        RequestSet.from_message(llm)


def test_a_stage_assignment_carries_its_shares() -> None:
    load = ClassLoad(url="http://127.0.0.1:1", model="m", arrival="poisson", load=3.0, timeout_s=5.0,
                     max_in_flight=8, options={"api": "chat"})
    stage = StageAssignment(1, 0, 2, 10.0, 13.0, 7, {"llm": load})
    mine = stage.with_shares({"llm": Share(1, 3)})
    back = StageAssignment.from_message(over_the_wire(mine.to_message()))  # type: ignore[arg-type]
    assert back == mine and back.key == (1, 0, 2)
    assert replace(back, shares={}) == stage
