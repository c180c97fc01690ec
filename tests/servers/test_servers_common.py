"""Behaviour every reference server shares: health, models, metrics, errors, CLI, shutdown."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable

import pytest
import requests
from servers_testlib import ROOT, ServerProcess, StartServer, assert_openai_error, make_wav, metric_samples, post

EXPECTED_METRICS = (
    "bench_server_queue_depth",
    "bench_server_in_flight",
    "bench_server_batch_size",
    "bench_server_queue_time_seconds",
    "bench_server_compute_time_seconds",
    "bench_server_requests_total",
    "bench_server_generated_tokens_total",
    "bench_server_ready",
)
ENDPOINT = {
    "llm": "/v1/completions",
    "embedding": "/v1/embeddings",
    "asr": "/v1/audio/transcriptions",
    "synthetic": "/v1/chat/completions",
}


def test_health_live_models_and_ready_line(any_server: ServerProcess) -> None:
    assert requests.get(any_server.url + "/health", timeout=5).json() == {"status": "ready"}
    assert requests.get(any_server.url + "/health/live", timeout=5).status_code == 200
    models = requests.get(any_server.url + "/v1/models", timeout=5).json()
    name = "bench-synthetic" if any_server.kind == "synthetic" else f"bench-{any_server.kind}-tiny"
    assert models["object"] == "list"
    (card,) = models["data"]
    assert card["id"] == name and card["object"] == "model" and card["owned_by"] == "bench-plugin"
    assert isinstance(card["created"], int)
    expected_device = "none" if any_server.kind == "synthetic" else "cpu"
    assert f"bench-server ready: {any_server.kind} {name} on {expected_device}\n" in any_server.output()


def test_metrics_exposition(any_server: ServerProcess) -> None:
    requests.get(any_server.url + "/v1/models", timeout=5)
    resp = requests.get(any_server.url + "/metrics", timeout=5)
    assert resp.status_code == 200
    assert resp.headers["Content-Type"].startswith("text/plain")
    for name in EXPECTED_METRICS:
        assert f"# TYPE {name.removesuffix('_total')}" in resp.text, name
    assert metric_samples(resp.text, "bench_server_ready")["bench_server_ready"] == 1.0
    counted = metric_samples(resp.text, "bench_server_requests_total")
    assert counted['bench_server_requests_total{endpoint="/v1/models",status="200"}'] >= 1


def test_unknown_model_route_and_method(any_server: ServerProcess) -> None:
    endpoint = ENDPOINT[any_server.kind]
    if any_server.kind == "asr":
        resp = post(any_server, endpoint, files={"file": ("a.wav", b"x")}, data={"model": "gpt-nope"})
    else:
        resp = post(
            any_server,
            endpoint,
            {"model": "gpt-nope", "prompt": "hi", "input": "hi", "messages": [{"role": "user", "content": "hi"}]},
        )
    err = assert_openai_error(resp, 404, param="model")
    assert err["code"] == "model_not_found"
    assert_openai_error(post(any_server, "/v1/nowhere", {}), 404)
    assert_openai_error(requests.get(any_server.url + endpoint, timeout=5), 405)


def test_readiness_flips_from_503_to_200(start_server: StartServer) -> None:
    server = start_server("synthetic", "--ready-after-s", "1.0")
    deadline = time.monotonic() + 30
    while server.health() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    resp = requests.get(server.url + "/health", timeout=5)
    assert resp.status_code == 503 and resp.json() == {"status": "loading"}
    assert requests.get(server.url + "/health/live", timeout=5).status_code == 200
    metrics = requests.get(server.url + "/metrics", timeout=5).text
    assert metric_samples(metrics, "bench_server_ready")["bench_server_ready"] == 0.0
    assert server.wait_ready(timeout=10) > 0.3
    assert "bench-server ready: synthetic" in server.output()


@pytest.mark.parametrize("kind", ["synthetic", "llm"])
def test_sigterm_exits_zero_promptly(start_server: StartServer, kind: str) -> None:
    flags = ["--size", "tiny", "--threads", "1", "--device", "cpu"] if kind != "synthetic" else []
    server = start_server(kind, *flags)
    server.wait_ready()
    if kind == "synthetic":  # an open stream must not hold shutdown up
        body = {"prompt": "a b", "max_tokens": 1000, "stream": True}
        stream = requests.post(server.url + "/v1/completions", json=body, stream=True, timeout=10)
        next(stream.iter_lines())
    start = time.monotonic()
    assert server.stop(timeout=5) == 0
    assert time.monotonic() - start < 2.0


@pytest.mark.parametrize(
    "argv",
    [
        ["llm", "--size", "huge"],
        ["llm", "--device", "tpu"],
        ["llm", "--dtype", "int8"],
        ["llm", "--max-batch-size", "0"],
        ["llm", "--max-model-len", "4"],
        ["embedding", "--max-wait-ms", "-1"],
        ["embedding", "--max-batch-tokens", "0"],
        ["asr", "--tokens-per-second", "100"],
        ["llm", "--device", "cpu", "--cuda-graphs"],
        ["asr", "--device", "cpu", "--cuda-graphs"],
        ["synthetic", "--slow-fraction", "2"],
        ["synthetic", "--port", "70000"],
        ["synthetic", "--startup-device-ms", "100"],  # no --shared-device to hold
        ["nonsense"],
    ],
)
def test_bad_flags_exit_2(argv: list[str]) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "bench_plugin.servers", *argv],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert "error:" in result.stderr


def test_embedding_batch_limit_defaults_by_device() -> None:
    from bench_plugin.servers.__main__ import _validate, build_parser

    parser = build_parser()
    args = parser.parse_args(["embedding", "--device", "cpu"])
    _validate(parser, args)
    assert (args.max_batch_size, args.max_batch_tokens) == (32, 16384)
    args = parser.parse_args(["embedding", "--device", "cpu", "--max-batch-size", "7"])
    _validate(parser, args)
    assert args.max_batch_size == 7
    assert parser.parse_args(["llm", "--no-cuda-graphs"]).cuda_graphs is False


def test_synthetic_does_not_import_torch() -> None:
    code = (
        "import sys, bench_plugin.servers.__main__ as m, bench_plugin.servers.synthetic;"
        "assert 'torch' not in sys.modules, 'torch imported'"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, timeout=60)


def test_load_failure_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    from servers_testlib import free_port

    from bench_plugin.servers.app import ServerState, create_app, serve
    from bench_plugin.servers.metrics import ServerMetrics

    class Broken:
        def start(self, on_ready: object, on_error: Callable[[BaseException], object]) -> None:
            on_error(RuntimeError("CUDA out of memory"))

        def stop(self) -> None:
            pass

    state = ServerState("llm", "bench-llm-x", "cpu", ServerMetrics())
    assert serve(create_app(state), state, Broken(), "127.0.0.1", free_port()) == 1
    assert "failed to load" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["llm", "--device", "tpu"], ["llm", "--device", "cpu", "--cuda-graphs"],
                                  ["embedding", "--device", "cpu", "--memory-limit-mib", "64"],
                                  ["asr", "--device", "cpu", "--stream-priority", "low"]])
def test_what_the_flags_alone_refuse_is_refused_before_torch_is_imported(argv: list[str]) -> None:
    # importing torch takes seconds: a refusal the flags decide must not wait for it
    probe = ("import sys\nfrom bench_plugin.servers.__main__ import main\n"
             f"try:\n    main({argv!r})\nexcept SystemExit as exc:\n    print(exc.code, 'torch' in sys.modules)\n")
    result = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60,
                            check=False)
    assert result.stdout.split() == ["2", "False"], result.stdout + result.stderr
    assert "error:" in result.stderr and "Traceback" not in result.stderr, result.stderr


@pytest.mark.parametrize(("given", "expected"), [(None, "PASSIVE"), ("ACTIVE", "ACTIVE")])
def test_openmp_threads_sleep_between_regions_unless_the_caller_chose(given: str | None, expected: str) -> None:
    # libgomp reads OMP_WAIT_POLICY once, when torch loads it: the server must set it before that import
    probe = ("import importlib, os, sys\nfrom bench_plugin.servers import __main__ as m\n"
             "def seen(name):\n    print(os.environ.get('OMP_WAIT_POLICY'), 'torch' in sys.modules)\n"
             "    raise SystemExit(0)\n"
             "m.importlib = type('I', (), {'import_module': staticmethod(seen)})\n"
             "m.main(['llm', '--device', 'cpu'])\n")
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    if given is not None:
        env["OMP_WAIT_POLICY"] = given
    result = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60,
                            check=False, env=env)
    assert result.stdout.split() == [expected, "False"], result.stdout + result.stderr


BODIES = {
    "llm": {"model": "bench-llm-tiny", "prompt": "hello there", "max_tokens": 4},
    "embedding": {"model": "bench-embedding-tiny", "input": ["one two three", "four five"]},
    "synthetic": {"model": "bench-synthetic", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3},
}


def test_each_request_is_split_into_queue_and_compute_time(any_server: ServerProcess) -> None:
    """Every served request is observed once in each histogram; a reply that is not streamed says its own two
    parts in TEI's headers (milliseconds), and they fit within the time the client waited for it."""
    def counts() -> tuple[float, float]:
        page = requests.get(any_server.url + "/metrics", timeout=5).text
        return (metric_samples(page, "bench_server_queue_time_seconds")["bench_server_queue_time_seconds_count"],
                metric_samples(page, "bench_server_compute_time_seconds")["bench_server_compute_time_seconds_count"])

    before = counts()
    started = time.perf_counter()
    if any_server.kind == "asr":
        resp = requests.post(any_server.url + ENDPOINT["asr"], files={"file": ("a.wav", make_wav(1.0))},
                             data={"model": "bench-asr-tiny"}, timeout=60)
    else:
        resp = post(any_server, ENDPOINT[any_server.kind], BODIES[any_server.kind])
    waited_ms = (time.perf_counter() - started) * 1000.0
    assert resp.status_code == 200, resp.text
    after = counts()
    assert (after[0] - before[0], after[1] - before[1]) == (1, 1)
    if any_server.kind == "llm":
        assert "x-queue-time" not in resp.headers  # its engine keeps the split in its histograms alone
    else:
        queue, compute = float(resp.headers["x-queue-time"]), float(resp.headers["x-inference-time"])
        assert queue >= 0.0 and compute > 0.0 and queue + compute <= waited_ms
