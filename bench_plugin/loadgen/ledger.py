"""Ledger: one stage's accounting, the proof that its load was the load the scenario states.

For every process and class of a stage the ledger holds what the process was given (its share, and
for open-loop arrivals how many that is), what it says it sent (reported once its loop has ended)
and the samples that reached the master, by arrival number. After the stage has drained, ``verify``
lists every way the stage falls short of "each arrival sent exactly once, and each one's sample
recorded": a process lost mid-stage, a share cut short without a stop, a sample missing, an
arrival sent twice or by the wrong process. An empty list is a stage whose figures can be trusted;
anything else makes the stage invalid, with these lines as its reason.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from bench_plugin.loadgen.shares import Share
from bench_plugin.results.samples import Sample
from bench_plugin.results.summary import GeneratorStalls
from bench_plugin.results.timeline import ShareAccount

StageKey = tuple[int, int, int]
"""(trial, segment, stage)."""


@dataclass
class ShareTally:
    """One process's share of one class in one stage, and what became of it."""

    share: Share
    expected: int | None
    """Open loop: the arrivals of the share; closed loop: None (the count depends on the server)."""
    sent: int | None = None
    """Requests the process sent, once it reported the end of its loop."""
    note: str | None = None
    """Why the process could not send its share, when it says so."""
    received: int = 0
    seqs: set[int] = field(default_factory=set)
    duplicates: int = 0
    strays: int = 0
    """Samples whose arrival number lies outside the share."""

    @property
    def finished(self) -> bool:
        """Whether the process reported the end of its loop."""
        return self.sent is not None


class StageLedger:
    """The accounting of one stage over all its processes."""

    def __init__(self, key: StageKey, shares: Mapping[str, Mapping[str, Share]],
                 arrivals: Mapping[str, int | None]) -> None:
        self.key = key
        self.tallies: dict[tuple[str, str], ShareTally] = {}
        for worker, held in shares.items():
            for name, share in held.items():
                n = arrivals.get(name)
                self.tallies[(worker, name)] = ShareTally(share, None if n is None else len(share.of(n)))
        self.usage: dict[str, tuple[float, float]] = {}
        """Process -> (CPU seconds, wall seconds) it used while sending its shares (Reporter.usage)."""
        self.stalls: dict[str, GeneratorStalls] = {}
        """Process -> what its stall monitor saw while it sent its shares (Reporter.usage's ``stalls``;
        absent for a worker from before the monitor)."""

    @property
    def workers(self) -> set[str]:
        """The processes that hold a share of this stage."""
        return {worker for worker, _ in self.tallies}

    def take(self, sample: Sample) -> None:
        """Count one of this stage's samples."""
        tally = self.tallies.get((sample.worker, sample.workload))
        if tally is None:
            return  # a sample of a process without a share: verify() cannot see it, so count it as a stray
        tally.received += 1
        if tally.expected is not None:
            if not tally.share.holds(sample.seq):
                tally.strays += 1
            elif sample.seq in tally.seqs:
                tally.duplicates += 1
            tally.seqs.add(sample.seq)

    def finish(self, worker: str, workload: str, sent: int, note: str | None = None) -> None:
        """A process reports the end of its loop for ``workload``: it sent ``sent`` requests."""
        tally = self.tallies.get((worker, workload))
        if tally is not None:
            tally.sent, tally.note = sent, note

    def unfinished(self, excluding: Collection[str] = ()) -> list[tuple[str, str]]:
        """(process, class) whose loop has not reported its end, leaving out the ``excluding`` processes."""
        return [key for key, tally in self.tallies.items() if not tally.finished and key[0] not in excluding]

    def verify(self, *, stopped: bool, in_flight: Mapping[tuple[str, str], int],
               lost: Mapping[str, str]) -> list[str]:
        """Every way the stage falls short (empty when it holds); one line each.

        ``stopped``: the stage's arrivals were ended early (rollback), so a share may be cut short.
        ``in_flight``: (process, class) -> requests still in flight when the stage was drained; their
        samples may arrive later. ``lost``: process -> why it was lost.
        """
        problems: list[str] = []
        cut: dict[str, list[str]] = {}  # a lost process -> its incomplete shares, said in one line
        for (worker, name), tally in sorted(self.tallies.items()):
            complete = tally.finished and tally.received == tally.sent
            if worker in lost and not complete:
                cut.setdefault(worker, []).append(
                    f"{name} ({tally.expected} arrivals)" if tally.expected is not None else f"{name} (request loops)")
                continue
            if not tally.finished:
                problems.append(f"worker {worker} never reported the end of its {name} arrivals")
                continue
            assert tally.sent is not None
            if tally.note:
                problems.append(f"worker {worker} could not send its {name} arrivals: {tally.note}")
            elif tally.expected is not None and not stopped and tally.sent != tally.expected:
                problems.append(f"worker {worker} sent {tally.sent} of its {tally.expected} {name} arrivals")
            pending = in_flight.get((worker, name), 0)
            if tally.received + pending != tally.sent:
                problems.append(f"{name}: worker {worker} sent {tally.sent} requests but {tally.received} samples "
                                f"arrived" + (f" and {pending} are still in flight" if pending else ""))
            if tally.duplicates:
                problems.append(f"{name}: worker {worker} sent {tally.duplicates} arrivals more than once")
            if tally.strays:
                problems.append(f"{name}: worker {worker} sent {tally.strays} arrivals outside its share")
        return [f"worker {worker} was lost mid-stage ({lost[worker]}): its share"
                + (f" of {shares[0]} is" if len(shares) == 1 else f"s of {', '.join(shares)} are") + " incomplete"
                for worker, shares in cut.items()] + problems

    def describe(self) -> dict[str, dict[str, ShareAccount]]:
        """Class -> process -> its share's account: for the timeline."""
        out: dict[str, dict[str, ShareAccount]] = {}
        for (worker, name), tally in sorted(self.tallies.items()):
            out.setdefault(name, {})[worker] = ShareAccount(
                share=(tally.share.index, tally.share.count), expected=tally.expected, sent=tally.sent,
                received=tally.received)
        return out
