"""Shares: which load-generating process sends which arrivals of a class in a stage.

A stage's arrivals of a class are one seeded sequence (loadgen/arrivals.py), numbered 0..n-1. The
master splits each class over the processes that can send it (every accepted worker whose
locustfile has that class's user class), in a fixed order: the process at position ``index`` of
``count`` sends arrivals ``index, index + count, ...``. Together the shares are the whole sequence,
each arrival exactly once. Closed-loop classes split their request loops the same way.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Share:
    """Arrivals ``index, index + count, ...`` of one class in one stage."""

    index: int
    count: int

    def of(self, n: int) -> range:
        """This share's arrival numbers among ``n``."""
        return range(self.index, n, self.count)

    def holds(self, seq: int) -> bool:
        """Whether arrival ``seq`` belongs to this share."""
        return seq % self.count == self.index


def plan_shares(senders: Mapping[str, Collection[str]], classes: Sequence[str]) -> dict[str, dict[str, Share]]:
    """Process id -> class -> share, for ``classes`` over the processes that can send them.

    ``senders``: process id -> the classes it can send. Processes are taken in sorted order, so the
    same processes give the same shares. A class that no process can send gets no share at all
    (``unsent`` says which).
    """
    out: dict[str, dict[str, Share]] = {}
    for name in classes:
        holders = sorted(worker for worker, can in senders.items() if name in can)
        for index, worker in enumerate(holders):
            out.setdefault(worker, {})[name] = Share(index, len(holders))
    return out


def unsent(shares: Mapping[str, Mapping[str, Share]], classes: Sequence[str]) -> list[str]:
    """The classes that no process has a share of."""
    covered = {name for held in shares.values() for name in held}
    return [name for name in classes if name not in covered]
