"""The document's words (results/words.py): no status or call compared as a literal, and every committed one a member.

Each ``.py`` file under bench_plugin/ is parsed (nothing is imported): a comparison (``==``, ``!=``, ``in``,
``not in``) with a string, or a tuple, list or set of strings, whose value is one of the words enums' values,
and a ``match`` case on such a string, is reported with its file and line; it must compare with the member
instead. Then the committed summaries under docs/results/ are read: each status, call, outcome and phase they
hold is a value of its enum, so the files written before the enums still read as they did.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Iterator
from enum import StrEnum
from pathlib import Path
from typing import Any

import pytest

from bench_plugin.results import words
from bench_plugin.results.words import (
    BoundaryStatus,
    Call,
    CampaignState,
    GeneratorLimit,
    Hold,
    Phase,
    ProbeOutcome,
    SearchStatus,
    Significance,
    StageStatus,
    TrialStatus,
)

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "bench_plugin"
WORDS = PACKAGE / "results" / "words.py"
RESULTS = ROOT / "docs" / "results"

ALLOWED: frozenset[tuple[str, str]] = frozenset()
"""(file under bench_plugin/, value) where a literal spelled like one of the words means something else there,
each with a comment saying what. None does today: where such a spelling means something else (``running``, a
server's requests in flight in results/server_rows.py and a column of the live page, or a container's state in
sharing/kubernetes/; ``failed``, a request's error text) it is a name, a key or a default, never compared."""


def enums() -> list[type[StrEnum]]:
    """The StrEnums results/words.py defines."""
    return [value for value in vars(words).values()
            if isinstance(value, type) and issubclass(value, StrEnum) and value.__module__ == words.__name__]


def word_values() -> dict[str, list[str]]:
    """Each value of the words enums -> the members that spell it (``StageStatus.COMPLETED``, ...)."""
    out: dict[str, list[str]] = {}
    for enum in enums():
        for member in enum:
            out.setdefault(member.value, []).append(f"{enum.__name__}.{member.name}")
    return out


def strings(node: ast.expr) -> Iterator[ast.Constant]:
    """The string constants ``node`` is, or holds as a tuple, list or set display."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        yield node
    elif isinstance(node, ast.Tuple | ast.List | ast.Set):
        for element in node.elts:
            yield from strings(element)


def literals(tree: ast.AST) -> Iterator[ast.Constant]:
    """Every string constant that a comparison or a ``match`` case of ``tree`` compares with."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for side in (node.left, *node.comparators):
                yield from strings(side)
        elif isinstance(node, ast.MatchValue):
            yield from strings(node.value)


def compared_words() -> list[str]:
    """``file:line: 'value' (the member to use)`` for each literal word compared outside words.py."""
    values = word_values()
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == WORDS:
            continue
        where = path.relative_to(PACKAGE).as_posix()
        for constant in literals(ast.parse(path.read_text(encoding="utf-8"))):
            if constant.value in values and (where, constant.value) not in ALLOWED:
                found.append(f"bench_plugin/{where}:{constant.lineno}: {constant.value!r} "
                             f"({' or '.join(values[constant.value])})")
    return found


def test_no_status_or_call_is_compared_as_a_literal() -> None:
    found = compared_words()
    assert not found, "compare with the member of results/words.py instead:\n" + "\n".join(found)


def test_the_check_sees_comparisons_and_match_cases() -> None:
    tree = ast.parse('if s.status == "aborted" or x in ("found", "other"):\n    pass\n'
                     'match call:\n    case "worth it" | "loss":\n        pass\n')
    assert sorted(c.value for c in literals(tree) if c.value in word_values()) == ["aborted", "found", "loss",
                                                                                   "worth it"]


def test_each_allowed_literal_is_still_there() -> None:
    """An allowance whose literal has gone is dropped, so the list stays as short as the code needs."""
    for where, value in ALLOWED:
        tree = ast.parse((PACKAGE / where).read_text(encoding="utf-8"))
        assert any(c.value == value for c in literals(tree)), f"{where}: no {value!r} compared any more"


def test_words_has_no_duplicate_within_an_enum() -> None:
    for enum in enums():
        assert len({m.value for m in enum}) == len(list(enum)), enum.__name__


def summaries() -> list[Path]:
    """The committed summaries (summary.json, and the earlier ones some results keep beside it)."""
    return sorted(RESULTS.rglob("*summary.json"))


def judged(node: Any) -> Iterator[dict[str, Any]]:
    """Every paired figure (a ``Judged``: it has ``significant`` and ``call``) anywhere under ``node``."""
    if isinstance(node, dict):
        if "significant" in node and "call" in node:
            yield node
        for value in node.values():
            yield from judged(value)
    elif isinstance(node, list):
        for value in node:
            yield from judged(value)


def words_of(summary: dict[str, Any]) -> Iterator[tuple[str, str | None, tuple[type[StrEnum], ...]]]:
    """(where, the word, the enums it may belong to) for each status, call, outcome and phase of a summary."""
    status = summary["status"]
    yield "status.status", status["status"], (CampaignState,)
    for resume in status.get("resumed", []):
        yield "status.resumed[].previous_status", resume.get("previous_status"), (CampaignState,)
    for trial in summary["trials"]:
        yield "trials[].status", trial["status"], (TrialStatus,)
        for stage in trial["stages"]:
            yield "trials[].stages[].status", stage["status"], (StageStatus,)
            check = stage.get("generator_check") or {}
            yield "trials[].stages[].generator_check.kind", check.get("kind"), (GeneratorLimit,)
        for result in trial.get("search", []):
            yield "trials[].search[].status", result["status"], (SearchStatus,)
            yield "trials[].search[].sustain", result.get("sustain"), (Hold,)
        for probe in trial.get("probes", []):
            yield "trials[].probes[].phase", probe["phase"], (Phase,)
            decision = probe.get("decision") or {}
            yield "trials[].probes[].decision.outcome", decision.get("outcome"), (ProbeOutcome,)
            for check in decision.get("checks", []):
                yield "trials[].probes[].decision.checks[].outcome", check["outcome"], (ProbeOutcome,)
    for arm in summary["comparison"]["arms"].values():
        boundary = arm["boundary"]
        # a searched arm's boundary is its search's status
        yield "comparison.arms.<arm>.boundary.status", boundary["status"], (BoundaryStatus, SearchStatus)
        for repeat in boundary.get("per_repeat", []):
            yield "comparison.arms.<arm>.boundary.per_repeat[].status", repeat["status"], (BoundaryStatus,)
        for stage in arm.get("stages", []):
            yield "comparison.arms.<arm>.stages[].verdict", stage.get("verdict"), (Call,)
        yield "comparison.arms.<arm>.verdict.call", (arm.get("verdict") or {}).get("call"), (Call,)
        yield "comparison.arms.<arm>.answer.call", (arm.get("answer") or {}).get("call"), (Call,)
        for repeat in (arm.get("search") or {}).get("per_repeat", []):
            yield "comparison.arms.<arm>.search.per_repeat[].status", repeat["status"], (SearchStatus,)
        for ray in (arm.get("envelope") or {}).get("rays", []):
            # one status per repeat that ended so (summary/4); before, repeats that disagreed were named together in one
            # string: "found, above the maximum"
            status = ray["status"]
            for part in status if isinstance(status, list) else status.split(", "):
                yield "comparison.arms.<arm>.envelope.rays[].status", part, (SearchStatus,)
            for repeat in ray.get("per_repeat", []):
                yield "comparison.arms.<arm>.envelope.rays[].per_repeat[].status", repeat["status"], (SearchStatus,)
                yield "comparison.arms.<arm>.envelope.rays[].per_repeat[].sustain", repeat.get("sustain"), (Hold,)
    for figure in judged(summary):
        yield "<a paired figure>.call", figure["call"], (Significance,)


def member(word: str, kinds: tuple[type[StrEnum], ...]) -> bool:
    """Whether ``word`` is a value of one of ``kinds`` (an inconclusive call names its repeats after the word)."""
    if Call in kinds and word.startswith(f"{Call.INCONCLUSIVE} ("):
        return True
    return any(word in {m.value for m in kind} for kind in kinds)


@pytest.mark.parametrize("path", summaries(), ids=lambda p: p.relative_to(RESULTS).as_posix())
def test_every_committed_word_is_a_member_of_its_enum(path: Path) -> None:
    summary = json.loads(path.read_text(encoding="utf-8"))
    seen = 0
    strays = set()
    for where, word, kinds in words_of(summary):
        if word is None:
            continue
        seen += 1
        if not member(word, kinds):
            strays.add(f"{where}: {word!r} is no {' or '.join(k.__name__ for k in kinds)}")
    assert seen, "no word read: the summary's layout changed under this test"
    assert not strays, "\n".join(sorted(strays))


def test_the_committed_summaries_are_found() -> None:
    assert len(summaries()) >= 5, summaries()
