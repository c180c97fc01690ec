"""A real Prometheus for the tests: Debian's /usr/bin/prometheus on loopback, scraping pages the test serves.

PageServer stands in for dcgm-exporters: it serves, at one path per exporter, text that the test can
change between scrapes. PrometheusProcess writes a scrape config (one job per path, a 1 s scrape
interval, optional target labels and honor_labels), starts the binary on 127.0.0.1 with a free port
and a temporary TSDB, waits until /-/ready answers, and stops it (terminate, wait). Every wait polls a
condition with a generous deadline: a busy 2-core machine is slow, never wrong.

The Prometheus binary is required: CI installs it (``make test`` does), and where it is missing the
fixture FAILS, naming the install step, rather than skipping.
"""

from __future__ import annotations

import os
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import requests
import yaml

from bench_plugin.telemetry.exposition import CONTENT_TYPE

PROMETHEUS = Path(os.environ.get("BENCH_PROMETHEUS", "/usr/bin/prometheus"))
SCRAPE_INTERVAL_S = 1.0
"""Scrape interval and timeout: loopback pages take milliseconds, so a scrape never times out."""
START_DEADLINE_S = 120.0
INGEST_DEADLINE_S = 90.0


def missing_prometheus() -> str | None:
    """Why the real Prometheus cannot run here (one line), or None when it can."""
    if not PROMETHEUS.is_file():
        return (f"{PROMETHEUS} not found: these tests run a real Prometheus; "
                "install it with `apt-get install -y prometheus` (make test does) or set BENCH_PROMETHEUS")
    return None


def free_port() -> int:
    """A TCP port nothing listens on at 127.0.0.1 now (the caller binds it soon after)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PageServer:
    """Serves text at paths on a loopback port; ``set(path, text)`` changes what the next scrape gets."""

    def __init__(self) -> None:
        self._pages: dict[str, str] = {}
        self._lock = threading.Lock()
        self.scrapes: dict[str, int] = {}
        pages, lock, scrapes = self._pages, self._lock, self.scrapes

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                with lock:
                    text = pages.get(path)
                    scrapes[path] = scrapes.get(path, 0) + 1
                body = (text if text is not None else f"no page at {path}\n").encode()
                self.send_response(200 if text is not None else 404)
                self.send_header("Content-Type", CONTENT_TYPE)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                return  # a scrape a second per job would bury pytest's output

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.address = f"127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, name="page-server", daemon=True).start()

    def set(self, path: str, text: str) -> None:
        """Serve ``text`` at ``path`` from now on."""
        with self._lock:
            self._pages[path] = text

    def close(self) -> None:
        """Stop serving."""
        self._server.shutdown()
        self._server.server_close()


@dataclass(frozen=True)
class ScrapeJob:
    """One scrape job: a path on the PageServer, with the target labels and honor_labels a cluster would set."""

    name: str
    path: str
    target_labels: dict[str, str] = field(default_factory=dict)
    honor_labels: bool = False
    target: str | None = None
    """``host:port`` to scrape instead of the PageServer (a real server's own /metrics)."""


def scrape_config(jobs: list[ScrapeJob], address: str) -> dict[str, Any]:
    """The prometheus.yml for ``jobs`` scraping the PageServer at ``address``."""
    interval = f"{SCRAPE_INTERVAL_S:g}s"
    return {
        "global": {"scrape_interval": interval, "scrape_timeout": interval, "evaluation_interval": "1m"},
        "scrape_configs": [
            {"job_name": job.name, "metrics_path": job.path, "honor_labels": job.honor_labels,
             "static_configs": [{"targets": [job.target or address], "labels": dict(job.target_labels)}]}
            for job in jobs
        ],
    }


class PrometheusProcess:
    """A Prometheus server process on 127.0.0.1 with its own config and TSDB under ``workdir``."""

    def __init__(self, workdir: Path, jobs: list[ScrapeJob], address: str) -> None:
        self.workdir = workdir
        self.config = workdir / "prometheus.yml"
        self.config.write_text(yaml.safe_dump(scrape_config(jobs, address), sort_keys=False))
        self.log = workdir / "prometheus.log"
        self.url = ""
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self, attempts: int = 3) -> str:
        """Start it and wait until it is ready; returns its URL. A port taken meanwhile is retried."""
        problem = missing_prometheus()
        if problem:
            raise RuntimeError(problem)
        for _ in range(attempts):
            port = free_port()
            with open(self.log, "ab") as log:
                self._proc = subprocess.Popen(
                    [str(PROMETHEUS), f"--config.file={self.config}", f"--storage.tsdb.path={self.workdir / 'tsdb'}",
                     f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
                    cwd=self.workdir, stdout=log, stderr=subprocess.STDOUT)
            self.url = f"http://127.0.0.1:{port}"
            if self._wait_ready():
                return self.url
            self.stop()
        raise RuntimeError(f"prometheus did not become ready in {attempts} attempts; log:\n{self.log_tail()}")

    def _wait_ready(self) -> bool:
        deadline = time.monotonic() + START_DEADLINE_S
        while time.monotonic() < deadline:
            assert self._proc is not None
            if self._proc.poll() is not None:
                return False  # exited (the port was taken, most likely): the caller retries
            try:
                ready = requests.get(f"{self.url}/-/ready", timeout=5).status_code == 200
            except requests.RequestException:
                ready = False  # not listening yet: that is what we are waiting for
            if ready:
                return True
            time.sleep(0.2)
        raise RuntimeError(f"prometheus not ready within {START_DEADLINE_S:g} s; log:\n{self.log_tail()}")

    def stop(self) -> None:
        """Terminate it and wait for it to exit (killed if it does not within 30 s)."""
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)

    def log_tail(self, chars: int = 3000) -> str:
        """The end of its log, for a failure message."""
        return self.log.read_text(errors="replace")[-chars:] if self.log.is_file() else "(no log)"

    def samples(self, selector: str, lookback: str = "5m") -> list[tuple[dict[str, str], list[tuple[float, float]]]]:
        """The raw samples (label set, [(t, value)]) ingested for ``selector`` within ``lookback`` of now."""
        response = requests.get(f"{self.url}/api/v1/query", params={"query": f"{selector}[{lookback}]"}, timeout=10)
        response.raise_for_status()
        return [({str(k): str(v) for k, v in s["metric"].items()}, [(float(t), float(v)) for t, v in s["values"]])
                for s in response.json()["data"]["result"]]

    def wait_for(self, what: str, condition: Callable[[], bool], deadline_s: float = INGEST_DEADLINE_S) -> None:
        """Poll ``condition`` until it holds; fail naming ``what`` (with the log's end) past the deadline."""
        deadline = time.monotonic() + deadline_s
        while not condition():
            if time.monotonic() > deadline:
                raise AssertionError(f"prometheus: {what} not seen within {deadline_s:g} s; log:\n{self.log_tail()}")
            time.sleep(0.2)
