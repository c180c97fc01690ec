"""Processes started by the local backend, servers and fronts: start with a log, stop for sure.

Each server gets its own log file and a parent-death signal (Linux prctl), so a campaign that is
killed outright still takes its servers with it; a normal stop sends SIGTERM, waits, then SIGKILL.
A server given CPU cores is pinned to them in the child before exec, so no thread of it runs elsewhere.
A front (sharing/front.py) is driven through its stdin and stdout: :class:`FrontProcess` sends each
command and returns its answer; it dies with the campaign too, and at the end of its stdin.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from threading import Lock
from typing import IO, Any

from bench_plugin.scenario.affinity import format_cpulist

_PR_SET_PDEATHSIG = 1


HOST = "127.0.0.1"
"""Where the local backend's servers and fronts listen."""


def port_of(url: str) -> int:
    """The port of a ``http://host:port`` URL the local backend made."""
    return int(url.rsplit(":", 1)[1].split("/", 1)[0])


EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
"""The ports the kernel hands out itself (a bind to port 0, a connection's own end)."""
CHOSEN_FROM = 10_000
"""The lowest port :func:`free_port` picks."""
_RANDOM = random.SystemRandom()
"""Not the ``random`` module's generator: a scenario's seed must not make two processes pick the same ports."""


def _ephemeral() -> tuple[int, int]:
    try:
        low, high = (int(v) for v in EPHEMERAL_RANGE.read_text().split())
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default
    return low, high


def free_port(host: str = HOST) -> int:
    """A TCP port that is free on ``host`` right now, for a server that binds it a moment later.

    Picked at random below the kernel's ephemeral range where there is room (else above it): a port the kernel
    gave a probe would be free for any other process's connection or bind in between, and on a busy host one
    took it before the server bound it ("address already in use"). Outside that range only another process
    picking ports itself can; each pick is checked by binding it."""
    low, high = _ephemeral()
    ranges = [r for r in ((CHOSEN_FROM, low), (high + 1, 65536)) if r[1] - r[0] >= 1000]
    for _ in range(64 if ranges else 0):
        start, stop = ranges[0]
        port = _RANDOM.randrange(start, stop)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((host, port))
            except OSError:
                continue
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _die_with_parent() -> None:  # runs in the child between fork and exec
    # Not Linux/glibc: no parent-death signal, and the normal stop path still applies.
    with contextlib.suppress(OSError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def _child_setup(cores: frozenset[int] | None) -> Callable[[], None]:
    """What the child does between fork and exec: die with its parent, and keep to ``cores`` where given."""
    def setup() -> None:
        _die_with_parent()
        if cores is not None:
            os.sched_setaffinity(0, cores)  # before exec: every thread the server starts inherits it
    return setup


@dataclass
class ServerProcess:
    """One running server."""

    name: str
    command: list[str]
    env: dict[str, str]
    log_path: Path
    process: subprocess.Popen[bytes]

    @property
    def pid(self) -> int:
        """The server's process id."""
        return self.process.pid

    def exit_code(self) -> int | None:
        """None while running, else the exit status."""
        return self.process.poll()

    def log_tail(self, lines: int = 5) -> str:
        """The last lines of the server's log, for error messages."""
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return " | ".join(line for line in text.strip().splitlines()[-lines:])

    def stop(self, grace_s: float = 10.0) -> None:
        """SIGTERM, wait up to ``grace_s``, then SIGKILL; returns once the process is gone."""
        if self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while self.process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def start_server(name: str, command: list[str], env: dict[str, str], log_path: Path,
                 drop: tuple[str, ...] = (), cores: frozenset[int] | None = None) -> ServerProcess:
    """Start ``command`` with ``env`` added to this process's environment, output to ``log_path``.

    Inherited variables whose names start with one of ``drop`` are left out, so a setting from the
    caller's shell (an MPS pipe directory, a CUDA_VISIBLE_DEVICES) cannot leak into an arm.
    ``cores``: the CPU cores the server may run on (None: this process's own set). OSError if the
    server cannot be started or pinned.
    """
    if cores is not None and not cores <= os.sched_getaffinity(0):
        # The child could not pin itself, and an error raised between fork and exec reaches the parent
        # as an exec failure of the command: say why here, before forking.
        raise OSError(f"{name}'s server cannot be pinned to cpus {format_cpulist(cores)}: not all among the cores "
                      f"this process may use ({format_cpulist(os.sched_getaffinity(0))})")
    log_path.parent.mkdir(parents=True, exist_ok=True)
    inherited = {k: v for k, v in os.environ.items() if not (drop and k.startswith(drop))}
    with open(log_path, "ab") as log:
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**inherited, **env},
            preexec_fn=_child_setup(cores),
            start_new_session=True,
        )
    return ServerProcess(name, command, env, log_path, process)


class FrontError(OSError):
    """A front that did not start, or did not answer a command as it should; one line."""


@dataclass
class FrontProcess:
    """One running front: its port, and the commands it takes (route, refuse, stats)."""

    name: str
    port: int
    process: subprocess.Popen[str]
    log_path: Path
    lock: Lock = field(default_factory=Lock)

    def _ask(self, line: str) -> str:
        stdin, stdout = self.process.stdin, self.process.stdout
        assert stdin is not None and stdout is not None
        with self.lock:
            try:
                stdin.write(line + "\n")
                stdin.flush()
                answer = stdout.readline().strip()
            except (OSError, ValueError) as exc:
                raise FrontError(f"{self.name}'s front (pid {self.process.pid}) is gone: {exc}") from None
        if not answer:
            raise FrontError(f"{self.name}'s front (pid {self.process.pid}) exited; log {self.log_path}")
        if answer.startswith("error"):
            raise FrontError(f"{self.name}'s front refused {line!r}: {answer}")
        return answer

    def route(self, host: str, port: int) -> float:
        """New connections go to ``host:port`` from now; when it took effect (epoch seconds)."""
        return float(self._ask(f"route {host}:{port}").split()[-1])

    def refuse(self) -> float:
        """New connections are reset from now (no ready server); when it took effect."""
        return float(self._ask("refuse").split()[-1])

    def stats(self) -> dict[str, Any]:
        """The front's counts: accepted, refused, failed, and the connections open per server address."""
        found: dict[str, Any] = json.loads(self._ask("stats"))
        return found

    def stop(self, grace_s: float = 5.0) -> None:
        """Close its stdin (it stops listening and ends every connection), wait, then SIGKILL."""
        if self.process.stdin is not None:
            with contextlib.suppress(OSError, ValueError):
                self.process.stdin.close()
        try:
            self.process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()


def start_front(name: str, host: str, log_path: Path) -> FrontProcess:
    """Start class ``name``'s front on a free port of ``host``; FrontError if it does not say it listens."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "bench_plugin.sharing.front", "--host", host, "--port", "0"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True,
            preexec_fn=_child_setup(None), start_new_session=True,
        )
    stdout: IO[str] | None = process.stdout
    assert stdout is not None
    line = stdout.readline().strip()  # its first line, or EOF if it could not listen
    words = line.split()
    if len(words) != 2 or words[0] != "listening" or not words[1].isdigit():
        process.kill()
        process.wait()
        raise FrontError(f"{name}'s front did not start (said {line!r}); log {log_path}")
    return FrontProcess(name, int(words[1]), process, log_path)
