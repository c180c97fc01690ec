"""Fleet: the campaign's load generators as the master (or the local runner) sees them.

On a master, each worker says hello; the fleet refuses one whose software, scenario or request sets
differ (one line, on both sides) and sends the others the request sets. Workers report which classes
they can send (their locustfile's user classes); each stage is split into shares over the accepted
workers that can send a class
(shares.py) and its ledger (ledger.py) counts what comes back. Workers ship samples, requests in
flight and the end of each share's loop in REPORT messages; the fleet hands samples on to the
conductor. A worker that stops answering heartbeats or quits is lost: the conductor asks ``lost``
while a stage runs, and the stage becomes invalid rather than silently partial. On a local runner
the same fleet has one member, this process, reached by direct calls instead of messages.
"""

from __future__ import annotations

import dataclasses
import logging
import socket
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import gevent
from locust.env import Environment
from locust.rpc.protocol import Message
from locust.runners import STATE_MISSING, MasterRunner

from bench_plugin.loadgen import protocol
from bench_plugin.loadgen.ledger import StageKey, StageLedger
from bench_plugin.loadgen.protocol import Hello, Identity, hello_differences
from bench_plugin.loadgen.shares import plan_shares, unsent
from bench_plugin.loadgen.state import LoadState, StageAssignment
from bench_plugin.results.provenance import generator_process
from bench_plugin.results.record import GeneratorFacts
from bench_plugin.results.samples import Sample
from bench_plugin.results.summary import GeneratorProcess, GeneratorStalls
from bench_plugin.results.timeline import Entry, WorkerAccepted, WorkerConnected, WorkerLost, WorkerRefused
from bench_plugin.scenario.request_sets import RequestSet

logger = logging.getLogger(__name__)

LOCAL = "local"
"""The member id of the local runner's own process."""
QUIT = "it quit or disconnected"
"""Why a worker Locust no longer lists is gone (it said goodbye, or its connection closed)."""

Note = Callable[[Entry], None]
"""Puts an entry on the campaign's timeline (a declared kind: results/timeline.py)."""


def on_this_host(member: str) -> bool:
    """Whether a worker runs on this host: Locust names a worker ``<hostname>_<random hex>``."""
    return member.rsplit("_", 1)[0] == socket.gethostname()


class NoLoadGenerators(Exception):
    """No accepted load generator drives some class of a stage; the message says which and why."""


@dataclass
class Member:
    """One load-generating process."""

    id: str
    state: str = "connected"
    """connected (said hello, setup sent), accepted (setup applied), refused, lost."""
    classes: set[str] = field(default_factory=set)
    """The workload classes it can send."""
    in_flight: list[tuple[str, StageKey, float]] = field(default_factory=list)
    """(class, stage key, intended send time) of its requests in flight, as of its last report."""
    in_flight_at: float = 0.0
    """When that report's snapshot was taken (the worker's clock, as the intended times)."""
    identity: Identity | None = None
    process: GeneratorProcess | None = None
    """Where it runs (pid, host, cores), as it said in its hello."""
    reason: str | None = None
    """Why it was refused or lost."""


class Inbox:
    """The master's handlers of the workers' messages, registered before anything else happens.

    A worker may connect and say hello while the master is still setting its campaign up (reading the
    scenario, checking the backend: work that lets other greenlets run); Locust drops a message of a
    type nobody registered yet ("Unknown message type"), and that worker would never take part. The
    inbox registers every type at once and keeps what comes until :meth:`deliver` names the handlers.
    """

    KINDS = (protocol.HELLO, protocol.READY, protocol.REFUSED, protocol.REPORT)

    def __init__(self, runner: MasterRunner) -> None:
        self._handlers: dict[str, Callable[..., None]] | None = None
        self._held: list[tuple[str, Message, dict[str, Any]]] = []
        for kind in self.KINDS:
            runner.register_message(kind, self._receiver(kind))

    def _receiver(self, kind: str) -> Callable[..., None]:
        def receive(msg: Message, **kwargs: Any) -> None:
            if self._handlers is None:
                self._held.append((kind, msg, kwargs))
            else:
                self._handlers[kind](msg, **kwargs)

        return receive

    def deliver(self, handlers: dict[str, Callable[..., None]]) -> None:
        """From now on pass each message to its handler; first the held ones, in the order they came."""
        self._handlers = handlers
        held, self._held = self._held, []
        for kind, msg, kwargs in held:
            handlers[kind](msg, **kwargs)


