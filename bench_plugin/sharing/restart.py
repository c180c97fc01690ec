"""Restart: a class's local server restarted, killed or rolled behind its front mid-stage, each phase recorded.

The local backend's disruptions (scenario/disruption.py), one class at a time, while the load goes on. The
class's requests go to its front (sharing/front.py), which moves to the new server once it answers, as a
Service moves to a Ready pod:

- ``rollout-restart``: spawn, listening, healthy, ready, route (new connections go to the new server while
  those open stay with the old), then stop (SIGTERM to the old server: it stops accepting and finishes what it
  has, up to ``grace_s``), stopped;
- ``restart``: refuse (the front resets new connections: no server is ready), stop, stopped, then spawn,
  listening, healthy, ready, route;
- ``kill``: kill (SIGKILL: what the server had in hand is lost), refuse, stopped, then as ``restart``.

The new server's phases come from its own signals: ``spawn`` (the process started; its pid, port and log),
``listening`` (its port takes a connection), ``healthy`` (``GET /health`` answers 200, which vLLM, TEI and the
reference servers send once the model is loaded and warmed; a server without one, 404, skips it) and
``ready`` (it answered the class's own request, judged as readiness judges it at a segment's start). The old
server's: ``stop``, ``kill`` (SIGKILL, also when it outlived ``grace_s``) and ``stopped`` (its exit code, and
seconds since the stop). Every step is recorded with ``action``, ``target`` (``class/<name>``), ``result`` and
``t`` (epoch seconds). A new server that exits or is not ready within the scenario's ``readiness_timeout_s``
is an ``error`` step: a rollout then stops it and leaves the old server serving (as a stuck rollout does);
after a restart or a kill it is stopped and stays the class's server, so liveness names the class at once and
its trial ends failed (the campaign goes on: run/conductor.py).

Then each other class of the segment is checked (``co-tenant``, ``survived``): its server still runs and
answers its own request through its front. Under MPS a client's fault may be shared by the daemon's other
clients, so whether the control daemon still runs is recorded too (``mps-daemon``): a co-tenant that did not
survive is named, never assumed.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import Any, Protocol

import requests

from bench_plugin.results.placement import ClassPlacement
from bench_plugin.results.samples import Sample
from bench_plugin.scenario import Disruption
from bench_plugin.sharing.processes import HOST, FrontError, FrontProcess, ServerProcess, port_of

POLL_S = 0.05
"""How often a starting server is looked at (its port, its /health)."""
PROBE_PAUSE_S = 0.2
"""Between readiness requests that failed."""


class NotUp(Exception):
    """A new server that exited or was not ready in time; one line."""


class Servers(Protocol):
    """What a restart needs of the local backend (sharing/local.py)."""

    fronts: dict[str, FrontProcess]
    replacing: set[str]
    """Classes whose server's exit is the restart's doing (liveness leaves them alone)."""
    running: list[ServerProcess]

    def server(self, name: str) -> ServerProcess | None:
        """Class ``name``'s newest server."""

    def start_again(self, name: str) -> tuple[ServerProcess, ClassPlacement]:
        """Start another server for class ``name`` as the segment's first was started."""

    def mps_state(self) -> str | None:
        """The segment's MPS control daemon: "running (pid N)" or why not; None without one."""


