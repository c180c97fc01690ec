"""The server poller: a real scrape process reading real HTTP endpoints on loopback, as a campaign runs it.

Each endpoint serves an engine's page (tests/telemetry/engine_metrics, or the reference servers' own), and
what the poller hands the campaign (points, the latest values, each class's source) is checked against what
the pages said. Nothing here waits on a fixed sleep for a result: each check polls until it holds or a
deadline passes, so a busy machine only makes the test slower.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from bench_plugin.results.server_rows import Quantity as Q
from bench_plugin.results.server_rows import ServerPoint
from bench_plugin.servers.metrics import ServerMetrics
from bench_plugin.telemetry.server_poller import ServerPoller, metrics_url

PAGES = Path(__file__).resolve().parent / "engine_metrics"
DEADLINE_S = 30.0

Serve = Callable[[Callable[[], tuple[int, str]]], str]


def until(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"not within {DEADLINE_S:g} s: {what}")
        time.sleep(0.1)


def test_metrics_url_defaults_to_the_servers_own_and_takes_a_template() -> None:
    assert metrics_url("http://127.0.0.1:8001", None) == "http://127.0.0.1:8001/metrics"
    assert metrics_url("http://tei.ns.svc:80/v1", None) == "http://tei.ns.svc:80/metrics"
    assert metrics_url("http://10.0.0.7:8080", "http://{host}:9000/metrics") == "http://10.0.0.7:9000/metrics"
    assert metrics_url("http://10.0.0.7:8080", "off") is None


def test_each_class_is_read_through_the_segment_and_its_source_said(tmp_path: Path, http_page: Serve) -> None:
    metrics = ServerMetrics()
    reference = http_page(lambda: (200, metrics.render().decode()))
    vllm = http_page(lambda: (200, (PAGES / "vllm.txt").read_text()))
    poller = ServerPoller({"embedding": reference, "llm": vllm}, tmp_path)
    assert poller.start() is None
    try:
        metrics.queue_depth.set(4)
        until(lambda: poller.latest().get("embedding", {}).get(Q.QUEUE_DEPTH) == 4, "the reference page's queue read")
        metrics.queue_depth.set(9)
        metrics.queue_time.observe(0.25)
        until(lambda: poller.latest().get("embedding", {}).get(Q.QUEUE_DEPTH) == 9, "a changed value read")
        until(lambda: poller.latest().get("llm", {}).get(Q.RUNNING) == 48, "the vLLM page read")
        points = poller.drain()
        assert {p.workload for p in points} == {"embedding", "llm"}
        assert all(isinstance(p, ServerPoint) and p.t > 0 for p in points)
        queue = [p.value for p in points if p.workload == "embedding" and p.quantity == Q.QUEUE_DEPTH]
        assert 4 in queue and 9 in queue and queue.index(4) < queue.index(9)  # in the order read
    finally:
        rest = poller.stop()
    assert all(p.workload in ("embedding", "llm") for p in rest)
    assert not any(tmp_path.iterdir())  # the scraper's file went with it
    sources = {s.workload: s for s in poller.sources()}
    assert sources["embedding"].engine == "reference" and sources["llm"].engine == "vllm"
    assert sources["llm"].names[Q.COMPUTE_TIME] == "vllm:request_inference_time_seconds_sum"
    assert sources["embedding"].url == reference and sources["embedding"].scrapes >= 2
    assert sources["embedding"].problems == {} and sources["llm"].problems == {}


def test_a_server_that_comes_up_late_is_no_problem_one_that_never_answers_is(tmp_path: Path, http_page: Serve) -> None:
    up = {"yet": False}
    metrics = ServerMetrics()
    late = http_page(lambda: (200, metrics.render().decode()) if up["yet"] else (503, "loading"))
    never = "http://127.0.0.1:9/metrics"  # the discard port: nothing listens there
    wrong = http_page(lambda: (200, "# TYPE up gauge\nup 1\n"))
    poller = ServerPoller({"llm": late, "asr": never, "embedding": wrong}, tmp_path)
    poller.start()
    try:
        until(lambda: "llm" not in poller.latest() and sum(poller.sources()[1].problems.values()) >= 2,
              "two failed reads of the dead endpoint")
        up["yet"] = True
        until(lambda: "llm" in poller.latest(), "the late server read once it is up")
    finally:
        poller.stop()
    sources = {s.workload: s for s in poller.sources()}
    assert sources["llm"].problems == {} and sources["llm"].engine == "reference"
    assert list(sources["asr"].problems) == ["unreachable: [Errno 111] Connection refused"]
    assert sources["asr"].engine is None and sources["asr"].scrapes == 0
    (problem,) = sources["embedding"].problems
    assert problem.startswith("no engine recognised among its series (up; known: reference, vllm")


def test_the_scraper_stops_once_its_parent_is_gone(tmp_path: Path, http_page: Serve) -> None:
    url = http_page(lambda: (200, ServerMetrics().render().decode()))
    out = tmp_path / "points.jsonl"
    # a parent that starts the scraper and ends at once, as a campaign killed hard would
    parent = subprocess.run(
        [sys.executable, "-c",
         "import os, subprocess, sys; p = subprocess.Popen([sys.executable, '-m', "
         "'bench_plugin.telemetry.server_scrape', '--out', sys.argv[1], '--interval', '0.2', '--parent', "
         f"str(os.getpid()), 'llm={url}'], start_new_session=True); print(p.pid)", str(out)],
        capture_output=True, text=True, check=True, timeout=60)
    child = int(parent.stdout.strip())

    def gone() -> bool:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            return True
        with open(f"/proc/{child}/stat") as f:  # a zombie waits for init to reap it: it stopped all the same
            return f.read().split(") ", 1)[1].startswith("Z")

    until(gone, "the scraper exits after its parent")
    assert out.read_text().count('"e":"reference"') >= 1


def test_a_scraper_that_cannot_start_is_a_problem_of_each_class_not_an_error(tmp_path: Path) -> None:
    (tmp_path / "logs").write_text("a file where the folder should be")
    poller = ServerPoller({"llm": "http://127.0.0.1:9/metrics"}, tmp_path / "logs")
    reason = poller.start()
    assert reason is not None and reason.startswith("the server-metrics scraper did not start: ")
    assert poller.drain() == [] and poller.latest() == {} and poller.stop() == []
    (source,) = poller.sources()
    assert source.problems == {reason: 1} and source.scrapes == 0
