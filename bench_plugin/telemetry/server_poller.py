"""Server poller: each class's server metrics through a segment, read by a scrape process of its own.

The campaign's handle on telemetry/server_scrape.py::

    poller = ServerPoller({"llm": "http://127.0.0.1:8001/metrics"}, workdir, interval_s=0.5)
    poller.start()
    points = poller.drain()        # at each stage end: the ServerPoints read since the last drain
    poller.latest()                # class -> quantity -> the last value read (the live view)
    points = poller.stop()         # at the segment's end: the rest
    poller.sources()               # per class: URL, engine, the series each quantity came from, problems

The scrape process appends JSON lines to a file in ``workdir``; the poller reads the complete lines added
since it last looked, so nothing here waits on a server or parses a page. A class's server is read from
the segment's start, while it still loads: what failed before its first page counts only where no page ever
came. Nothing here fails a campaign: a scraper that cannot start, or an endpoint that never answers, is a
problem in ``sources()``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from bench_plugin.results.server_rows import ServerPoint, ServerSource

logger = logging.getLogger(__name__)

INTERVAL_S = 0.5
"""Each class's metrics are read twice a second."""

OFF = "off"
"""A class's ``metrics_url`` that turns its metrics off."""
THROUGH_PROMETHEUS = "prometheus"
"""A class's ``metrics_url`` that reads them from the campaign's Prometheus instead (telemetry/server_prometheus.py)."""


def metrics_url(server_url: str, template: str | None) -> str | None:
    """Where a class's metrics are read directly: ``template`` with ``{host}`` the server's host, or, unset,
    ``/metrics`` at the server's own scheme, host and port (any path of the server's URL, such as ``/v1``, dropped).
    None: not read directly (off, or through Prometheus)."""
    if template in (OFF, THROUGH_PROMETHEUS):
        return None
    parts = urlsplit(server_url)
    if template:
        return template.replace("{host}", parts.hostname or "127.0.0.1")
    return urlunsplit((parts.scheme or "http", parts.netloc, "/metrics", "", ""))


class ServerPoller:
    """One segment's scrape process and what it has said so far."""

    def __init__(self, targets: dict[str, str], workdir: Path, interval_s: float = INTERVAL_S) -> None:
        self.targets = dict(targets)
        self.interval_s = interval_s
        self.path = workdir / f"server-metrics-{os.getpid()}-{time.monotonic_ns()}.jsonl"
        self._stderr = self.path.with_suffix(".err")
        self._process: subprocess.Popen[bytes] | None = None
        self._offset = 0
        self._latest: dict[str, dict[str, float]] = {}
        self._engines: dict[str, str | None] = dict.fromkeys(self.targets)
        self._names: dict[str, dict[str, str]] = {w: {} for w in self.targets}
        self._scrapes: dict[str, int] = dict.fromkeys(self.targets, 0)
        self._problems: dict[str, dict[str, int]] = {w: {} for w in self.targets}
        self._early: dict[str, dict[str, int]] = {w: {} for w in self.targets}
        self._pending: list[ServerPoint] = []

    def start(self) -> str | None:
        """Start the scrape process; the reason when it could not be started (nothing is read then)."""
        if not self.targets:
            return None
        command = [sys.executable, "-m", "bench_plugin.telemetry.server_scrape", "--out", str(self.path),
                   "--interval", f"{self.interval_s:g}", "--parent", str(os.getpid()),
                   *(f"{w}={u}" for w, u in self.targets.items())]
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.touch()
            with self._stderr.open("wb") as err:  # a file, not a pipe: nothing it writes can ever block it
                self._process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                                 stderr=err)
        except OSError as exc:
            reason = f"the server-metrics scraper did not start: {exc}"
            for workload in self.targets:
                self._problems[workload][reason] = 1
            return reason
        return None

    def drain(self) -> list[ServerPoint]:
        """The points read since the last drain, oldest first."""
        self._read()
        points, self._pending = self._pending, []
        return points

    def _read(self) -> None:
        """Take the complete lines the scraper added since the last look."""
        try:
            with self.path.open("rb") as f:
                f.seek(self._offset)
                data = f.read()
        except OSError:
            return
        end = data.rfind(b"\n") + 1  # a line still being written waits for the next look
        self._offset += end
        for raw in data[:end].splitlines():
            try:
                self._take(json.loads(raw), self._pending)
            except (ValueError, KeyError, TypeError, AssertionError):
                continue  # not one of the scraper's lines: never written by it, so nothing to count

    def _take(self, line: dict[str, object], points: list[ServerPoint]) -> None:
        workload, t = str(line["w"]), float(line["t"])  # type: ignore[arg-type]
        if workload not in self.targets:
            return
        problem = line.get("p")
        if problem is not None:
            # before its first page a server is still starting: what failed then is said only if none ever came
            problems = self._problems[workload] if self._scrapes[workload] else self._early[workload]
            problems[str(problem)] = problems.get(str(problem), 0) + 1
            return
        self._scrapes[workload] += 1
        self._engines[workload] = str(line["e"])
        names = line.get("n")
        if isinstance(names, dict):
            self._names[workload] = {str(k): str(v) for k, v in names.items()}
        values = line.get("v")
        assert isinstance(values, dict)
        latest = self._latest.setdefault(workload, {})
        for quantity, value in values.items():
            points.append(ServerPoint(t, workload, str(quantity), float(value)))
            latest[str(quantity)] = float(value)

    def latest(self) -> dict[str, dict[str, float]]:
        """Class -> quantity -> its last value read (after reading what the scraper added)."""
        self._read()
        return {w: dict(v) for w, v in self._latest.items()}

    def stop(self) -> list[ServerPoint]:
        """Stop the scrape process and return what it read since the last drain."""
        process, self._process = self._process, None
        if process is not None:
            process.terminate()
            try:
                process.wait(timeout=5.0)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            if process.returncode not in (0, -15):
                last = self._stderr.read_text(errors="replace").strip().splitlines()[-1:]
                reason = f"the server-metrics scraper ended with status {process.returncode}: {' '.join(last)}"
                for workload in self.targets:
                    self._problems[workload][reason] = self._problems[workload].get(reason, 0) + 1
        points = self.drain()
        for done in (self.path, self._stderr):
            with contextlib.suppress(OSError):
                done.unlink(missing_ok=True)
        return points

    def sources(self) -> list[ServerSource]:
        """Per class: where its metrics came from, the engine, the series read and what went wrong."""
        return [ServerSource(workload=w, url=u, engine=self._engines[w], names=dict(self._names[w]),
                             scrapes=self._scrapes[w],
                             problems={**(self._early[w] if not self._scrapes[w] else {}), **self._problems[w]})
                for w, u in self.targets.items()]
