"""Server scrape: a process that reads each class's metrics endpoint on a fixed grid and appends what it read.

    python -m bench_plugin.telemetry.server_scrape --out FILE [--interval 0.5] [--parent PID] CLASS=URL ...

Run by the campaign (telemetry/server_poller.py) in a process of its own, so that fetching and parsing the
pages (a vLLM page is tens of kilobytes of text) never holds the load generator's event loop or its GIL.
Each class is read by its own thread on the grid ``start + k * interval`` (a slow or dead endpoint delays only
its own class; a read that overruns skips the missed ticks), with a timeout of 2 s.

Each read appends one JSON line to ``--out``:

- ``{"t": epoch, "w": class, "e": engine, "v": {quantity: value}}`` for a page read (``"n"``, quantity ->
  the engine's own series, on the class's first such line and whenever it changes);
- ``{"t": epoch, "w": class, "p": problem}`` for a read that failed (unreachable, not a metrics page,
  an engine none of telemetry/engines.py's). A server that answers 404 or 405 has no metrics at that URL:
  its class is not read again (a server that does not export metrics is not asked twice a second all
  campaign long, filling its access log).

It stops on SIGTERM or SIGINT, or once its parent (``--parent``) is gone, so a campaign killed hard leaves
no scraper behind.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import IO
from urllib.parse import urlsplit, urlunsplit

from bench_plugin.telemetry import engines

MAX_TIMEOUT_S = 2.0
NO_METRICS = frozenset({404, 405})
"""HTTP statuses that say the URL has no metrics: the class is not read again."""
MAX_PAGE_BYTES = 16 * 1024 * 1024


def fetch(url: str, timeout_s: float) -> bytes:
    """The body of GET ``url``; OSError (urllib's errors are ones) when there is none or it is not 200."""
    request = urllib.request.Request(url, headers={"Accept": "text/plain"})
    with urllib.request.urlopen(request, timeout=timeout_s) as response:
        body: bytes = response.read(MAX_PAGE_BYTES + 1)
    if len(body) > MAX_PAGE_BYTES:
        raise OSError(f"the page is over {MAX_PAGE_BYTES // (1024 * 1024)} MiB")
    return body


def models_urls(metrics_url: str) -> list[str]:
    """Where infinity's model list may be beside its ``/metrics``: ``/v1/models`` (with ``--url-prefix /v1``, as an
    OpenAI-compatible deployment runs it), then ``/models`` (its default)."""
    parts = urlsplit(metrics_url)
    base = parts.path.rsplit("/", 1)[0]
    return [urlunsplit((parts.scheme, parts.netloc, f"{base}{path}", "", "")) for path in ("/v1/models", "/models")]


class ClassScraper:
    """Reads one class's endpoint: fetch, recognise the engine (once it is known it is kept), map, say."""

    def __init__(self, workload: str, url: str, timeout_s: float, emit: Callable[[dict[str, object]], None],
                 get: Callable[[str, float], bytes] = fetch) -> None:
        self.workload = workload
        self.url = url
        self.timeout_s = timeout_s
        self._emit = emit
        self._get = get
        self._engine: engines.Engine | None = None
        self._names: dict[str, str] | None = None
        self._models: list[str] = models_urls(url)
        self._aside: list[str] = []
        """Problems of this read that did not stop it (infinity's model list), said after its values."""

    def read_once(self) -> bool:
        """One read; its line (values or a problem) is emitted; never raises. False: do not read again."""
        again = True
        self._aside = []
        try:
            line = self._read()
        except Exception as exc:  # one line about it, per read: the parent counts distinct problems
            line = {"p": _problem(exc)}
            if isinstance(exc, urllib.error.HTTPError) and exc.code in NO_METRICS:
                line["p"] = f"{line['p']}: no metrics at this URL, not read again"
                again = False
        now = time.time()
        self._emit({"t": now, "w": self.workload, **line})
        for problem in self._aside:
            self._emit({"t": now, "w": self.workload, "p": problem})
        return again

    def _read(self) -> dict[str, object]:
        text = self._get(self.url, self.timeout_s).decode("utf-8", "replace")
        try:
            page = engines.parse_page(text)
        except ValueError as exc:
            return {"p": f"not a Prometheus metrics page ({exc})"}
        engine = self._engine or engines.recognise(page)
        if engine is None:
            some = ", ".join(sorted(page.totals)[:3]) or "no series at all"
            return {"p": f"no engine recognised among its series ({some}; known: {engines.known_names()})"}
        self._engine = engine
        reading = engines.read(page, engine)
        values = {str(q): v for q, v in reading.values.items()}
        names = {str(q): n for q, n in reading.names.items()}
        if engine.models_json:
            try:
                extra, extra_names = engines.read_models(self._model_list())
            except (OSError, ValueError) as exc:  # the page's values stand; the list's problem is said beside them
                self._aside.append(str(exc) if isinstance(exc, ModelsError) else f"its model list: {_problem(exc)}")
                extra, extra_names = {}, {}
            values.update({str(q): v for q, v in extra.items()})
            names.update({str(q): n for q, n in extra_names.items()})
        line: dict[str, object] = {"e": engine.name, "v": values}
        if names != self._names:
            self._names = names
            line["n"] = names
        return line


    def _model_list(self) -> object:
        """infinity's model list, from the first of its places that answers (kept once found); a place that has
        none (404) is not asked again."""
        while self._models:
            try:
                return json.loads(self._get(self._models[0], self.timeout_s))
            except urllib.error.HTTPError as exc:
                if exc.code not in NO_METRICS or len(self._models) == 1:
                    raise ModelsError(f"its model list ({self._models[0]}): {_problem(exc)}") from None
                self._models.pop(0)
        return None


class ModelsError(OSError):
    """infinity's model list could not be read: a problem of the read, not a missing metrics endpoint."""


def _problem(exc: BaseException) -> str:
    if isinstance(exc, urllib.error.HTTPError):
        return f"HTTP {exc.code} from the metrics endpoint"
    if isinstance(exc, urllib.error.URLError):
        return f"unreachable: {exc.reason}"
    if isinstance(exc, json.JSONDecodeError):
        return "its /models is not JSON"
    return f"{type(exc).__name__}: {exc}"


def run_grid(read: Callable[[], bool], interval_s: float, stop: threading.Event) -> None:
    """Call ``read`` at ``start + k * interval_s`` until ``stop`` or it says not again; an overrun skips the ticks
    it missed."""
    next_tick = time.monotonic()
    while not stop.is_set():
        if not read():
            return
        next_tick += interval_s
        now = time.monotonic()
        if now > next_tick:
            next_tick += (int((now - next_tick) / interval_s) + 1) * interval_s
        stop.wait(next_tick - now)


def _target(text: str) -> tuple[str, str]:
    workload, sep, url = text.partition("=")
    if not sep or not workload or not url.startswith(("http://", "https://")):
        raise argparse.ArgumentTypeError(f"{text!r}: give CLASS=http://host:port/metrics")
    return workload, url


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench_plugin.telemetry.server_scrape",
                                     description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", required=True, help="the file each read's JSON line is appended to")
    parser.add_argument("--interval", type=float, default=0.5, help="seconds between reads of one class")
    parser.add_argument("--parent", type=int, default=None, help="stop once this process is gone")
    parser.add_argument("targets", nargs="+", type=_target, metavar="CLASS=URL")
    args = parser.parse_args(argv)
    if args.interval <= 0:
        parser.error(f"--interval {args.interval}: give a positive number of seconds")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    lock = threading.Lock()
    out: IO[str] = open(args.out, "a", buffering=1)  # noqa: SIM115 (closed below, after every thread)

    def emit(line: dict[str, object]) -> None:
        text = json.dumps(line, separators=(",", ":")) + "\n"
        with lock:
            out.write(text)

    timeout = MAX_TIMEOUT_S  # a busy server answers late; its class's missed ticks are skipped meanwhile
    threads = [threading.Thread(target=run_grid, args=(ClassScraper(w, u, timeout, emit).read_once, args.interval,
                                                      stop), name=f"scrape-{w}", daemon=True)
               for w, u in args.targets]
    for thread in threads:
        thread.start()
    while not stop.wait(0.5):
        if args.parent is not None and os.getppid() != args.parent:
            stop.set()
    for thread in threads:
        thread.join(timeout=MAX_TIMEOUT_S + 1.0)
    with lock:
        out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
