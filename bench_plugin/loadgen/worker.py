"""Worker: a Locust worker's side of a campaign; it takes the request sets from the master, ships results back.

``locust -f locustfiles/mixed.py --worker --master-host H`` is all a worker needs: at start it says
hello, and the master answers with the request sets, or refuses it (one line on both sides; the
worker exits with status 2). A worker given its own ``--scenario`` says what that scenario and its
request sets hash to, and the master refuses it if they differ from its own. The worker's LoadState
reports through a Courier, which ships samples, requests in flight and finished shares to the
master every REPORT_INTERVAL_S while there is news or a request in flight, and once more when the worker
stops, each report saying when its snapshot was taken (``at``); a stage's
``usage`` entry is ``[key, cpu_s, wall_s, stalls]`` (masters before the stall monitor read the first three).
"""

from __future__ import annotations

import logging
import sys
import time
from typing import Any

import gevent
from locust.env import Environment
from locust.rpc.protocol import Message
from locust.runners import WorkerRunner

from bench_plugin.loadgen import allocator, collector, protocol
from bench_plugin.loadgen.ledger import StageKey
from bench_plugin.loadgen.protocol import Hello, Identity
from bench_plugin.loadgen.state import LoadState, StageAssignment
from bench_plugin.results.samples import Sample
from bench_plugin.results.summary import GeneratorStalls
from bench_plugin.scenario.request_sets import RequestSet, RequestSetError

logger = logging.getLogger(__name__)

MASTER_LOST_S = 10.0
"""A master silent this long is taken for lost (its heartbeat answers come every second; Locust's master
takes a worker silent for 3 of them for missing)."""


class Courier:
    """Buffers a worker's results and ships them to the master in REPORT messages."""

    def __init__(self, runner: WorkerRunner, state: LoadState) -> None:
        self.runner = runner
        self.state = state
        self.samples: list[list[Any]] = []
        self.done: list[list[Any]] = []
        self.used: list[list[Any]] = []
        self._had_in_flight = False
        """Whether the last report listed a request in flight: the one after it says they ended."""

    def sample(self, sample: Sample) -> None:
        self.samples.append(sample.to_row())

    def finished(self, key: StageKey, workload: str, sent: int, note: str | None) -> None:
        self.done.append([list(key), workload, sent, note])

    def usage(self, key: StageKey, cpu_s: float, wall_s: float, stalls: GeneratorStalls | None = None) -> None:
        self.used.append([list(key), cpu_s, wall_s, stalls.model_dump(mode="json") if stalls is not None else None])

    def run(self) -> None:
        """Ship what there is every REPORT_INTERVAL_S (the worker's lifetime)."""
        while True:
            gevent.sleep(protocol.REPORT_INTERVAL_S)
            self.flush()

    def flush(self) -> None:
        """Send one REPORT if anything changed since the last, or anything is in flight; samples and in-flight
        are one snapshot, taken at ``at`` (this process's clock, as the intended times): how long a request
        had been in flight is known as of then, however late the report reaches the master, and a request
        still in flight is seen growing older in every report."""
        at = time.time()
        in_flight = [[workload, *key, intended] for workload, key, intended in self.state.in_flight()]
        if not (self.samples or self.done or self.used or in_flight or self._had_in_flight):
            return
        data = {"samples": self.samples, "in_flight": in_flight, "finished": self.done, "usage": self.used, "at": at}
        self.samples, self.done, self.used, self._had_in_flight = [], [], [], bool(in_flight)
        self.runner.send_message(protocol.REPORT, data)


class WorkerLink:
    """Wires one worker process into the campaign its master runs."""

    def __init__(self, environment: Environment, state: LoadState, own: Hello | None = None) -> None:
        runner = environment.runner
        assert isinstance(runner, WorkerRunner)
        self.environment = environment
        self.runner = runner
        self.state = state
        self.hello = own or Hello(Identity.here(), state.classes)
        self.courier = Courier(runner, state)
        state.reporter = self.courier
        state.worker_id = runner.client_id

    def start(self) -> None:
        """Register the message handlers, say hello, start shipping."""
        runner = self.runner
        runner.register_message(protocol.SETUP, self._on_setup)
        runner.register_message(protocol.REFUSED, self._on_refused)
        runner.register_message(protocol.STAGE, self._on_stage)
        runner.register_message(protocol.STOP, self._on_stop)
        self.environment.events.test_stop.add_listener(self._on_stop_all)
        self.environment.events.quitting.add_listener(self._on_stop_all)
        runner.greenlet.spawn(self.courier.run)
        runner.greenlet.spawn(self._watch_master)
        runner.send_message(protocol.HELLO, self.hello.to_message())

    def _watch_master(self) -> None:
        """While sending, stop and quit once the master has not answered a heartbeat for MASTER_LOST_S.

        The master answers each of the worker's heartbeats (one a second). A master that was killed answers
        none; Locust's own worker waits 60 s before it gives up (MASTER_HEARTBEAT_TIMEOUT), and meanwhile the
        stage it was sending went on to its end, loading the servers for nobody. This worker stops its
        arrivals and cancels what it has in flight instead, says why, and exits with status 2. An idle
        worker is left to Locust's own timeout: it loads nothing, and a master busy for a while (writing its
        report at the end) is not taken for lost."""
        while True:
            gevent.sleep(1.0)
            last = self.runner.last_heartbeat_timestamp
            if last is not None and time.time() - last > MASTER_LOST_S and self.state.sending():
                self.state.stop_all()
                self._quit(f"the master has not answered for {time.time() - last:.0f} s (lost): stopped sending")
                return

    def _on_setup(self, msg: Message, **_: Any) -> None:
        try:
            sets = {name: RequestSet.from_message(data) for name, data in msg.data["request_sets"].items()}
        except RequestSetError as exc:
            self.runner.send_message(protocol.REFUSED, {"reason": str(exc)})
            self._quit(f"cannot take part: {exc}")
            return
        self.state.request_sets.clear()
        self.state.request_sets.update(sets)
        collector.settle()
        allocator.settle()
        self.runner.send_message(protocol.READY, {})
        logger.info("bench_plugin: campaign set up by the master (%s)",
                    ", ".join(f"{name}: {rs.sha256[:12]}" for name, rs in sets.items()))

    def _on_refused(self, msg: Message, **_: Any) -> None:
        self._quit(f"refused by the master: {msg.data.get('reason')}")

    def _quit(self, line: str) -> None:
        sys.stderr.write(f"bench_plugin: error: {line}\n")
        sys.stderr.flush()
        self.environment.process_exit_code = 2
        gevent.spawn(self.runner.quit)  # not from this handler's greenlet, which quit() kills

    def _on_stage(self, msg: Message, **_: Any) -> None:
        self.state.assign(StageAssignment.from_message(msg.data))

    def _on_stop(self, msg: Message, **_: Any) -> None:
        key = tuple(msg.data)
        self.state.stop_stage((int(key[0]), int(key[1]), int(key[2])))

    def _on_stop_all(self, **_: Any) -> None:
        self.state.stop_all()
        self.courier.flush()
