"""No string of the document is parsed back for structure: what the analysis, the results and the report know as
parts (a unit, a criterion, a prefix naming why a stage stopped) they carry as fields, and make words of where they
show them.

Each ``.py`` file under bench_plugin/analysis, results and report is parsed (nothing is imported), and every call
that takes a string apart is listed: ``split``, ``rsplit``, ``partition``, ``rpartition``, ``removeprefix``,
``removesuffix``, ``startswith``, ``endswith`` and the ``re`` module's functions. What remains is in
:data:`ALLOWED`, each with what it reads: a file written before its fields were (the one reader of an older form),
or text that is not the document's (a Kubernetes name, an SVG, the interpreter's version).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "bench_plugin"
SCANNED = ("analysis", "results", "report")

METHODS = frozenset({"split", "rsplit", "partition", "rpartition", "removeprefix", "removesuffix", "startswith",
                     "endswith"})

ALLOWED: dict[tuple[str, str], str] = {
    ("report/figures.py", "re.compile"): "matplotlib's SVG, made safe to inline (ids, sizes)",
    ("report/pod_panel.py", "startswith"): "a pod's name, which Kubernetes gave it",
    ("analysis/summary.py", "removeprefix"): "results.sqlite's reason of a stage the campaign stopped for a protocol "
                                             "error (stages.reason), as the store holds it",
    ("analysis/summary.py", "startswith"): "the same stored reason",
    ("analysis/verdict.py", "startswith"): "a stored call of inconclusive carries its count of repeats "
                                           "(``inconclusive (1 repeat)``), as summary.json has always written it",
    ("results/facts.py", "removesuffix"): "a node's nvidia.com/gpu.product label (the device plugin's -SHARED)",
    ("results/limits.py", "re.compile"): "the reader of summary/2's joined limits",
    ("results/limits.py", "re.escape"): "the same reader",
    ("results/limits.py", "re.fullmatch"): "the same reader",
    ("results/limits.py", "split"): "the same reader (plan/1's first_limit too)",
    ("results/reasons.py", "re.compile"): "the reader of summary/3's joined run flags",
    ("results/reasons.py", "startswith"): "the reader of summary/3's joined reasons",
    ("results/summary/envelope.py", "split"): "the reader of summary/3's joined ray statuses",
    ("results/summary/__init__.py", "startswith"): "a file's schema name, to refuse another tool's",
    ("results/samples.py", "startswith"): "a request's error kind (``http_4xx``) as the store holds it",
    ("results/store.py", "split"): "the store's own SQL schema",
    ("results/provenance.py", "split"): "the interpreter's version string",
}
"""(file under bench_plugin/, call) -> what it takes apart, which is not the document's own structure."""


def calls(tree: ast.AST) -> Iterator[tuple[str, int]]:
    """(``method`` or ``re.function``, line) for each call of ``tree`` that takes a string apart."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            func = node.func
            if isinstance(func.value, ast.Name) and func.value.id == "re":
                yield f"re.{func.attr}", node.lineno
            elif func.attr in METHODS:
                yield func.attr, node.lineno


def found() -> dict[tuple[str, str], list[int]]:
    out: dict[tuple[str, str], list[int]] = {}
    for folder in SCANNED:
        for path in sorted((PACKAGE / folder).rglob("*.py")):
            where = path.relative_to(PACKAGE).as_posix()
            for call, line in calls(ast.parse(path.read_text(encoding="utf-8"))):
                out.setdefault((where, call), []).append(line)
    return out


def test_no_string_of_the_document_is_parsed_back() -> None:
    parsed = [f"bench_plugin/{where}:{lines[0]}: {call}" for (where, call), lines in found().items()
              if (where, call) not in ALLOWED]
    assert not parsed, "carry the part as a field instead of taking the words apart:\n" + "\n".join(parsed)


def test_the_check_sees_each_way_of_taking_a_string_apart() -> None:
    tree = ast.parse('a.split(" (")[0]\nb.removeprefix("x: ")\nre.search(r"\\(in (.+)\\)", c)\n'
                     'd.startswith("p")\ne.join(f)\n')
    assert sorted(call for call, _ in calls(tree)) == ["re.search", "removeprefix", "split", "startswith"]


def test_each_allowance_is_still_needed() -> None:
    """An allowance whose call has gone is dropped, so the list stays as short as the code needs."""
    assert not set(ALLOWED) - set(found())
