"""The contention simulator's device: one FCFS queue shared across processes, whose P95 is the M/M/1 one."""

from __future__ import annotations

import itertools
import json
import math
import random
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests
from servers_testlib import StartServer

from bench_plugin.servers.device import (
    P95_FACTOR,
    SimulatedDevice,
    boundary_scale,
    max_total_rate,
    service_ms_for,
    sojourn_p95_s,
)


def test_two_handles_on_one_file_are_one_mm1_queue(tmp_path: Path) -> None:
    """Poisson arrivals split between two handles of one device (as two servers would be): each request's time on
    the device has the M/M/1 FCFS law, mean 1/(mu - lambda) and P95 ln(20)/(mu - lambda), whichever handle took it."""
    service_s, rate, n = 0.010, 30.0, 200_000  # at 30% busy the queue's samples are nearly independent
    handles = [SimulatedDevice(tmp_path / "device", service_s, seed) for seed in (1, 2)]
    arrivals = random.Random(7)
    t, sojourns = 1000.0, []
    for k in range(n):
        t += arrivals.expovariate(rate)
        start, end = handles[k % 2].admit(t)
        assert start >= t
        sojourns.append(end - t)
    for handle in handles:
        handle.close()
    sojourns = sorted(sojourns[n // 10:])  # past the empty start
    mean = sum(sojourns) / len(sojourns)
    p95 = sojourns[int(0.95 * len(sojourns))]
    assert mean == pytest.approx(1 / (1 / service_s - rate), rel=0.04)
    assert p95 == pytest.approx(sojourn_p95_s(service_s, rate), rel=0.04)
    assert sojourn_p95_s(service_s, rate) == pytest.approx(P95_FACTOR / 70.0)


def test_the_envelope_in_closed_form() -> None:
    # a class with 50 ms of its own and a 200 ms SLO keeps it while ln(20)/(mu - lambda) <= 150 ms
    assert max_total_rate(0.010, 200.0, 50.0) == pytest.approx(100 - math.log(20) / 0.150)
    assert max_total_rate(0.010, 40.0, 50.0) == 0.0  # its own latency is past the SLO already
    limits = {"llm": (500.0, 100.0), "embedding": (100.0, 20.0)}
    mix = {"llm": 1.0, "embedding": 4.0}
    strictest = min(max_total_rate(0.010, 500.0, 100.0), max_total_rate(0.010, 100.0, 20.0))
    assert boundary_scale(mix, 0.010, limits) == pytest.approx(strictest / 5.0)
    assert boundary_scale({"llm": 2.0}, 0.010, limits) == pytest.approx(max_total_rate(0.010, 500.0, 100.0) / 2.0)


@pytest.mark.parametrize(("spec", "sharing", "ms"), [("10", None, 10.0), ("10", "mps", 10.0),
                                                     ("mps=8,time-slicing=12,10", "mps", 8.0),
                                                     ("mps=8,time-slicing=12,10", "exclusive", 10.0),
                                                     ("mps=8, time-slicing=12", "time-slicing", 12.0)])
def test_service_time_per_key(spec: str, sharing: str | None, ms: float) -> None:
    assert service_ms_for(spec, sharing) == ms


@pytest.mark.parametrize(("spec", "sharing", "says"), [("mps=8", "exclusive", "no service time for"),
                                                       ("fast", None, "'fast' is not a number"),
                                                       ("0", None, "not a positive number")])
def test_a_bad_service_time_is_refused_in_one_line(spec: str, sharing: str | None, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        service_ms_for(spec, sharing)


def test_servers_of_one_device_take_turns(tmp_path: Path, start_server: StartServer) -> None:
    """Two real synthetic servers on one device: requests sent to both at once are served one at a time, each
    starting when the one before it ended (FCFS across processes), and each answered after its own latency."""
    device, logs = tmp_path / "device", [tmp_path / "a.jsonl", tmp_path / "b.jsonl"]
    servers = [start_server("synthetic", "--shared-device", str(device), "--service-ms", "mps=40,5", "--service-key",
                            "mps", "--latency-ms", "30", "--timing-log", str(log), "--seed", str(k))
               for k, log in enumerate(logs)]
    for server in servers:
        server.wait_ready()
    body = {"model": "bench-synthetic", "input": ["a b c"]}
    targets = [servers[k % 2].url + "/v1/embeddings" for k in range(8)]
    with ThreadPoolExecutor(8) as pool:
        codes = list(pool.map(lambda url: requests.post(url, json=body, timeout=30).status_code, targets))
    assert codes == [200] * 8
    lines = [json.loads(line) for log in logs for line in log.read_text().splitlines()]
    assert {line["endpoint"] for line in lines} == {"/v1/embeddings"} and len(lines) == 8
    served = sorted(lines, key=lambda line: line["device_start_s"])
    for before, line in itertools.pairwise(served):  # next in line: when the device fell free, or on arrival
        assert line["device_start_s"] == max(before["device_end_s"], line["received_s"])
    for line in served:
        start, end = line["device_start_s"], line["device_end_s"]
        assert start >= line["received_s"] and end > start
        on_device_ms = (end - line["received_s"]) * 1000
        assert on_device_ms + 30 - 1 <= line["e2e_ms"] <= on_device_ms + 30 + 250  # then its own 30 ms
    busy = sum(line["device_end_s"] - line["device_start_s"] for line in served)
    assert busy / 8 > 0.005  # mps's 40 ms mean (8 draws below 5 ms on average: odds about 1e-5), not the default


def test_a_hold_is_one_exact_turn_of_the_queue(tmp_path: Path) -> None:
    """A cold start's hold takes the device exactly as long as asked, after what is queued; what comes next waits."""
    device = SimulatedDevice(tmp_path / "device", 0.010, 1)
    _, busy_until = device.admit(100.0)
    assert device.hold(0.5, now=100.001) == (busy_until, busy_until + 0.5)
    start, _ = device.admit(100.002)
    assert start == busy_until + 0.5
    device.close()


def test_a_starting_server_holds_the_device_its_co_tenant_serves_on(tmp_path: Path, start_server: StartServer) -> None:
    """--startup-device-ms: a server started beside a serving co-tenant takes the device for its cold start, and the
    co-tenant's request sent meanwhile waits for it (then its own 20 ms), as on a GPU a cold start competes."""
    device, log = tmp_path / "device", tmp_path / "tenant.jsonl"
    tenant = start_server("synthetic", "--shared-device", str(device), "--service-ms", "1", "--latency-ms", "20",
                          "--timing-log", str(log), "--seed", "1")
    tenant.wait_ready()
    body = {"model": "bench-synthetic", "input": ["a b c"]}
    assert requests.post(tenant.url + "/v1/embeddings", json=body, timeout=30).status_code == 200
    starting = start_server("synthetic", "--shared-device", str(device), "--service-ms", "1", "--seed", "2",
                            "--startup-device-ms", "4000")
    starting.wait_ready()  # ready at once: its hold began as it started, and lasts long past a busy machine's start
    assert requests.post(tenant.url + "/v1/embeddings", json=body, timeout=30).status_code == 200
    first, second = (json.loads(line) for line in log.read_text().splitlines())
    assert first["device_start_s"] == first["received_s"]  # nothing held the device before
    waited = second["device_start_s"] - second["received_s"]
    assert 0 < waited <= 4.0 and second["e2e_ms"] >= waited * 1000 + 20 - 1
    held_from = second["device_start_s"] - 4.0  # the hold ended where the request's turn began
    assert held_from <= second["received_s"]
