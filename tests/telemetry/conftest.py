"""Fixtures for the telemetry tests: the H200 recording, a loopback HTTP server (see telemetry_testlib), and a
real Prometheus scraping stand-in dcgm-exporters (see prometheus_testlib)."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from prometheus_testlib import PageServer, PrometheusProcess, ScrapeJob, missing_prometheus
from telemetry_testlib import Recorded, load_recorded


@pytest.fixture(scope="session")
def recorded() -> Recorded:
    """The readings recorded on the H200, with its device identity."""
    return load_recorded()


@pytest.fixture
def http_page() -> Iterator[Callable[[Callable[[], tuple[int, str]]], str]]:
    """Serve ``respond() -> (status, body)`` at /metrics on a loopback port; returns the URL."""
    servers: list[ThreadingHTTPServer] = []

    def serve(respond: Callable[[], tuple[int, str]]) -> str:
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                status, body = respond()
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: object) -> None:
                return  # keep pytest's output to failures

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        servers.append(server)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{server.server_address[1]}/metrics"

    yield serve
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def page_server() -> Iterator[PageServer]:
    """Stand-in dcgm-exporters: changeable text at one path each, on a loopback port."""
    server = PageServer()
    yield server
    server.close()


@pytest.fixture(scope="module")
def start_prometheus(
    tmp_path_factory: pytest.TempPathFactory, page_server: PageServer
) -> Iterator[Callable[[list[ScrapeJob]], PrometheusProcess]]:
    """Start a REAL Prometheus scraping ``page_server`` with the given jobs; stopped after the module.

    Fails (does not skip) where /usr/bin/prometheus is missing: CI installs it.
    """
    problem = missing_prometheus()
    if problem:
        pytest.fail(problem, pytrace=False)
    started: list[PrometheusProcess] = []

    def start(jobs: list[ScrapeJob]) -> PrometheusProcess:
        proc = PrometheusProcess(tmp_path_factory.mktemp("prometheus"), jobs, page_server.address)
        started.append(proc)
        proc.start()
        return proc

    yield start
    for proc in started:
        proc.stop()
