"""The document's words, a StrEnum a family: each value is the string summary.json and the store hold, as before."""

from __future__ import annotations

from enum import StrEnum


class CampaignState(StrEnum):
    """How a campaign stands (the live view's) and how its last process ended it (summary.json's ``status``)."""

    WAITING = "waiting"
    """The live view's, before the first trial starts."""
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    INTERRUPTED = "interrupted"
    UNFINISHED = "unfinished"
    """A resume's ``previous_status`` where the process before it ended without saying how (killed)."""


class TrialStatus(StrEnum):
    """A trial's status in the store and in ``trials[].status``."""

    PLANNED = "planned"
    """Registered and not started: the store's only (read_trials leaves such trials out)."""
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    INVALID = "invalid"
    INTERRUPTED = "interrupted"


class StageStatus(StrEnum):
    """A stage's status in the store and in ``trials[].stages[].status``."""

    RUNNING = "running"
    """Opened and never closed (the process was killed during it)."""
    COMPLETED = "completed"
    ABORTED = "aborted"
    """Rolled back: a rollback condition held (run/rollback.py), or a class's requests all failed one way."""
    INTERRUPTED = "interrupted"
    INVALID = "invalid"
    """Its load was not the stated one: a load generator lost, a sample missing, a server gone."""
    SKIPPED = "skipped"
    """Not run: a lower stage was rolled back."""


JUDGED_STATUSES: frozenset[StageStatus] = frozenset({StageStatus.COMPLETED, StageStatus.ABORTED, StageStatus.SKIPPED})
"""Stage statuses that say something about the load (see TrialSummary.judged_stage)."""


class Call(StrEnum):
    """An arm's verdict call (``verdict.call``, ``stages[].verdict``) and its answer's (``answer.call``)."""

    WORTH_IT = "worth it"
    TRADE_OFF = "trade-off"
    LOSS = "loss"
    INCONCLUSIVE = "inconclusive"
    """The start of an inconclusive call: the call itself names the repeats (analysis/verdict.inconclusive)."""
    NOT_COMPARED = "not compared"
    GENERATOR_LIMITED = "generator-limited"
    NOT_MEASURED = "not measured"
    CONTROL = "control"
    """The control arm's own answer."""
    NO_VERDICT = "no verdict"
    """The answer of a sharing arm that has no verdict."""


class Significance(StrEnum):
    """The call of a paired figure against no change (``Judged.call``; analysis/significance.py)."""

    HIGHER = "higher"
    LOWER = "lower"
    NO_DIFFERENCE = "no significant difference"


class BoundaryStatus(StrEnum):
    """A fixed sweep's operating boundary (analysis/boundary.py); a search's is its SearchStatus."""

    REACHED = "reached"
    NOT_REACHED = "not reached"
    """Every stage passed."""
    BELOW_LOWEST = "below the lowest stage"
    NOT_MEASURED = "not measured"


class SearchStatus(StrEnum):
    """Where a ray's adaptive search ended, or stands when cut short (analysis/search.py)."""

    BRACKETING = "bracketing"
    BISECTING = "bisecting"
    FOUND = "found"
    ABOVE_MAXIMUM = "above the maximum"
    BELOW_MINIMUM = "below the minimum"
    GENERATOR_LIMITED = "generator-limited"
    """Stopped at a probe its load generator could not send: the boundary is at least ``lo``."""


ENDED_SEARCHES: frozenset[SearchStatus] = frozenset({SearchStatus.FOUND, SearchStatus.ABOVE_MAXIMUM,
                                                     SearchStatus.BELOW_MINIMUM, SearchStatus.GENERATOR_LIMITED})
"""The statuses of a search that ended; the others (bracketing, bisecting) are those of one cut short."""


class Phase(StrEnum):
    """What a search's probe was (``probes[].phase``)."""

    PROBE = "probe"
    SUSTAIN = "sustain"
    """The hold of the boundary found, for the sustain time."""


class Hold(StrEnum):
    """How the hold of a search's boundary went (``search[].sustain``)."""

    CONFIRMED = "confirmed"
    UNDECIDED = "undecided"
    """It passed on its point estimate only."""
    FAILED = "failed"


class ProbeOutcome(StrEnum):
    """A probe's decision and each of its criteria's (analysis/probe.py)."""

    PASS = "pass"
    FAIL = "fail"
    UNDECIDED = "undecided"
    GENERATOR_LIMITED = "generator-limited"
    """Its load generator fell behind: not judged (a decision's only, never a criterion's)."""


class GeneratorLimit(StrEnum):
    """Why a stage's load generator fell behind (``generator_check.kind``; analysis/selfcheck.py)."""

    CPU_BOUND = "cpu-bound"
    STALLED = "stalled"
    HELD_BACK = "held back"
    """Neither short of CPU nor blocked: a busy host kept the process from running when its requests were due."""
