"""The sizing: how many load-generating processes a scenario's planned peak needs on a host of so many cores.

Scenarios built in place, each with figures chosen so the answer is known from COSTS (embedding base64 0.9 ms
a request; float 0.3 ms + 0.09 ms a vector; llm 0.3 ms + 0.04 ms an output token; asr 1.1 ms).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench_plugin.loadgen.sizing import (
    COSTS,
    MAX_PROCESSES,
    MIN_APART,
    TARGET_CORES,
    RequestCost,
    request_cost_s,
    server_cores,
    size,
)
from bench_plugin.scenario import Scenario, load_scenario

ROOT = Path(__file__).resolve().parents[2]
SLO = {"p95_ms": 1000}


def scenario(classes: dict[str, Any], *, stages: list[dict[str, Any]] | None = None,
             search: dict[str, Any] | None = None, backend: str = "local") -> Scenario:
    """A one-arm scenario of ``classes`` (each given its model and SLO) with these stages or this search."""
    data: dict[str, Any] = {"name": "sized", "backend": backend, "arms": [{"name": "a", "control": True}],
                            "classes": {n: {"model": "m", "slo": SLO, **spec} for n, spec in classes.items()}}
    data.update({"search": search} if search is not None else {"stages": stages})
    return Scenario.model_validate(data)


def embedding(rate: float, *, encoding: str = "base64", batch: int = 16, backend: str = "local") -> Scenario:
    return scenario({"embedding": {"encoding_format": encoding, "requests": {"batch_size": batch}}},
                    stages=[{"name": "only", "duration_s": 10, "load": {"embedding": rate}}], backend=backend)


def test_a_light_scenario_runs_on_the_local_runner_only_where_the_master_has_no_core_of_its_own() -> None:
    light = load_scenario(ROOT / "scenarios" / "short.yaml")
    small = size(light, cores=4, reserved=server_cores(light, "local"))  # 4 - 3 servers - 1 master = 0
    assert small.processes == 1
    assert small.peak_cores < TARGET_CORES and small.peak_at.startswith("stage high (")
    assert small.why.endswith(f"one process's {TARGET_CORES:g} core holds it")
    sized = size(light, cores=16, reserved=server_cores(light, "local"))
    assert sized.processes == MIN_APART  # the master's telemetry never shares a sender's event loop
    assert sized.why.endswith(f"at least {MIN_APART} so that the master sends nothing; "
                              "16 cores, 3 for the servers, 1 for the master")
    assert (sized.available_cores, sized.reserved_cores) == (16, 3)


def test_a_heavy_search_on_16_cores_takes_several_processes_capped_by_the_cores_left() -> None:
    # 100 embedding req/s at scale 1, searched up to x64: 6,400 req/s x 0.9 ms = 5.76 cores -> 12 processes
    heavy = scenario({"embedding": {}}, search={"mix": {"embedding": 100}, "max_scale": 64, "stage_duration_s": 5})
    sized = size(heavy, cores=16, reserved=server_cores(heavy, "local"))
    assert sized.processes == 12
    assert sized.peak_cores == pytest.approx(5.76)
    assert sized.peak_at == "ray mix at x64 (embedding 6,400 req/s)"
    assert sized.why == ("peak 5.76 cores at ray mix at x64 (embedding 6,400 req/s), at 0.5 core a process; "
                         "16 cores, 1 for the servers, 1 for the master")
    capped = size(heavy, cores=8, reserved=1)  # 8 - 1 server - 1 master leave 6
    assert capped.processes == 6 and "capped by the 6 cores left" in capped.why
    dear = {**COSTS, "embedding:base64": RequestCost(base_ms=5.0)}  # 32 cores: 64 processes wanted
    huge = size(heavy, cores=256, reserved=0, costs=dear)
    assert huge.processes == MAX_PROCESSES and f"capped at {MAX_PROCESSES}" in huge.why


def test_the_2_core_host_keeps_one_process_however_heavy_the_load() -> None:
    heavy = embedding(3_000)
    for backend in ("local", "manual"):  # local: 2 - 1 server - 1 master = 0; manual: 2 - 1 master = 1
        sized = size(heavy, cores=2, reserved=server_cores(heavy, backend))
        assert sized.processes == 1, backend
        assert sized.peak_cores > 2 and "(fewer than 2): one process" in sized.why
    assert "2 cores, 0 for the servers, 1 for the master leave 1 for load generators" in size(
        heavy, cores=2, reserved=0).why


def test_closed_loop_classes_count_as_one_process_each() -> None:
    closed = scenario({"llm": {"arrival": "closed"}, "asr": {"arrival": "closed"}, "embedding": {}},
                      stages=[{"name": "loops", "duration_s": 10, "load": {"llm": 8, "asr": 4, "embedding": 10}},
                              {"name": "llm-only", "duration_s": 10, "load": {"llm": 8, "asr": 0, "embedding": 0}}])
    sized = size(closed, cores=16, reserved=0)
    # two loaded closed-loop classes at 0.5 core each, and 10 embedding req/s x 0.9 ms
    assert sized.peak_cores == pytest.approx(2 * TARGET_CORES + 10 * 0.0009)
    assert sized.processes == 3
    assert sized.peak_at == "stage loops (embedding 10 req/s, llm 8 users (closed loop), asr 4 users (closed loop))"
    assert "closed-loop asr, llm counted as one process's worth each (no planned rate)" in sized.why
    one = scenario({"llm": {"arrival": "closed"}}, stages=[{"duration_s": 5, "load": {"llm": 100}}])
    assert size(one, cores=16, reserved=0).processes == MIN_APART  # one process's worth, the master apart
    assert size(one, cores=2, reserved=0).processes == 1


def test_the_peak_is_the_stage_or_the_ray_with_the_most_cpu() -> None:
    stages = scenario({"llm": {"requests": {"output_tokens": 100}}, "embedding": {}},
                      stages=[{"name": "low", "duration_s": 5, "load": {"llm": 10, "embedding": 100}},
                              {"name": "llm-heavy", "duration_s": 5, "load": {"llm": 500, "embedding": 0}},
                              {"name": "last", "duration_s": 5, "load": {"llm": 20, "embedding": 600}}])
    sized = size(stages, cores=16, reserved=2)
    # llm-heavy: 500 x (0.3 + 100 x 0.04) ms = 2.15 cores; last: 20 x 4.3 ms + 600 x 0.9 ms = 0.626
    assert sized.peak_at == "stage llm-heavy (llm 500 req/s)" and sized.peak_cores == pytest.approx(2.15)
    assert sized.processes == 5
    rays = scenario({"llm": {}, "embedding": {}}, search={
        "mix": {"llm": 1, "embedding": 10}, "max_scale": 32, "stage_duration_s": 5,
        "mixes": {"embedding-burst": {"embedding": 100}}})
    sized = size(rays, cores=16, reserved=2)
    # the ray of embedding alone at 100 req/s x32 outweighs the mix at x32 (32 llm + 320 embedding req/s)
    assert sized.peak_at == "ray embedding-burst at x32 (embedding 3,200 req/s)"
    assert sized.peak_cores == pytest.approx(3200 * 0.0009) and sized.processes == 6


def test_a_float_reply_costs_more_than_base64_by_its_vectors() -> None:
    assert request_cost_s("embedding", embedding(1, encoding="base64")) == pytest.approx(0.0009)
    assert request_cost_s("embedding", embedding(1, encoding="float")) == pytest.approx(0.00174)  # 16 vectors
    assert request_cost_s("embedding", embedding(1, encoding="float", batch=32)) == pytest.approx(0.00318)
    assert request_cost_s("embedding", embedding(1, encoding="base64", batch=32)) == pytest.approx(0.0009)
    base64, floats = (size(embedding(1_000, encoding=e), cores=16, reserved=1) for e in ("base64", "float"))
    assert (base64.peak_cores, floats.peak_cores) == (pytest.approx(0.9), pytest.approx(1.74))
    assert (base64.processes, floats.processes) == (2, 4)


def test_only_the_local_backend_reserves_cores_for_servers() -> None:
    three = load_scenario(ROOT / "scenarios" / "short.yaml")
    assert [server_cores(three, b) for b in ("local", "manual", "kubernetes")] == [3, 0, 0]
