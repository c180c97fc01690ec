"""Liveness: whether the servers of a segment still serve, so that a dead or hung one is never read as capacity.

A server that exits, hangs, or streams for ever fails every request sent to it, and a rollback on those
failures would be read as the arm's boundary ("below the lowest stage"), exit 0. Three checks tell such a
server from one at its capacity:

- a server the campaign started has exited (the local backend knows each one's process): checked twice a
  second while a stage runs, and before any warm-up or stage is judged. Not where the platform replaces a
  server that went (the kubernetes backend's Deployments): there a pod gone mid-stage is what a
  disruption or a preemption measures, and the probes below decide;
- every warm-up request of a class failed, though readiness had just been answered, and one probe (the
  readiness request again) sent after them gets no successful reply either;
- a stage in which a class got not one successful reply, after which such a probe (sent once the stage
  has drained) gets none either. A server at capacity answers that probe once its queue has drained, and
  it had answered the stage's first requests.

A warm-up or a stage whose failures the probe does not confirm stands as it is (a warm-up's failures are
then a warning, and a stage's are what the load did).

Any of them stops the campaign (status ``failed``) with one line naming the class, what was seen and the
server's exit code and last log lines where it exited; the stage in flight is kept, marked ``invalid``
with the same reason, so no boundary is read from it (``--resume`` runs it again).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from bench_plugin.results.samples import Sample
from bench_plugin.results.store import ClassWarmup
from bench_plugin.run.readiness import describe

SERVER_GONE = "server_gone: "
"""How the reason of a stage stopped for a server that exited or stopped answering starts."""


class ServerGone(Exception):
    """A server of the segment exited or stopped answering; one line naming the class and what was seen."""


def exited(classes: list[str], why_gone: Callable[[str], str | None]) -> str | None:
    """The first of ``classes`` whose server has exited, with why (``SharingBackend.exited``), or None."""
    for name in classes:
        why = why_gone(name)
        if why is not None:
            return f"the {name} server exited ({why})"
    return None


def warmup_failed(done: Mapping[str, ClassWarmup]) -> list[str]:
    """Classes whose every warm-up request failed."""
    return sorted(name for name, result in done.items() if result.requests and result.errors == result.requests)


def warmup_failure(name: str, result: ClassWarmup, probe: Sample) -> str:
    """The one line for a class whose every warm-up request failed and whose probe after it failed too."""
    return (f"every one of the {result.requests} warm-up requests of {name} failed (the first: {result.error}), "
            f"and so did a probe sent after them ({describe(probe)}), though readiness had just been answered: "
            f"the server stopped serving")


def unanswered(samples_ok: Mapping[str, int], sent: Mapping[str, int]) -> list[str]:
    """Classes that sent requests in a stage and got not one successful reply."""
    return sorted(name for name, count in sent.items() if count and not samples_ok.get(name))


def not_answering(name: str, sent: int, probe: Sample) -> str:
    """The one line for a class whose stage got no successful reply and whose probe after it failed too."""
    return (f"the {name} server answered none of the {sent} requests of the stage successfully, nor a probe "
            f"sent after it ({describe(probe)}): it stopped serving, which is not a capacity boundary")
