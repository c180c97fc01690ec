"""Fixtures for the reference-server tests: one tiny server of each kind per session.

Servers are real processes on loopback ports, started lazily on first use and always
terminated in the fixture finalizer, even when a test fails.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from servers_testlib import (
    SYNTHETIC_ITL_MS,
    SYNTHETIC_LATENCY_MS,
    SYNTHETIC_TTFT_MS,
    TORCH_FLAGS,
    ServerProcess,
    StartServer,
)


def _session_server(tmp_path_factory: pytest.TempPathFactory, kind: str, args: list[str]) -> Iterator[ServerProcess]:
    server = ServerProcess(kind, args, tmp_path_factory.mktemp(kind))
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def llm_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """Tiny LLM server (8 KV slots)."""
    yield from _session_server(tmp_path_factory, "llm", [*TORCH_FLAGS, "--max-batch-size", "8"])


@pytest.fixture(scope="session")
def embedding_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """Tiny embedding server."""
    yield from _session_server(tmp_path_factory, "embedding", [*TORCH_FLAGS, "--max-wait-ms", "5"])


@pytest.fixture(scope="session")
def asr_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """Tiny ASR server, 3 tokens per second of audio."""
    yield from _session_server(tmp_path_factory, "asr", [*TORCH_FLAGS, "--tokens-per-second", "3"])


@pytest.fixture(scope="session")
def synthetic_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Timing log path of the session synthetic server."""
    return tmp_path_factory.mktemp("synthetic-log") / "timing.jsonl"


@pytest.fixture(scope="session")
def synthetic_server(tmp_path_factory: pytest.TempPathFactory, synthetic_log: Path) -> Iterator[ServerProcess]:
    """Synthetic server with known TTFT/ITL/latency and a timing log."""
    args = [
        "--ttft-ms", str(SYNTHETIC_TTFT_MS), "--itl-ms", str(SYNTHETIC_ITL_MS),
        "--latency-ms", str(SYNTHETIC_LATENCY_MS), "--timing-log", str(synthetic_log),
    ]  # fmt: skip
    yield from _session_server(tmp_path_factory, "synthetic", args)


@pytest.fixture
def start_server(tmp_path: Path) -> Iterator[StartServer]:
    """Factory for per-test servers (not waited on); all are stopped at test end."""
    started: list[ServerProcess] = []

    def start(kind: str, *args: str) -> ServerProcess:
        server = ServerProcess(kind, list(args), tmp_path)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture(params=["llm", "embedding", "asr", "synthetic"])
def any_server(request: pytest.FixtureRequest) -> ServerProcess:
    """Each session server in turn."""
    server: ServerProcess = request.getfixturevalue(f"{request.param}_server")
    return server
