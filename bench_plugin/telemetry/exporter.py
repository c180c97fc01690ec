"""A DCGM-named /metrics exporter for GPU hosts without DCGM, served from the NVML sampler.

    python -m bench_plugin.telemetry.exporter [--port 9400] [--interval 1] [--devices cuda:0,cuda:1]

It serves ``/metrics`` with dcgm-exporter's metric names, types, HELP texts and labels (exposition.py
says which dcgm-exporter files that follows), plus ``/health``, so a Prometheus scrape config,
dashboard or PromQL written for dcgm-exporter works against it unchanged; point DcgmScraper at it
like at a real one. Per-process series (``bench_process_*``, label ``pid``) come in addition.

On a host without NVML it exits with status 2 and one line saying why (a CPU host is not an error
worth a traceback); a port it cannot bind exits 1, also with one line.
"""

from __future__ import annotations

import argparse
import logging
import signal
import socket
import sys
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import FrameType

from bench_plugin.telemetry.exposition import CONTENT_TYPE, render
from bench_plugin.telemetry.nvml import NvmlSampler

PROG = "bench_plugin.telemetry.exporter"
EXIT_NO_NVML = 2


class _Handler(BaseHTTPRequestHandler):
    """GET /metrics renders a page; GET /health says OK, as dcgm-exporter's does."""

    page: Callable[[], str]

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/metrics":
            self._reply(200, self.page(), CONTENT_TYPE)
        elif path == "/health":
            self._reply(200, "OK", "text/plain; charset=utf-8")
        else:
            self._reply(404, "not found: try /metrics\n", "text/plain; charset=utf-8")

    def _reply(self, status: int, text: str, content_type: str) -> None:
        body = text.encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Content-Type-Options", "nosniff")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        # a scrape every few seconds would flood stderr; errors still go through log_error
        return


def make_server(host: str, port: int, page: Callable[[], str]) -> ThreadingHTTPServer:
    """An HTTP server (not yet serving) whose /metrics is ``page()``; port 0 picks a free one."""
    handler = type("MetricsHandler", (_Handler,), {"page": staticmethod(page)})
    server = ThreadingHTTPServer((host, port), handler)
    server.daemon_threads = True
    return server


def sampler_page(sampler: NvmlSampler, hostname: str | None) -> Callable[[], str]:
    """The /metrics page of a running sampler: its latest poll, labelled like dcgm-exporter."""

    def page() -> str:
        return render(
            sampler.latest(), sampler.devices_info(), hostname=hostname, driver_version=sampler.driver_version
        )

    return page


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=f"python -m {PROG}", description=__doc__.split("\n", 1)[0])
    parser.add_argument("--port", type=int, default=9400, help="port to serve on (dcgm-exporter's: 9400)")
    parser.add_argument("--address", default="", help="address to bind (default: all, as dcgm-exporter)")
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between NVML polls (default 1)")
    parser.add_argument("--devices", default=None, help="comma-separated cuda:N / GPU UUIDs (default: all)")
    parser.add_argument("--no-hostname", action="store_true", help="omit the Hostname label, as dcgm-exporter's")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run the exporter until SIGINT or SIGTERM; the exit status."""
    args = _parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format=f"{PROG}: %(message)s")
    devices = [d.strip() for d in args.devices.split(",") if d.strip()] if args.devices else None
    sampler = NvmlSampler(devices, interval_s=args.interval, max_buffered=0)
    # ask first: start() would also log the reason, and a CPU host deserves exactly one line
    availability = sampler.available()
    if availability:
        availability = sampler.start()
    if not availability:
        print(f"{PROG}: {availability.reason}; nothing to export", file=sys.stderr)
        return EXIT_NO_NVML
    try:
        hostname = None if args.no_hostname else socket.gethostname()
        server = make_server(args.address, args.port, sampler_page(sampler, hostname))
    except OSError as exc:
        sampler.stop()
        print(f"{PROG}: cannot serve on port {args.port}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    stopping = threading.Event()

    def _stop(signum: int, frame: FrameType | None) -> None:
        # shutdown() waits for serve_forever to return, so it must run outside the serving thread
        if not stopping.is_set():
            stopping.set()
            threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGINT, _stop)
    signal.signal(signal.SIGTERM, _stop)
    names = ", ".join(info.key for info in sampler.devices_info())
    print(f"{PROG}: serving {names} on :{server.server_address[1]}/metrics every {args.interval:g} s", file=sys.stderr)
    try:
        server.serve_forever()
    finally:
        server.server_close()
        sampler.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
