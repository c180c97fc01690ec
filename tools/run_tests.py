"""Runs the test suite in lanes side by side, then the timing-strict tests alone.

    python tools/run_tests.py [--lanes N] [--record] [--only PATH ...] [PYTEST_ARGS...]
    python tools/run_tests.py --record-from DIR [--record-from DIR ...]

Most tests wait on real processes (servers starting, stages of a few seconds, workers joining) and
use a fraction of the machine, so three pytest processes over disjoint sets of test files, even on
two cores, finish in well under half the time of one. Tests marked ``serial`` need a quiet host: they compare
timings against a reference measured on one (the harness's accuracy, one process against N workers), or need
their load generator to keep up over several stages in a row (a search whose probes must be judged), or take
the whole host themselves (processes that spin on every core); they are skipped in the lanes and run afterwards
on their own.

Files that use the same session fixture (a shared campaign, a rendered report) go to the same lane,
so that fixture runs once (the Kubernetes control plane too: started in seconds, but its API server and
etcd then cost CPU all the while it is up, which the other lanes' tests wait for). Lanes are balanced by the
durations recorded in tests/durations.json (``--record`` rewrites it from this run's lanes, so a
file counts only its tests outside the serial phase; ``--record-from`` from the mean of earlier runs' lanes,
each run's directory as this prints it, and runs no test); a file not in it counts as DEFAULT_S. Each
lane's output goes to a log that is printed whole if the lane fails, and as its last line otherwise.
Exit status: 0 when every lane and the serial phase passed, else the first failing pytest status.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
DURATIONS = TESTS / "durations.json"
DEFAULT_S = 5.0
SERIAL = re.compile(r"\bpytest\.mark\.serial\b")
SIGNATURE = re.compile(r"\bdef \w+\(([^)]*)\)")
FIXTURE = re.compile(r"@pytest\.fixture(\([^)]*\))?\s*\ndef (\w+)\(([^)]*)\)")
NO_TESTS = 5  # pytest's exit status when a selection holds no test


@dataclass
class Lane:
    """One pytest process over a set of test files."""

    index: int
    files: list[Path] = field(default_factory=list)
    weight: float = 0.0


def test_files() -> list[Path]:
    return sorted(p for p in TESTS.rglob("test_*.py") if "node_modules" not in p.parts)


def select(files: list[Path], only: list[Path]) -> list[Path]:
    """The ``files`` at or under one of the ``only`` paths (every file when none is given); ValueError
    naming a path that does not exist or holds none of them."""
    if not only:
        return files
    chosen: set[Path] = set()
    for path in only:
        full = path.resolve()
        if not full.exists():
            raise ValueError(f"--only {path}: no such file or directory")
        hits = {f for f in files if f == full or full in f.parents}
        if not hits:
            raise ValueError(f"--only {path}: holds no test file (tests/**/test_*.py)")
        chosen |= hits
    return sorted(chosen)


def parameters(text: str) -> set[str]:
    """The parameter names of every function in ``text``: the fixtures its tests and fixtures ask for."""
    return {m.group(1) for args in SIGNATURE.findall(text) for part in args.split(",")
            if (m := re.match(r"\s*\*{0,2}(\w+)", part))}


def session_fixtures() -> dict[str, list[tuple[Path, set[str]]]]:
    """Each fixture of the suite's conftest files -> (the folder it serves, the session-scoped fixtures it is
    or depends on), one entry per conftest that defines it."""
    direct: dict[tuple[Path, str], set[str]] = {}
    params: dict[tuple[Path, str], set[str]] = {}
    for conftest in TESTS.rglob("conftest.py"):
        if "node_modules" in conftest.parts:
            continue
        for scope, name, args in FIXTURE.findall(conftest.read_text(encoding="utf-8")):
            direct[(conftest.parent, name)] = {name} if 'scope="session"' in scope else set()
            params[(conftest.parent, name)] = parameters(f"def {name}({args})")
    defined: dict[str, list[tuple[Path, str]]] = defaultdict(list)
    for where, name in direct:
        defined[name].append((where, name))
    out = {key: set(found) for key, found in direct.items()}
    changed = True
    while changed:  # a fixture that takes a session fixture (or one that does) shares its lane
        changed = False
        for (where, name), takes in params.items():
            inherited = set().union(*(out[key] for t in takes if (key := visible(defined, t, where))))
            if not inherited <= out[(where, name)]:
                out[(where, name)] |= inherited
                changed = True
    result: dict[str, list[tuple[Path, set[str]]]] = defaultdict(list)
    for (where, name), found in out.items():
        if found:
            result[name].append((where, found))
    return result


def visible(defined: dict[str, list[tuple[Path, str]]], name: str, path: Path) -> tuple[Path, str] | None:
    """The definition of fixture ``name`` that ``path`` sees: the one of the nearest conftest above it."""
    above = [key for key in defined.get(name, []) if path == key[0] or key[0] in path.parents]
    return max(above, key=lambda key: len(key[0].parts), default=None)


def groups(files: list[Path]) -> list[list[Path]]:
    """The files, grouped so that files asking for the same session fixture (as a parameter of a test or of
    one of their fixtures, from a conftest above them) share a group."""
    fixtures = session_fixtures()
    defined = {name: [(where, name) for where, _ in entries] for name, entries in fixtures.items()}
    shared_by = {(where, name): found for name, entries in fixtures.items() for where, found in entries}
    parent = {f: f for f in files}

    def root(f: Path) -> Path:
        while parent[f] != f:
            f = parent[f]
        return f

    users: dict[str, list[Path]] = defaultdict(list)
    for f in files:
        for name in parameters(f.read_text(encoding="utf-8")):
            key = visible(defined, name, f)
            for session in shared_by[key] if key else set():
                users[session].append(f)
    for shared in users.values():
        for other in shared[1:]:
            parent[root(other)] = root(shared[0])
    out: dict[Path, list[Path]] = defaultdict(list)
    for f in files:
        out[root(f)].append(f)
    return list(out.values())


def recorded() -> dict[str, float]:
    if not DURATIONS.is_file():
        return {}
    return {str(k): float(v) for k, v in json.loads(DURATIONS.read_text(encoding="utf-8")).items()}


def plan(files: list[Path], lanes: int) -> list[Lane]:
    """Greedy balance: the heaviest group first, each to the lightest lane; a lane left without files is
    dropped (pytest given no file would run every test)."""
    weights = recorded()

    def weight(f: Path) -> float:
        return weights.get(str(f.relative_to(ROOT)), DEFAULT_S)

    out = [Lane(i + 1) for i in range(lanes)]
    for group in sorted(groups(files), key=lambda g: -sum(map(weight, g))):
        lane = min(out, key=lambda lane: lane.weight)
        lane.files += group
        lane.weight += sum(map(weight, group))
    return [lane for lane in out if lane.files]


def file_times(junit: Path, keep: set[tuple[str, str]] | None = None) -> dict[str, float]:
    """Seconds per test file from a JUnit XML report (setup, call and teardown of each test); with ``keep``,
    only the tests whose (file, function) is in it."""
    out: dict[str, float] = defaultdict(float)
    if not junit.is_file():
        return out
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = case.get("classname", "")
        if not name:
            continue
        parts = name.split(".")
        for cut in range(len(parts), 0, -1):  # the class name is module[.Class]: find the file
            path = ROOT.joinpath(*parts[:cut]).with_suffix(".py")
            if path.is_file():
                file = str(path.relative_to(ROOT))
                if keep is None or (file, case.get("name", "").split("[")[0]) in keep:
                    out[file] += float(case.get("time", 0.0))
                break
    return out


def lane_tests() -> set[tuple[str, str]]:
    """(file, function) of every test the lanes run today, as pytest collects them: a test since marked
    ``serial`` no longer weighs in its file's lane time."""
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                           "-m", "not serial"], cwd=ROOT, capture_output=True, text=True, check=False)
    if done.returncode not in (0, NO_TESTS):
        raise ValueError(f"the tests could not be collected (pytest exit {done.returncode}): "
                         f"{last_line_of(done.stdout + done.stderr)}")
    return {(node.split("::")[0], node.split("::")[-1].split("[")[0])
            for node in done.stdout.splitlines() if "::" in node}