class Fleet:
    """The load generators of one campaign, and the ledger of every stage they were given."""

    def __init__(self, environment: Environment, *, request_sets: dict[str, RequestSet], scenario_sha256: str,
                 take: Callable[[Sample], None], note: Note) -> None:
        self.environment = environment
        self.request_sets = request_sets
        self.scenario_sha256 = scenario_sha256
        self.take = take
        self.note = note
        self.identity = Identity.here()
        self.members: dict[str, Member] = {}
        self.ledgers: dict[StageKey, StageLedger] = {}
        self.local: LoadState | None = None

    @property
    def distributed(self) -> bool:
        """Whether the load comes from workers (a master) rather than this process."""
        return isinstance(self.environment.runner, MasterRunner)

    # --- wiring ---------------------------------------------------------------------------------

    def attach_local(self, state: LoadState) -> None:
        """Local runner: this process is the one load generator."""
        self.local = state
        state.reporter = _LocalReporter(self)
        self.members[LOCAL] = Member(LOCAL, state="accepted", classes=set(state.classes), identity=self.identity,
                                     process=generator_process())

    def listen(self, inbox: Inbox) -> None:
        """Master: take the workers' messages, first those the inbox held while the campaign was set up."""
        inbox.deliver({protocol.HELLO: self._on_hello, protocol.READY: self._on_ready,
                       protocol.REFUSED: self._on_refused, protocol.REPORT: self._on_report})

    def _send(self, member: str, kind: str, data: Any) -> None:
        runner = self.environment.runner
        assert runner is not None
        runner.send_message(kind, data, client_id=member)

    def _on_hello(self, msg: Message, **_: Any) -> None:
        hello = Hello.from_message(msg.data)
        hashes = {name: rs.sha256 for name, rs in self.request_sets.items()}
        member = self.members[msg.node_id] = Member(msg.node_id, classes=set(hello.classes), identity=hello.identity,
                                                    process=hello.process)
        differences = hello_differences(self.identity, self.scenario_sha256, hashes, hello)
        if differences:
            self._refuse(member, "; ".join(differences))
            self._send(member.id, protocol.REFUSED, {"reason": member.reason})
            return
        self._send(member.id, protocol.SETUP, {
            "scenario_sha256": self.scenario_sha256,
            "request_sets": {name: rs.to_message() for name, rs in self.request_sets.items()},
        })
        self.note(WorkerConnected(worker=member.id, identity=hello.identity.__dict__))

    def _refuse(self, member: Member, reason: str) -> None:
        member.state, member.reason = "refused", reason
        sys.stderr.write(f"bench_plugin: worker {member.id} refused: {reason}\n")
        self.note(WorkerRefused(worker=member.id, reason=reason))

    def _on_refused(self, msg: Message, **_: Any) -> None:
        member = self.members.setdefault(msg.node_id, Member(msg.node_id))
        self._refuse(member, str(msg.data.get("reason")))

    def _on_ready(self, msg: Message, **_: Any) -> None:
        member = self.members.get(msg.node_id)
        if member is not None and member.state == "connected":
            member.state = "accepted"
            self.note(WorkerAccepted(worker=member.id))

    def _on_report(self, msg: Message, **_: Any) -> None:
        member = self.members.get(msg.node_id)
        if member is None or member.state not in ("accepted", "lost"):
            return
        for row in msg.data["samples"]:
            self._sample(Sample.from_row(row))
        member.in_flight = [(workload, (t, g, s), intended) for workload, t, g, s, intended in msg.data["in_flight"]]
        member.in_flight_at = float(msg.data.get("at", time.time()))  # a worker from before ``at``: on arrival
        for (trial, segment, stage), workload, sent, note in msg.data["finished"]:
            self._finished(member.id, (trial, segment, stage), workload, sent, note)
        for (trial, segment, stage), cpu_s, wall_s, *stalls in msg.data.get("usage", []):
            # [key, cpu_s, wall_s, stalls]; a worker from before the stall monitor sends the first three
            self._usage(member.id, (trial, segment, stage), cpu_s, wall_s,
                        GeneratorStalls.model_validate(stalls[0]) if stalls and stalls[0] is not None else None)

    def _sample(self, sample: Sample) -> None:
        ledger = self.ledgers.get((sample.trial, sample.segment, sample.stage))
        if ledger is not None:
            ledger.take(sample)
        self.take(sample)

    def _finished(self, member: str, key: StageKey, workload: str, sent: int, note: str | None) -> None:
        ledger = self.ledgers.get(key)
        if ledger is not None:
            ledger.finish(member, workload, sent, note)

    def _usage(self, member: str, key: StageKey, cpu_s: float, wall_s: float,
               stalls: GeneratorStalls | None = None) -> None:
        ledger = self.ledgers.get(key)
        if ledger is not None:
            ledger.usage[member] = (float(cpu_s), float(wall_s))
            if stalls is not None:
                ledger.stalls[member] = stalls

    # --- membership -----------------------------------------------------------------------------

    def accepted(self) -> dict[str, Member]:
        """The members that may be given load now."""
        self.poll()
        return {mid: m for mid, m in self.members.items() if m.state == "accepted"}

    def poll(self) -> list[str]:
        """Mark members Locust no longer lists (quit) or lists as missing (no heartbeats); returns the new ones."""
        if not self.distributed:
            return []
        runner = self.environment.runner
        assert isinstance(runner, MasterRunner)
        lost = []
        for member in self.members.values():
            if member.state not in ("accepted", "connected"):
                continue
            client = runner.clients.get(member.id)
            if client is None:
                member.reason = QUIT
            elif client.state == STATE_MISSING:
                member.reason = "no heartbeat for 3 s"
            else:
                continue
            member.state = "lost"
            lost.append(member.id)
            sys.stderr.write(f"bench_plugin: worker {member.id} lost: {member.reason}\n")
            self.note(WorkerLost(worker=member.id, reason=member.reason))
        return lost

    def lost(self, ledger: StageLedger) -> dict[str, str]:
        """Members of ``ledger``'s stage that are lost, with why."""
        self.poll()
        return {mid: self.members[mid].reason or "lost" for mid in ledger.workers
                if mid in self.members and self.members[mid].state == "lost"}

    def all_lost(self) -> tuple[str, bool] | None:
        """Where every worker that joined is gone (None otherwise, or in one process): why, and whether that fails
        the campaign. Workers that all quit (a Ctrl-C to the process group reaches them first, say) stopped it:
        ``every worker quit (worker w1)``. One that stopped answering (killed, its host gone) failed it:
        ``every worker was lost (worker w1: no heartbeat for 3 s)``."""
        if not self.distributed:
            return None
        self.poll()
        joined = [m for m in self.members.values() if m.state != "refused"]
        if not joined or any(m.state != "lost" for m in joined):
            return None
        if all(m.reason == QUIT for m in joined):
            return "every worker quit (" + ", ".join(f"worker {m.id}" for m in joined) + ")", False
        return "every worker was lost (" + "; ".join(f"worker {m.id}: {m.reason or 'lost'}" for m in joined) + ")", True

    def wait_for_senders(self, classes: Iterable[str], timeout_s: float) -> None:
        """Return once every class has an accepted member that can send it and no worker is setting up.

        A worker is setting up from when Locust lists it until its setup is applied (or it is
        refused). After ``timeout_s`` it goes on without workers still setting up where every class
        has a sender, and raises NoLoadGenerators where one has none.
        """
        names = list(classes)
        deadline = time.time() + timeout_s
        while True:
            missing = unsent(plan_shares({m: x.classes for m, x in self.accepted().items()}, names), names)
            if not missing and not self._setting_up():
                return
            if time.time() >= deadline:
                if missing:
                    raise NoLoadGenerators(self._missing_reason(missing, timeout_s))
                logger.warning("going on without workers still setting up after %g s: %s", timeout_s,
                               ", ".join(self._setting_up()))
                return
            gevent.sleep(0.1)

    def _setting_up(self) -> list[str]:
        """Workers Locust lists that have not said hello yet, or whose setup is not applied."""
        runner = self.environment.runner
        listed = ({c.id for c in runner.clients.values() if c.state != STATE_MISSING}
                  if isinstance(runner, MasterRunner) else set())
        pending = {mid for mid, m in self.members.items() if m.state == "connected"}
        return sorted(pending | (listed - set(self.members)))

    def _missing_reason(self, missing: list[str], waited_s: float) -> str:
        states = [m.state for m in self.members.values()]
        refused = [f"{m.id}: {m.reason}" for m in self.members.values() if m.state == "refused"]
        text = (f"no load generator can send {', '.join(missing)} after {waited_s:g} s "
                f"({len(states)} worker(s): {states.count('accepted')} accepted, {states.count('connected')} "
                f"setting up, {states.count('refused')} refused, {states.count('lost')} lost)")
        return text + (f"; refused: {'; '.join(refused)}" if refused else "")

    # --- stages ---------------------------------------------------------------------------------

    def announce(self, assignment: StageAssignment, arrivals: dict[str, int | None]) -> StageLedger:
        """Split the stage over the accepted members, send each its shares; the stage's ledger.

        ``arrivals``: class -> open-loop arrival count of the stage (None for closed loop).
        """
        active = [name for name, load in assignment.classes.items() if load.load > 0]
        members = self.accepted()
        shares = plan_shares({mid: m.classes for mid, m in members.items()}, active)
        missing = unsent(shares, active)
        if missing:
            raise NoLoadGenerators(self._missing_reason(missing, 0))
        ledger = self.ledgers[assignment.key] = StageLedger(assignment.key, shares, arrivals)
        for mid, held in shares.items():
            mine = assignment.with_shares(held)
            if mid == LOCAL:
                assert self.local is not None
                self.local.assign(mine)
            else:
                self._send(mid, protocol.STAGE, mine.to_message())
        return ledger

    def stop_stage(self, key: StageKey) -> None:
        """End a stage's arrivals early on every member."""
        if self.local is not None:
            self.local.stop_stage(key)
        for mid in self.accepted():
            if mid != LOCAL:
                self._send(mid, protocol.STOP, list(key))

    def _in_flight(self) -> Iterable[tuple[str, tuple[str, StageKey, float], float]]:
        """(member, (class, stage key, intended send time), when that was seen) of every request in flight."""
        if self.local is not None:
            now = time.time()
            for entry in self.local.in_flight():
                yield LOCAL, entry, now
        for mid, member in self.members.items():
            if mid != LOCAL and member.state == "accepted":
                for entry in member.in_flight:
                    yield mid, entry, member.in_flight_at

    def in_flight(self) -> int:
        """Requests in flight over every member (as last reported)."""
        return sum(1 for _ in self._in_flight())

    def in_flight_of(self, key: StageKey) -> list[tuple[str, float]]:
        """(class, seconds in flight when last seen) of every request of stage ``key`` in flight: a worker's as of
        its last report (up to REPORT_INTERVAL_S old, more on a busy host), so never older than it is known
        to be. Aged to the moment the report is read instead, every request in flight at a report would pass
        a P95 limit as short as the interval (5 x a 40 ms SLO) before the next report says it ended."""
        return [(workload, seen - intended) for _, (workload, k, intended), seen in self._in_flight() if k == key]

    def in_flight_by_share(self, key: StageKey) -> dict[tuple[str, str], int]:
        """(member, class) -> requests of stage ``key`` in flight."""
        out: dict[tuple[str, str], int] = {}
        for mid, (workload, k, _), _ in self._in_flight():
            if k == key:
                out[(mid, workload)] = out.get((mid, workload), 0) + 1
        return out

    def settle(self, keys: Iterable[StageKey], deadline_s: float) -> None:
        """Wait until the stages' loops have all reported their end and nothing of them is in flight.

        Members lost meanwhile are not waited for. Returns at epoch ``deadline_s`` at the latest.
        """
        ledgers = [self.ledgers[k] for k in keys if k in self.ledgers]
        while time.time() < deadline_s:
            if all(self._settled(ledger) for ledger in ledgers):
                return
            gevent.sleep(0.05)

    def _settled(self, ledger: StageLedger) -> bool:
        lost = self.lost(ledger)
        if ledger.unfinished(excluding=lost):
            return False
        return not any(mid not in lost for (mid, _) in self.in_flight_by_share(ledger.key))

    def verify(self, key: StageKey, stopped: bool) -> list[str]:
        """The stage's accounting problems (ledger.verify); empty when its load was exactly the stated one."""
        ledger = self.ledgers[key]
        return ledger.verify(stopped=stopped, in_flight=self.in_flight_by_share(key), lost=self.lost(ledger))

    def summary_line(self) -> str:
        """Who sends the load, in one line: this process, or the workers by state."""
        if not self.distributed:
            return "this process (local runner)"
        states = [m.state for m in self.members.values()]
        counts = ", ".join(f"{states.count(s)} {s}" for s in ("accepted", "connected", "refused", "lost")
                           if states.count(s))
        return f"{len(states)} worker(s): {counts or 'none yet'}"

    def describe(self) -> dict[str, GeneratorFacts]:
        """Every member with its state, the classes it can send, its identity and where it ran: the campaign's load
        generators."""
        return {mid: GeneratorFacts(state=m.state, classes=sorted(m.classes), reason=m.reason,
                                    identity=dataclasses.asdict(m.identity) if m.identity else None, process=m.process)
                for mid, m in self.members.items()}


class _LocalReporter:
    """A local runner's LoadState reporting straight into the fleet."""

    def __init__(self, fleet: Fleet) -> None:
        self.fleet = fleet

    def sample(self, sample: Sample) -> None:
        self.fleet._sample(sample)

    def finished(self, key: StageKey, workload: str, sent: int, note: str | None) -> None:
        self.fleet._finished(LOCAL, key, workload, sent, note)

    def usage(self, key: StageKey, cpu_s: float, wall_s: float, stalls: GeneratorStalls | None = None) -> None:
        self.fleet._usage(LOCAL, key, cpu_s, wall_s, stalls)
