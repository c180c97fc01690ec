"""The synthetic calibration server: exact latencies, timing log, slow requests, routes."""

from __future__ import annotations

import json
import math
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import requests
from conftest import SYNTHETIC_ITL_MS, SYNTHETIC_LATENCY_MS, SYNTHETIC_TTFT_MS, StartServer
from servers_testlib import ServerProcess, assert_openai_error, make_wav, post, stream_sse

TOLERANCE_MS = 8.0
LOG_FIELDS = {
    "seq", "request_id", "endpoint", "received_s", "first_token_s", "end_s", "ttft_ms", "e2e_ms", "tpot_ms",
    "output_tokens", "slow", "status", "queue_ms",
}  # fmt: skip


def _log_lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _wait_for_lines(path: Path, count: int) -> list[dict[str, object]]:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if path.exists() and len(lines := _log_lines(path)) >= count:
            return lines
        time.sleep(0.02)
    raise AssertionError(f"timing log has fewer than {count} lines")


def test_stream_timing_matches_flags(synthetic_server: ServerProcess) -> None:
    n = 6
    body = {"messages": [{"role": "user", "content": "a b c"}], "max_tokens": n, "stream": True}
    result = stream_sse(synthetic_server.url + "/v1/chat/completions", body)
    content = [(t, json.loads(d)) for t, d in result.events if d != "[DONE]"]
    token_times = [t * 1000 for t, c in content if c["choices"] and c["choices"][0]["delta"].get("content")]
    assert len(token_times) == n
    assert abs(token_times[0] - SYNTHETIC_TTFT_MS) < TOLERANCE_MS, token_times
    gaps = np.diff(token_times)
    assert all(abs(g - SYNTHETIC_ITL_MS) < TOLERANCE_MS for g in gaps), gaps
    assert abs(statistics.mean(gaps) - SYNTHETIC_ITL_MS) < 3.0, gaps


def _timed(server: ServerProcess, log: Path, configured_ms: float, path: str, **kwargs: Any) -> requests.Response:
    """POST and check the latency: the server's own record within TOLERANCE_MS of ``configured_ms``.

    From the client the request can only take longer (upload, the multipart parse before the
    server's clock starts, a busy host), never less; that bound is checked too. The upper side is
    the server's: its timing log, not the wall clock of a shared 2-core machine.
    """
    before = len(_log_lines(log))
    start = time.perf_counter()
    resp = post(server, path, **kwargs)
    elapsed = (time.perf_counter() - start) * 1000
    record = _wait_for_lines(log, before + 1)[-1]
    assert record["endpoint"] == path, record
    assert abs(float(str(record["e2e_ms"])) - configured_ms) < TOLERANCE_MS, record
    assert elapsed >= configured_ms - 0.5, f"{path}: answered in {elapsed:.1f} ms, under the configured {configured_ms}"
    return resp


def test_non_stream_and_other_latencies(synthetic_server: ServerProcess, synthetic_log: Path) -> None:
    # One untimed request per endpoint first: the first use of an endpoint in a fresh server pays
    # one-off costs (imports, allocations) that are not the configured latency under test.
    post(synthetic_server, "/v1/completions", {"prompt": "warm", "max_tokens": 1})
    post(synthetic_server, "/v1/embeddings", {"input": "warm"})
    post(synthetic_server, "/v1/audio/transcriptions", files={"file": ("w.wav", make_wav(0.5))})
    body = _timed(synthetic_server, synthetic_log, SYNTHETIC_TTFT_MS + 3 * SYNTHETIC_ITL_MS, "/v1/completions",
                  json={"prompt": "one two three four", "max_tokens": 4}).json()
    assert body["usage"] == {"prompt_tokens": 4, "completion_tokens": 4, "total_tokens": 8}
    assert len(body["choices"][0]["text"].split()) == 4

    emb = _timed(synthetic_server, synthetic_log, SYNTHETIC_LATENCY_MS, "/v1/embeddings",
                 json={"input": ["x y", "x y"]}).json()
    vectors = np.array([d["embedding"] for d in emb["data"]])
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(vectors[0], vectors[1])

    resp = _timed(synthetic_server, synthetic_log, SYNTHETIC_LATENCY_MS, "/v1/audio/transcriptions",
                  files={"file": ("a.wav", make_wav(2.2))})
    assert len(resp.json()["text"].split()) == math.ceil(2.2 * 3)


