"""What limits an arm, as the document holds it: a list of typed items, each put in words where it is shown.

A :class:`Limit` is a class, one of its judged figures (``p95``, ``ttft p95``, ``tpot p95``, ``error rate``),
or a stage's failure that is neither (a rollback). Where the answer says by how much, the item carries the
figures (``times`` its SLO; the error rate and its budget); what happened that is no figure (a class skipped
after a rollback, one not measured, one held alone at the highest load tried) is its ``note``. summary.json
(``bench_plugin.summary/3``) and plan.json (``bench_plugin.plan/2``) hold lists of them; files written before
(``summary/2``, ``plan/1``) held the same items joined into one string, and read into the same lists
(:data:`CommaLimits`, :data:`AndLimits`): the words of an item and the separator of its field make the old
string again, so an older file renders as it did.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Annotated, Any, ClassVar

from pydantic import BeforeValidator, ConfigDict

from bench_plugin.results.server_figures import Sparse

FIGURES = ("ttft p95", "tpot p95", "p95", "error rate")
"""The judged figures of a class (analysis/objectives.Criterion.name)."""
ERROR_RATE = "error rate"

NO_SUCCESS = "no request succeeded"
"""A latency criterion with nothing to measure: every request of the class failed."""
NOT_MEASURED = "not measured at this stage"
SKIPPED = "skipped after a rollback"
"""A class skipped at a stage (a lower one rolled back): the boundary's outright failure."""
HIGHEST_TRIED = "at its highest load tried"
"""A capacity plan's class held alone on a GPU at the most its search tried (analysis/packing.py)."""


def skipped_note(skipped: int, of: int) -> str:
    """A class skipped at a stage after a lower stage rolled back, in ``skipped`` of ``of`` repeats."""
    return f"{SKIPPED} in {skipped} of {of} repeats"


class Limit(Sparse):
    """One thing that limits an arm where it is judged; written with only the fields it has."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    SPARSE: ClassVar[frozenset[str]] = frozenset({"workload", "figure", "times", "measured", "budget", "note"})

    workload: str | None = None
    """The class; None for a stage's failure of no one class (``rolled back: ...`` in ``note``)."""
    figure: str | None = None
    """One of :data:`FIGURES`; None: the class as a whole."""
    times: float | None = None
    """A latency's measured value over its SLO, where the answer gives it (mean over repeats)."""
    measured: float | None = None
    """The error rate measured (a fraction), where the answer gives it; with ``budget``."""
    budget: float | None = None
    note: str | None = None
    """What happened that is no figure: :data:`NO_SUCCESS`, :data:`NOT_MEASURED`, :data:`HIGHEST_TRIED`,
    :func:`skipped_note`, ``rolled back: <why>``."""

    def text(self) -> str:
        """``llm p95``, ``llm p95 3.06x its SLO``, ``llm error rate 5.0% vs its budget 1.0%``, ``llm``."""
        head = " ".join(part for part in (self.workload, self.figure) if part)
        if self.figure == ERROR_RATE and self.budget is not None:
            measured = "-" if self.measured is None else f"{self.measured:.1%}"
            return f"{head} {measured} vs its budget {self.budget:.1%}"
        if self.times is not None:
            return f"{head} {self.times:.2f}x its SLO"
        if self.note is None:
            return head
        if not head:
            return self.note
        return f"{head}: {self.note}" if self.figure else f"{head} {self.note}"


def limits_text(limits: Iterable[Limit], sep: str = ", ") -> str:
    """The items in words, joined with ``sep``; empty where there is none."""
    return sep.join(limit.text() for limit in limits)


_FIGURE = "|".join(re.escape(f) for f in FIGURES)
_TIMES = re.compile(rf"(?P<w>\S+) (?P<f>{_FIGURE}) (?P<t>[0-9.]+|inf)x its SLO")
_RATE = re.compile(r"(?P<w>\S+) error rate (?P<m>-|[0-9.]+%) vs its budget (?P<b>[0-9.]+)%")
_NOTED = re.compile(rf"(?P<w>\S+) (?P<f>{_FIGURE}): (?P<n>.+)")
_FIGURED = re.compile(rf"(?P<w>\S+) (?P<f>{_FIGURE})")
_CLASS_NOTE = re.compile(rf"(?P<w>\S+) (?P<n>{SKIPPED}.*|{NOT_MEASURED}|{HIGHEST_TRIED})")


def parse_limit(text: str) -> Limit:
    """One item of a file written before the lists (``summary/2``, ``plan/1``); whatever matches no form the
    code wrote is kept whole as a note, so it renders as it was."""
    if found := _TIMES.fullmatch(text):
        return Limit(workload=found["w"], figure=found["f"], times=float(found["t"]))
    if found := _RATE.fullmatch(text):
        measured = None if found["m"] == "-" else float(found["m"][:-1]) / 100
        return Limit(workload=found["w"], figure=ERROR_RATE, measured=measured, budget=float(found["b"]) / 100)
    if found := _NOTED.fullmatch(text):
        return Limit(workload=found["w"], figure=found["f"], note=found["n"])
    if found := _FIGURED.fullmatch(text):
        return Limit(workload=found["w"], figure=found["f"])
    if found := _CLASS_NOTE.fullmatch(text):
        return Limit(workload=found["w"], note=found["n"])
    if re.fullmatch(r"[^\s,]+", text):
        return Limit(workload=text)
    return Limit(note=text)


def _joined(sep: str) -> Any:
    def read(value: Any) -> Any:
        if value is None:
            return []
        if isinstance(value, str):
            return [parse_limit(item) for item in value.split(sep)] if value else []
        return value
    return BeforeValidator(read)


CommaLimits = Annotated[list[Limit], _joined(", ")]
"""A field of :class:`Limit` items that files before ``summary/3`` joined with ``", "`` (None where none)."""
AndLimits = Annotated[list[Limit], _joined(" and ")]
"""A field of :class:`Limit` items that files before ``plan/2`` joined with ``" and "`` (None where none)."""