class Restarter:
    """One disruption of the local backend: each class's server replaced in turn."""

    def __init__(self, backend: Servers, spec: Disruption, record: Callable[..., None],
                 probe: Callable[[str, str], Sample], timeout_s: float) -> None:
        self.backend, self.spec, self.record, self.probe, self.timeout_s = backend, spec, record, probe, timeout_s

    def run(self, classes: list[str]) -> None:
        """Replace each of ``classes``' servers as ``spec.kind`` says; blocks until done, records every step."""
        self.record(action="start", target=",".join(classes), result="started", t=time.time())
        steps = {"rollout-restart": self._roll, "restart": self._restart, "kill": self._kill}
        for name in classes:
            try:
                steps[self.spec.kind](name)
            except (NotUp, FrontError, OSError) as exc:
                self._step("error", name, str(exc))
            self._survivors(name)
        self.record(action="end", target=self.spec.kind, result="done", t=time.time())

    def _survivors(self, name: str) -> None:
        """Whether every other class's server came through ``name``'s replacement: still running and answering its
        own request through its front (a ``co-tenant`` step each, ``survived`` true or false); under MPS, whether
        the control daemon still runs (``mps-daemon``): one client's fault can take the daemon's others with it."""
        for other, front in self.backend.fronts.items():
            if other == name:
                continue
            server = self.backend.server(other)
            code = server.exit_code() if server is not None else None
            if server is None or code is not None:
                self._step("co-tenant", other, f"its server exited (code {code}) while {name}'s was replaced",
                           survived=False)
                continue
            sample = self.probe(other, f"http://{HOST}:{front.port}")
            if sample.ok:
                self._step("co-tenant", other, f"answered in {sample.latency_ms:.0f} ms", survived=True)
            else:
                why = (sample.detail or sample.error or "failed")[:200]
                self._step("co-tenant", other, f"running but did not answer: {why}", survived=False)
        state = self.backend.mps_state()
        if state is not None:
            self.record(action="mps-daemon", target="mps", result=state, t=time.time(),
                        survived=state.startswith("running"))

    def _step(self, action: str, name: str, result: str, t: float | None = None, **facts: Any) -> None:
        self.record(action=action, target=f"class/{name}", result=result, t=time.time() if t is None else t, **facts)

    def _old(self, name: str) -> ServerProcess:
        old = self.backend.server(name)
        if old is None:
            raise NotUp(f"{name} has no server to replace")
        return old

    def _roll(self, name: str) -> None:
        old = self._old(name)
        try:
            port = self._bring_up(name)
        except NotUp:  # a stuck rollout: the old server goes on serving, the new one is taken away
            new = self.backend.server(name)
            if new is not None and new is not old:
                new.stop()
                self.backend.running.remove(new)
            raise
        self._route(name, port)
        self.backend.replacing.add(name)  # the old one's exit is ours
        self._retire(name, old, grace_s=self.spec.grace_s)
        self.backend.replacing.discard(name)

    def _restart(self, name: str) -> None:
        old = self._old(name)
        self.backend.replacing.add(name)
        self._step("refuse", name, "new connections reset", t=self.backend.fronts[name].refuse())
        self._retire(name, old, grace_s=self.spec.grace_s)
        self._route(name, self._up_or_down(name))
        self.backend.replacing.discard(name)

    def _kill(self, name: str) -> None:
        old = self._old(name)
        self.backend.replacing.add(name)
        self._retire(name, old, grace_s=0.0)
        self._step("refuse", name, "new connections reset", t=self.backend.fronts[name].refuse())
        self._route(name, self._up_or_down(name))
        self.backend.replacing.discard(name)

    def _up_or_down(self, name: str) -> int:
        """The new server's port once it answers; NotUp if it does not, with it stopped and left as the class's
        server, so that liveness names the class at once (exited) and its trial ends there."""
        try:
            return self._bring_up(name)
        except NotUp:
            new = self.backend.server(name)
            if new is not None:
                new.stop()
            self.backend.replacing.discard(name)
            raise

    def _route(self, name: str, port: int) -> None:
        front = self.backend.fronts[name]
        t = front.route(HOST, port)
        self._step("route", name, f"new connections to port {port}", t=t, open=front.stats().get("open", {}))

    def _retire(self, name: str, old: ServerProcess, grace_s: float) -> None:
        """Stop ``old``: SIGTERM and up to ``grace_s`` to drain (0: SIGKILL at once); take it off the running."""
        process = old.process
        began = time.time()
        if grace_s > 0:
            process.terminate()
            self._step("stop", name, f"SIGTERM to pid {old.pid}", t=began, pid=old.pid)
            deadline = time.monotonic() + grace_s
            while process.poll() is None and time.monotonic() < deadline:
                time.sleep(POLL_S)
        if process.poll() is None:
            process.kill()
            self._step("kill", name, f"SIGKILL to pid {old.pid}" + (f" after {grace_s:g} s" if grace_s else ""),
                       pid=old.pid)
        code = process.wait()
        self._step("stopped", name, f"exit code {code}", pid=old.pid, exit_code=code, after_s=time.time() - began)
        if old in self.backend.running:
            self.backend.running.remove(old)

    def _bring_up(self, name: str) -> int:
        """Start class ``name``'s new server and wait until it answers; its port. NotUp if it does not."""
        started = time.time()
        new, placement = self.backend.start_again(name)
        port = port_of(placement.url)
        self._step("spawn", name, f"pid {new.pid} on port {port}", t=started, pid=new.pid, port=port,
                   log=str(new.log_path))
        deadline = time.monotonic() + self.timeout_s
        self._wait(name, new, deadline, "listening", lambda: _listens(port))
        health = self._wait(name, new, deadline, "healthy", lambda: _health(port))
        if health == "absent":
            self._step("healthy", name, "no /health (404): skipped")
        last: list[Sample] = []

        def answered() -> str | None:
            sample = self.probe(name, placement.url)
            last[:] = [sample]
            if sample.ok:
                return "ok"
            time.sleep(PROBE_PAUSE_S)
            return None

        try:
            self._wait(name, new, deadline, "ready", answered)
        except NotUp as exc:
            why = (last[0].detail or last[0].error or "failed") if last else "no answer"
            raise NotUp(f"{exc}; its last answer: {why[:200]}") from None
        return port

    def _wait(self, name: str, new: ServerProcess, deadline: float, phase: str,
              reached: Callable[[], str | None]) -> str:
        """Poll ``reached`` until it says something (recorded as the phase unless "absent"); NotUp if the new
        server exits or the deadline passes first."""
        while True:
            code = new.exit_code()
            if code is not None:
                raise NotUp(f"{name}'s new server exited (code {code}) before it was {phase}; log {new.log_path}: "
                            f"{new.log_tail()}")
            found = reached()
            if found is not None:
                if found != "absent":
                    self._step(phase, name, found)
                return found
            if time.monotonic() > deadline:
                raise NotUp(f"{name}'s new server was not {phase} within {self.timeout_s:g} s (readiness_timeout_s)")
            time.sleep(POLL_S)


def _listens(port: int) -> str | None:
    try:
        with socket.create_connection((HOST, port), timeout=1.0):
            return "port open"
    except OSError:
        return None


def _health(port: int) -> str | None:
    """"200" once /health answers 200, "absent" for a server without it (404), None meanwhile."""
    try:
        status = requests.get(f"http://{HOST}:{port}/health", timeout=2.0).status_code
    except requests.RequestException:
        return None
    if status == 200:
        return "GET /health 200"
    return "absent" if status == 404 else None