def test_timing_log_one_line_per_request(synthetic_server: ServerProcess, synthetic_log: Path) -> None:
    before = len(_log_lines(synthetic_log)) if synthetic_log.exists() else 0
    stream_sse(synthetic_server.url + "/v1/completions", {"prompt": "a", "max_tokens": 5, "stream": True})
    post(synthetic_server, "/v1/embeddings", {"input": "a"})
    assert_openai_error(post(synthetic_server, "/v1/completions", {"prompt": "a", "max_tokens": 0}), 400)
    lines = _wait_for_lines(synthetic_log, before + 3)[before:]
    assert len(lines) == 3
    assert all(set(line) == LOG_FIELDS for line in lines)
    assert len({line["seq"] for line in _log_lines(synthetic_log)}) == len(_log_lines(synthetic_log))
    stream, emb, bad = lines
    assert stream["endpoint"] == "/v1/completions" and stream["status"] == 200 and stream["output_tokens"] == 5
    assert abs(float(stream["ttft_ms"]) - SYNTHETIC_TTFT_MS) < 5.0  # type: ignore[arg-type]
    assert abs(float(stream["tpot_ms"]) - SYNTHETIC_ITL_MS) < 5.0  # type: ignore[arg-type]
    assert stream["first_token_s"] > stream["received_s"]  # type: ignore[operator]
    expected_e2e = SYNTHETIC_TTFT_MS + 4 * SYNTHETIC_ITL_MS
    assert abs(float(stream["e2e_ms"]) - expected_e2e) < 5.0  # type: ignore[arg-type]
    assert emb["endpoint"] == "/v1/embeddings" and emb["first_token_s"] is None and emb["ttft_ms"] is None
    assert abs(float(emb["e2e_ms"]) - SYNTHETIC_LATENCY_MS) < 5.0  # type: ignore[arg-type]
    assert bad["status"] == 400 and bad["output_tokens"] == 0 and bad["slow"] is False


def test_slow_fraction_adds_extra(start_server: StartServer, tmp_path: Path) -> None:
    log = tmp_path / "slow.jsonl"
    server = start_server("synthetic", "--ttft-ms", "10", "--itl-ms", "1", "--latency-ms", "10",
                          "--slow-fraction", "0.5", "--slow-extra-ms", "40", "--seed", "7",
                          "--timing-log", str(log))  # fmt: skip
    server.wait_ready()
    for _ in range(12):
        post(server, "/v1/completions", {"prompt": "a", "max_tokens": 2})
    post(server, "/v1/embeddings", {"input": "a"})
    lines = _wait_for_lines(log, 13)
    slow = [bool(line["slow"]) for line in lines]
    assert 0 < sum(slow) < len(slow)
    for line in lines[:12]:
        expected = 50.0 if line["slow"] else 10.0
        assert abs(float(line["ttft_ms"]) - expected) < 5.0, line  # type: ignore[arg-type]
    emb = lines[12]
    assert abs(float(emb["e2e_ms"]) - (50.0 if emb["slow"] else 10.0)) < 5.0  # type: ignore[arg-type]
    # The slow choice depends only on the seed and the sequence number.
    server.stop()
    log2 = tmp_path / "slow2.jsonl"
    again = start_server("synthetic", "--ttft-ms", "1", "--itl-ms", "1", "--slow-fraction", "0.5",
                         "--seed", "7", "--timing-log", str(log2))  # fmt: skip
    again.wait_ready()
    for _ in range(12):
        post(again, "/v1/chat/completions", {"messages": [{"role": "user", "content": "a"}], "max_tokens": 1})
    assert [bool(line["slow"]) for line in _wait_for_lines(log2, 12)] == slow[:12]


@pytest.mark.parametrize(
    ("path", "body", "param"),
    [
        ("/v1/completions", {"prompt": "a", "n": 2}, "n"),
        ("/v1/chat/completions", {"messages": []}, "messages"),
        ("/v1/embeddings", {"input": ""}, "input"),
        ("/v1/embeddings", {"input": "a", "dimensions": 3}, "dimensions"),
    ],
)
def test_same_validation_as_model_servers(
    synthetic_server: ServerProcess, path: str, body: dict[str, object], param: str
) -> None:
    assert_openai_error(post(synthetic_server, path, body), 400, param=param)


def test_concurrency_is_unlimited(synthetic_server: ServerProcess) -> None:
    from concurrent.futures import ThreadPoolExecutor

    def one(_: int) -> float:
        start = time.perf_counter()
        requests.post(synthetic_server.url + "/v1/embeddings", json={"input": "a"}, timeout=10).raise_for_status()
        return (time.perf_counter() - start) * 1000

    with ThreadPoolExecutor(16) as pool:
        latencies = list(pool.map(one, range(16)))
    assert max(latencies) < SYNTHETIC_LATENCY_MS + 40, latencies


def test_max_concurrency_queues_the_rest(start_server: StartServer, tmp_path: Path) -> None:
    """With one slot and 40 ms per request, four at once end ~40, 80, 120, 160 ms after arrival."""
    from concurrent.futures import ThreadPoolExecutor

    log = tmp_path / "queue.jsonl"
    server = start_server("synthetic", "--latency-ms", "40", "--max-concurrency", "1", "--timing-log", str(log))
    server.wait_ready()
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda _: post(server, "/v1/embeddings", {"input": "a"}), range(4)))
    lines = sorted(_wait_for_lines(log, 4), key=lambda line: float(line["e2e_ms"]))  # type: ignore[arg-type]
    for k, line in enumerate(lines):
        assert abs(float(line["e2e_ms"]) - 40.0 * (k + 1)) < 15.0, lines  # type: ignore[arg-type]
        assert abs(float(line["queue_ms"]) - 40.0 * k) < 15.0, lines  # type: ignore[arg-type]
