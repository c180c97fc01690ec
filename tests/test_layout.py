"""The package's layout, read from its imports: no circle between modules or folders, and folders import down only.

Each ``.py`` file under bench_plugin/ is parsed (nothing is imported) and every ``import`` and ``from ... import``
of the package is an edge, those under ``if TYPE_CHECKING:`` too (a circle through type hints is still a
circle to a reader). The folders' floors are DESIGN.md's, bottom up: scenario, results, then sharing,
telemetry and loadgen, then users and analysis, then run and report, then launch and live; a folder may
import its own floor's folders (without a circle) and those below, never one above. The entry points on top
(plugin, shape, cli) may import anything; nothing else lies on top. servers/ stands apart: it imports
nothing of the rest.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "bench_plugin"

FLOORS = {"scenario": 0, "results": 1, "sharing": 2, "telemetry": 2, "loadgen": 2, "users": 3, "analysis": 3,
          "run": 4, "report": 4, "launch": 5, "live": 5}
"""Folder -> its floor (DESIGN.md, "Target layout")."""


def modules() -> dict[str, Path]:
    """Dotted name -> file, for every module of the package (a package's __init__ under the package's name)."""
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def imported(name: str, path: Path, known: dict[str, Path]) -> Iterator[str]:
    """The package's modules that module ``name`` imports."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names if alias.name in known)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                full = f"{target}.{alias.name}"
                if full in known:
                    yield full
                elif target in known:
                    yield target


def graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports (itself left out)."""
    known = modules()
    return {name: {m for m in imported(name, path, known) if m != name} for name, path in known.items()}


def folder(name: str) -> str:
    """The folder a module lives in (bench_plugin.<folder>....), or the module itself when it lies on top."""
    return name.split(".")[1] if name.count(".") >= 1 else name


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected parts of more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on.add(node)
        for other in edges.get(node, ()):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            part = []
            while True:
                other = stack.pop()
                on.discard(other)
                part.append(other)
                if other == node:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_the_import_reader_sees_what_python_sees() -> None:
    edges = graph()
    assert "bench_plugin.results.samples" in edges["bench_plugin.results.store"]
    assert "bench_plugin.scenario.models" in edges["bench_plugin.scenario.loader"]  # a relative-free from-import
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_circle_between_modules() -> None:
    assert circles(graph()) == []


def test_no_circle_between_folders() -> None:
    between: dict[str, set[str]] = {}
    for name, targets in graph().items():
        between.setdefault(folder(name), set()).update(folder(t) for t in targets if folder(t) != folder(name))
    assert circles(between) == []


def test_folders_import_their_own_floor_or_below() -> None:
    upward = sorted(f"{name} -> {target}" for name, targets in graph().items() for target in targets
                    if folder(name) in FLOORS and folder(target) != folder(name)
                    and FLOORS.get(folder(target), 99) > FLOORS[folder(name)])
    assert upward == []


def test_only_the_entry_points_lie_on_top() -> None:
    on_top = sorted(path.stem for path in PACKAGE.glob("*.py"))
    assert on_top == ["__init__", "cli", "plugin", "shape"]
    assert set(FLOORS) | {"servers", "data"} == {path.name for path in PACKAGE.iterdir()
                                                 if path.is_dir() and path.name != "__pycache__"}


def test_the_command_line_is_read_only_at_launch() -> None:
    """Locust's parsed options are read once, into the launch record (launch/record.py): nowhere else."""
    readers = sorted(str(path.relative_to(PACKAGE)) for path in PACKAGE.rglob("*.py")
                     if "parsed_options" in path.read_text(encoding="utf-8") and path.parent.name != "launch")
    assert readers == []


def test_the_campaigns_record_is_read_only_through_results() -> None:
    """What a campaign records about itself is read as one typed record (results/record.py): the meta table's
    keys are results/'s own business."""
    readers = sorted(str(path.relative_to(PACKAGE)) for path in PACKAGE.rglob("*.py")
                     if "read_meta(" in path.read_text(encoding="utf-8") and path.parent.name != "results")
    assert readers == []


def test_the_reference_servers_stand_apart() -> None:
    inward = sorted(f"{name} -> {target}" for name, targets in graph().items() if folder(name) == "servers"
                    for target in targets if folder(target) != "servers")
    assert inward == []
