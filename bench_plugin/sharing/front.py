"""Front: a TCP relay on a fixed loopback port to one class's current inference server.

To measure a rolling restart, a graceful restart or a hard kill of one class's server while the load
generator keeps sending to it, the local backend puts a front before each class: the load generator
uses the front's port for the whole trial, and the backend moves the front's route from the old
server to the new one. The front behaves like a Kubernetes Service through kube-proxy: a NEW
connection goes to the route of the moment it is accepted, while a connection already open stays with
the server it was opened to until one side closes it; with no route (no ready endpoint) a new
connection is reset at once. It relays bytes, never parses HTTP, and passes each chunk on at once
(TCP_NODELAY, no buffering: token streams must not be held back).

    python -m bench_plugin.sharing.front --port P [--host 127.0.0.1]

prints ``listening <port>``, then answers each command read from stdin with one line on stdout:
``route <host>:<port>`` -> ``ok route <host>:<port> <epoch>``; ``refuse`` (also the initial state) ->
``ok refuse <epoch>``; ``stats`` -> a JSON line ``{"t", "route", "accepted", "refused", "failed",
"open"}`` (``accepted`` counts every connection accepted, ``refused`` and ``failed`` included;
``open`` the connections being relayed, per upstream address); anything else -> ``error <reason>``.
EOF on stdin or SIGTERM: stop listening, close every connection, exit 0.

Standard library only, and nothing heavy: no gevent, no Locust. On Linux each direction of a
connection moves through a pipe with ``os.splice`` (zero copy); elsewhere through a 256 KB buffer.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import struct
import sys
import threading
import time
from types import FrameType

BACKLOG = 1024
CONNECT_TIMEOUT_S = 5.0
CHUNK = 256 * 1024


class _Stop(Exception):
    """Raised by the SIGTERM handler to leave the command loop."""


def _reset(sock: socket.socket) -> None:
    """Close with a reset (SO_LINGER on, 0 s): the client sees ECONNRESET, as from a Service without endpoints."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def _shutdown(sock: socket.socket, how: int) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(how)


def _splice(src: socket.socket, dst: socket.socket) -> None:
    """Move bytes src -> dst through a pipe in the kernel until src reaches EOF."""
    read_end, write_end = os.pipe()
    try:
        while True:
            n = os.splice(src.fileno(), write_end, CHUNK)
            if n == 0:
                return
            while n:  # a splice out of the pipe may write part of what is in it
                n -= os.splice(read_end, dst.fileno(), n)
    finally:
        os.close(read_end)
        os.close(write_end)


def _copy(src: socket.socket, dst: socket.socket) -> None:
    """Move bytes src -> dst through a buffer until src reaches EOF (where os.splice is missing)."""
    buffer = bytearray(CHUNK)
    view = memoryview(buffer)
    while n := src.recv_into(buffer):
        dst.sendall(view[:n])


def _pump(src: socket.socket, dst: socket.socket) -> None:
    """One direction: at EOF half-close dst and let the other direction go on; on an error, end both."""
    try:
        (_splice if hasattr(os, "splice") else _copy)(src, dst)
    except OSError:
        for sock in (src, dst):  # wake the other direction; the final close then resets both peers
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            _shutdown(sock, socket.SHUT_RDWR)
        return
    _shutdown(dst, socket.SHUT_WR)


class Front:
    """The listening socket, the current route, the counts and the connections being relayed."""

    def __init__(self, listener: socket.socket) -> None:
        self.listener = listener
        self.lock = threading.Lock()
        self.route: str | None = None  # "host:port" as given
        self.accepted = self.refused = self.failed = 0
        self.open: dict[str, int] = {}
        self.sockets: set[socket.socket] = set()
        self.stopping = False

    def command(self, line: str) -> str:
        """One command line -> its one-line answer."""
        words = line.split()
        if words == ["refuse"]:
            return f"ok refuse {self._set_route(None):.6f}"
        if words == ["stats"]:
            return self.stats()
        if len(words) == 2 and words[0] == "route":
            host, _, port = words[1].rpartition(":")
            if not host or not port.isdigit() or not 0 < int(port) < 65536:
                return f"error route wants <host>:<port>, not {words[1]!r}"
            return f"ok route {words[1]} {self._set_route(words[1]):.6f}"
        return f"error unknown command {line.strip()[:200]!r} (route <host>:<port>, refuse or stats)"

    def _set_route(self, route: str | None) -> float:
        with self.lock:
            self.route = route
            return time.time()

    def stats(self) -> str:
        with self.lock:
            return json.dumps({"t": time.time(), "route": self.route, "accepted": self.accepted,
                               "refused": self.refused, "failed": self.failed, "open": dict(self.open)})

    def serve(self) -> None:
        """Accept connections until stopped: reset each at once without a route, else relay it in a thread."""
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                if self.stopping:
                    return
                time.sleep(0.05)  # out of file descriptors, say: try again
                continue
            with self.lock:
                self.accepted += 1
                route = self.route
                if route is None:
                    self.refused += 1
            if route is None:
                _reset(client)
            else:
                threading.Thread(target=self._relay, args=(client, route), daemon=True).start()

    def _relay(self, client: socket.socket, route: str) -> None:
        host, _, port = route.rpartition(":")
        try:
            upstream = socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S)
        except OSError:
            with self.lock:
                self.failed += 1
            _reset(client)
            return
        upstream.settimeout(None)
        for sock in (client, upstream):
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self.lock:
            if self.stopping:
                client.close()
                upstream.close()
                return
            self.open[route] = self.open.get(route, 0) + 1
            self.sockets.update((client, upstream))
        try:
            back = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
            back.start()
            _pump(client, upstream)
            back.join()
        finally:
            with self.lock:
                self.sockets.difference_update((client, upstream))
                self.open[route] -= 1
                if not self.open[route]:
                    del self.open[route]
            client.close()
            upstream.close()

    def stop(self) -> None:
        """Stop listening and end every connection (their threads then close the sockets)."""
        with self.lock:
            self.stopping = True
            _shutdown(self.listener, socket.SHUT_RDWR)  # wakes the accept
            self.listener.close()
            for sock in self.sockets:  # under the lock: a socket in the set is not closed yet
                _shutdown(sock, socket.SHUT_RDWR)


def _listen(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(BACKLOG)
    except OSError:
        sock.close()
        raise
    return sock


def _port(text: str) -> int:
    if not text.isdigit() or int(text) > 65535:
        raise argparse.ArgumentTypeError(f"not a port: {text!r}")
    return int(text)


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise _Stop


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench_plugin.sharing.front",
                                     description="A TCP relay to one class's current inference server.")
    parser.add_argument("--port", type=_port, required=True, help="port to listen on (0: a free one)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    args = parser.parse_args(argv)
    try:
        listener = _listen(args.host, args.port)
    except OSError as exc:
        print(f"front: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 1
    front = Front(listener)
    in_main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _on_sigterm) if in_main else None
    try:
        threading.Thread(target=front.serve, daemon=True).start()
        _say(f"listening {listener.getsockname()[1]}")
        while line := sys.stdin.readline():
            _say(front.command(line))
    except (_Stop, KeyboardInterrupt, BrokenPipeError):  # SIGTERM, Ctrl-C, or nobody reads our answers
        pass
    finally:
        front.stop()
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    return 0


if __name__ == "__main__":
    sys.exit(main())
