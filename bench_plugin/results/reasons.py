"""Why a stage got its verdict, as the document holds it: a sentence, and the items it lists where it lists some.

A stage's verdict (analysis/verdict.py) comes with its reasons: the goodput figure that decided it, each SLO
breach, what to do about too few repeats, and, where the load generator fell behind, one sentence with each
run that fell behind as an item under it. summary.json (``bench_plugin.summary/4``) holds each reason as a
:class:`Reason` (``text``, and ``items`` where it has some), so the report lists the items under their sentence
without reading the words back. Files written before (``summary/3`` and ``/2``) held each reason as one string,
its items joined into it (``text: a; b; c``); they read into the same Reasons here (:data:`Reasons`), split
once where they are read, so an older file renders as it did.

The runs an arm's stage sets apart (its load generator fell behind, its host was busy, a class's requests all
failed with one protocol error) are :class:`RunFlag` items the same way: the arm, the repeat and why, where
older files wrote ``<arm> repeat <r>: <why>`` (:data:`RunFlags`).
"""

from __future__ import annotations

import re
from typing import Annotated, Any, ClassVar

from pydantic import BeforeValidator, ConfigDict

from bench_plugin.results.server_figures import Sparse


class Reason(Sparse):
    """One reason for a stage's verdict: its sentence, and the items it lists (written only where it has some)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    SPARSE: ClassVar[frozenset[str]] = frozenset({"items"})

    text: str
    items: tuple[str, ...] | None = None
    """What the sentence lists (one run of the stage each, for a load generator that fell behind); None: none."""

    def __str__(self) -> str:
        """The reason as one sentence: ``text`` alone, or ``text: a; b; c``."""
        return f"{self.text}: {'; '.join(self.items)}" if self.items else self.text


def reason(text: str, items: tuple[str, ...] | list[str] | None = None) -> Reason:
    """A Reason of ``text`` listing ``items`` (none where empty)."""
    return Reason(text=text, items=tuple(items) if items else None)


def _split_top(text: str, sep: str) -> list[str]:
    """``text`` split at each ``sep`` outside parentheses and brackets."""
    parts, depth, start, i = [], 0, 0, 0
    while i < len(text):
        char = text[i]
        if char in "([":
            depth += 1
        elif char in ")]":
            depth = max(0, depth - 1)
        elif depth == 0 and text.startswith(sep, i):
            parts.append(text[start:i])
            start = i = i + len(sep)
            continue
        i += 1
    return [*parts, text[start:]]


def from_string(text: str) -> Reason:
    """A reason as a file before ``summary/4`` held it: ``head: a; b; c`` reads as head with items a, b and c, a
    reason of one part as itself; ``; `` and ``: `` inside parentheses or brackets do not split."""
    parts = [p.strip() for p in _split_top(text, "; ") if p.strip()]
    if len(parts) < 2:
        return reason(text.strip())
    head, *rest = _split_top(parts[0], ": ")
    if rest:
        return reason(head.strip(), [": ".join(rest).strip(), *parts[1:]])
    return reason(parts[0], parts[1:])


def _old_form(value: Any) -> Any:
    if isinstance(value, list):
        return [from_string(v) if isinstance(v, str) else v for v in value]
    return value


Reasons = Annotated[list[Reason], BeforeValidator(_old_form)]
"""A stage's reasons; each may be an older file's string, read into its Reason."""


class RunFlag(Sparse):
    """One run (an arm's repeat) that a stage sets apart, and why."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    arm: str
    repeat: int
    why: str

    def __str__(self) -> str:
        """``<arm> repeat <r>: <why>``."""
        return f"{self.arm} repeat {self.repeat}: {self.why}"


_FLAG = re.compile(r"^(?P<arm>.+?) repeat (?P<repeat>\d+): (?P<why>.*)$", re.S)


def _old_flags(value: Any) -> Any:
    """An older file's flags, each ``<arm> repeat <r>: <why>``, as RunFlags."""
    if not isinstance(value, list):
        return value
    out = []
    for v in value:
        found = _FLAG.match(v) if isinstance(v, str) else None
        out.append({"arm": found["arm"], "repeat": int(found["repeat"]), "why": found["why"]} if found else v)
    return out


RunFlags = Annotated[list[RunFlag], BeforeValidator(_old_flags)]
"""The runs a stage sets apart; each may be an older file's string, read into its RunFlag."""