def lane_reports(work: Path) -> list[Path]:
    """The lanes' JUnit reports in a run's directory; ValueError naming a directory without one."""
    junits = sorted(work.glob("lane-*.xml"))
    if not junits:
        raise ValueError(f"--record-from {work}: no lane-*.xml in it (a directory a run of this tool printed)")
    return junits


def lane_times(work: Path, keep: set[tuple[str, str]] | None = None) -> dict[str, float]:
    """Seconds per test file over the lanes of the run whose directory is ``work`` (the serial phase runs alone,
    so it does not weigh in the balance), of the tests in ``keep`` where given (empty without a lane report);
    ValueError naming a report it cannot read."""
    out: dict[str, float] = defaultdict(float)
    for junit in sorted(work.glob("lane-*.xml")):
        try:
            times = file_times(junit, keep)
        except ET.ParseError as exc:
            raise ValueError(f"--record-from {work}: {junit.name} is not a JUnit XML report ({exc})") from None
        for path, seconds in times.items():
            out[path] += seconds
    return out


def mean_times(runs: list[dict[str, float]]) -> dict[str, float]:
    """Per file, the mean of its seconds over the runs that measured it."""
    seen: dict[str, list[float]] = defaultdict(list)
    for run in runs:
        for path, seconds in run.items():
            seen[path].append(seconds)
    return {path: sum(times) / len(times) for path, times in seen.items()}


