"""The front (bench_plugin/sharing/front.py) as a real process on loopback, before real HTTP servers."""

from __future__ import annotations

import hashlib
import http.client
import json
import queue
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 20.0  # seconds: generous, for a busy 2-core machine
BIG = bytes(range(256)) * (370 * 1024 // 256)  # the ~370 KB reply
NO_REPLY = (ConnectionResetError, http.client.RemoteDisconnected, BrokenPipeError)


class Front:
    """The front process: commands in, one answer line each out."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        first = self.line()
        assert first.startswith("listening "), first
        self.port = int(first.split()[1])

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))

    def line(self) -> str:
        return self.lines.get(timeout=TIMEOUT)

    def send(self, command: str) -> str:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        return self.line()

    def stats(self) -> dict[str, Any]:
        stats: dict[str, Any] = json.loads(self.send("stats"))
        return stats

    def route(self, upstream: Upstream) -> None:
        answer = self.send(f"route {upstream.address}").split()
        assert answer[:3] == ["ok", "route", upstream.address], answer
        assert abs(float(answer[3]) - time.time()) < 60

    def connect(self) -> http.client.HTTPConnection:
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=TIMEOUT)

    def wait_for(self, check: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        deadline = time.time() + TIMEOUT
        while not check(stats := self.stats()) and time.time() < deadline:
            time.sleep(0.05)
        return stats


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    name = "?"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _reply(self, body: bytes, close: bool = False) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        if close:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path == "/big":
            self._reply(BIG)
        elif self.path == "/close":
            self._reply(self.name.encode(), close=True)
        elif self.path == "/stream":  # a first chunk, then the rest a second later
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.wfile.write(b"6\r\nfirst\n\r\n")
            time.sleep(1.0)
            self.wfile.write(b"5\r\nrest\n\r\n0\r\n\r\n")
        else:
            self._reply(self.name.encode())

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self._reply(json.dumps({"name": self.name, "len": len(body), "sha": hashlib.sha256(body).hexdigest()}).encode())


class Upstream:
    """A real HTTP/1.1 keep-alive server in a thread, answering its name."""

    def __init__(self, name: str) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), type(f"Handler{name}", (Handler,), {"name": name}))
        self.server.daemon_threads = True
        self.address = f"127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def front() -> Iterator[Front]:
    proc = subprocess.Popen([sys.executable, "-m", "bench_plugin.sharing.front", "--port", "0"], cwd=ROOT,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        yield Front(proc)
    finally:
        proc.kill()
        proc.wait(timeout=TIMEOUT)


@pytest.fixture
def upstreams() -> Iterator[tuple[Upstream, Upstream]]:
    a, b = Upstream("A"), Upstream("B")
    yield a, b
    a.close()
    b.close()


def get(conn: http.client.HTTPConnection, path: str = "/") -> bytes:
    conn.request("GET", path)
    response = conn.getresponse()
    assert response.status == 200
    return response.read()


def test_relays_requests_and_large_bodies(front: Front, upstreams: tuple[Upstream, Upstream]) -> None:
    front.route(upstreams[0])
    conn = front.connect()
    assert get(conn) == b"A"
    body = bytes(range(256)) * 1600  # 400 KB, on the same keep-alive connection
    conn.request("POST", "/echo", body=body, headers={"Content-Type": "application/octet-stream"})
    echoed = json.loads(conn.getresponse().read())
    assert echoed == {"name": "A", "len": len(body), "sha": hashlib.sha256(body).hexdigest()}
    reply = get(conn, "/big")
    assert len(reply) == len(BIG) and reply == BIG
    conn.close()
    stats = front.wait_for(lambda s: not s["open"])
    assert stats["accepted"] == 1 and stats["refused"] == stats["failed"] == 0 and stats["open"] == {}


def test_switching_route_keeps_open_connections(front: Front, upstreams: tuple[Upstream, Upstream]) -> None:
    a, b = upstreams
    front.route(a)
    old = front.connect()
    assert get(old) == b"A"
    front.route(b)
    assert get(old) == b"A"  # opened before the switch: stays with A
    new = front.connect()
    assert get(new) == b"B"
    assert get(old) == b"A"
    stats = front.stats()
    assert stats["route"] == b.address
    assert stats["open"] == {a.address: 1, b.address: 1}
    old.close()
    assert front.wait_for(lambda s: s["open"] == {b.address: 1})["open"] == {b.address: 1}
    new.close()
    assert front.wait_for(lambda s: not s["open"])["open"] == {}


def test_refuse_resets_new_connections(front: Front, upstreams: tuple[Upstream, Upstream]) -> None:
    with pytest.raises(NO_REPLY):  # the initial state: no route
        get(front.connect())
    assert front.stats()["refused"] == 1
    front.route(upstreams[0])
    old = front.connect()
    assert get(old) == b"A"
    answer = front.send("refuse").split()
    assert answer[:2] == ["ok", "refuse"] and float(answer[2]) > 0
    with pytest.raises(NO_REPLY):
        get(front.connect())
    assert get(old) == b"A"  # a connection already open is kept
    stats = front.stats()
    assert stats["route"] is None
    assert (stats["accepted"], stats["refused"], stats["failed"]) == (3, 2, 0)
    assert stats["open"] == {upstreams[0].address: 1}


def test_unreachable_upstream_counts_as_failed(front: Front) -> None:
    with socket.socket() as probe:  # a port where nothing listens
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    assert front.send(f"route 127.0.0.1:{port}").startswith(f"ok route 127.0.0.1:{port} ")
    with pytest.raises(NO_REPLY):
        get(front.connect())
    stats = front.wait_for(lambda s: s["failed"] == 1)
    assert (stats["accepted"], stats["refused"], stats["failed"], stats["open"]) == (1, 0, 1, {})


def test_streaming_is_not_buffered(front: Front, upstreams: tuple[Upstream, Upstream]) -> None:
    front.route(upstreams[0])
    conn = front.connect()
    conn.request("GET", "/stream")
    response = conn.getresponse()
    assert response.read(6) == b"first\n"
    first = time.monotonic()
    assert response.read() == b"rest\n"
    assert time.monotonic() - first > 0.5  # the first chunk came about 1 s before the rest
    conn.close()


def test_upstream_close_reaches_the_client(front: Front, upstreams: tuple[Upstream, Upstream]) -> None:
    front.route(upstreams[0])
    with socket.create_connection(("127.0.0.1", front.port), timeout=TIMEOUT) as sock:
        sock.sendall(b"GET /close HTTP/1.1\r\nHost: front\r\n\r\n")
        received = b""
        while chunk := sock.recv(65536):  # until EOF
            received += chunk
        assert received.startswith(b"HTTP/1.1 200") and received.endswith(b"\r\n\r\nA")
    assert front.wait_for(lambda s: not s["open"])["open"] == {}


def test_bad_commands_and_stdin_eof(front: Front, upstreams: tuple[Upstream, Upstream]) -> None:
    for bad in ("bogus", "", "route", "route nowhere", "route 127.0.0.1:http", "route 127.0.0.1:70000", "stats now"):
        answer = front.send(bad)
        assert answer.startswith("error "), (bad, answer)
    front.route(upstreams[0])
    conn = front.connect()
    assert get(conn) == b"A"
    assert front.proc.stdin is not None
    front.proc.stdin.close()
    assert front.proc.wait(timeout=TIMEOUT) == 0
    with pytest.raises(NO_REPLY):  # its connections were closed with it
        get(conn)


def test_sigterm_exits_cleanly(front: Front) -> None:
    front.proc.terminate()
    assert front.proc.wait(timeout=TIMEOUT) == 0


def test_bad_arguments() -> None:
    done = subprocess.run([sys.executable, "-m", "bench_plugin.sharing.front", "--port", "x"], cwd=ROOT,
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 2 and "not a port" in done.stderr


def test_imports_nothing_heavy() -> None:
    code = ("import sys, bench_plugin.sharing.front; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'gevent', 'locust', 'requests', 'torch'}))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT)
    assert done.stdout.strip() == "[]", done.stderr