def write_durations(measured: dict[str, float]) -> None:
    """tests/durations.json with ``measured``; a file not in it (a lane that stopped early, a selection) keeps its
    last figure."""
    times = {**recorded(), **measured}
    DURATIONS.write_text(json.dumps({k: round(v, 1) for k, v in sorted(times.items())}, indent=1) + "\n",
                         encoding="utf-8")
    print(f"wrote {DURATIONS}", flush=True)


def pytest_command(files: list[Path], marker: str, junit: Path, basetemp: Path, extra: list[str]) -> list[str]:
    return [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "junit_family=xunit1", "-m", marker,
            f"--junitxml={junit}", f"--basetemp={basetemp}", *extra, *map(str, files)]


def last_line_of(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "(no output)"


def last_line(log: Path) -> str:
    return last_line_of(log.read_text(encoding="utf-8", errors="replace"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lanes", type=int, default=3, help="pytest processes side by side (default 3)")
    parser.add_argument("--record", action="store_true", help="rewrite tests/durations.json from this run")
    parser.add_argument("--record-from", action="append", type=Path, default=[], metavar="DIR",
                        help="rewrite tests/durations.json from the mean of earlier runs' lanes, each run's "
                             "directory (bench-tests-*) as it printed it (repeatable); runs no test")
    parser.add_argument("--only", action="append", type=Path, default=[], metavar="PATH",
                        help="run only the test files at or under PATH (repeatable; default: every test file)")
    args, extra = parser.parse_known_args(argv)
    if args.lanes < 1:
        parser.error(f"--lanes {args.lanes}: give 1 or more")
    if args.record_from:
        if args.record or args.only or extra:
            parser.error("--record-from runs no test: give it alone")
        try:
            for work in args.record_from:
                lane_reports(work)  # a directory without one is named before the tests are collected (a while)
            keep = lane_tests()
            runs = [lane_times(work, keep) for work in args.record_from]
        except ValueError as exc:
            parser.error(str(exc))
        write_durations(mean_times(runs))
        return 0
    try:
        files = select(test_files(), args.only)
    except ValueError as exc:
        parser.error(str(exc))
    serial = [f for f in files if SERIAL.search(f.read_text(encoding="utf-8"))]
    work = Path(tempfile.mkdtemp(prefix="bench-tests-"))
    start = time.monotonic()
    lanes = plan(files, args.lanes)
    running = []
    for lane in lanes:
        log = work / f"lane-{lane.index}.log"
        command = pytest_command(lane.files, "not serial", work / f"lane-{lane.index}.xml",
                                 work / f"lane-{lane.index}", extra)
        with log.open("w", encoding="utf-8") as out:
            running.append((lane, log, subprocess.Popen(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)))
        print(f"lane {lane.index}: {len(lane.files)} files (about {lane.weight:.0f} s), log {log}", flush=True)
    status = 0
    for lane, log, process in running:
        code = process.wait()
        took = time.monotonic() - start
        if code in (0, NO_TESTS):
            print(f"lane {lane.index} done at {took:.0f} s: {last_line(log)}", flush=True)
        else:
            print(f"lane {lane.index} FAILED (pytest exit {code}) at {took:.0f} s; its output:", flush=True)
            print(log.read_text(encoding="utf-8", errors="replace"), flush=True)
            status = status or code
    lanes_s = time.monotonic() - start
    serial_s = 0.0
    if serial:
        print(f"serial: {len(serial)} files alone ({', '.join(str(f.relative_to(ROOT)) for f in serial)})",
              flush=True)
        begun = time.monotonic()
        code = subprocess.call(pytest_command(serial, "serial", work / "serial.xml", work / "serial", extra),
                               cwd=ROOT)
        serial_s = time.monotonic() - begun
        if code not in (0, NO_TESTS):
            status = status or code
    print(f"tests: {args.lanes} lanes side by side {lanes_s:.0f} s, then serial {serial_s:.0f} s; "
          f"{time.monotonic() - start:.0f} s in all", flush=True)
    if args.record:
        write_durations(lane_times(work))
    return status


if __name__ == "__main__":
    sys.exit(main())
