"""Benchmark: where the test suite's CPU goes, per test file, and what a process costs to start.

    python benchmarks/suite_cpu.py [--top 25] [RUN_TESTS_ARGS...]
    python benchmarks/suite_cpu.py --bytecode-pairs 8

Compiles the package and runs tools/run_tests.py as `make test` does (lanes, then the serial phase;
arguments such as ``--only PATH`` go to it) with benchmarks/suite_cpu_plugin.py loaded into every
pytest, which records each test's CPU: the pytest process's own and that of every process it started
and reaped (servers, ``locust`` masters and workers, a Kubernetes control plane, Chromium). Then times the start-up of
the processes the tests start most: a ``locust`` process's imports, a reference server's (PyTorch),
a synthetic server's. Prints a table per file and one JSON line with the totals and the machine,
so the figures in docs/benchmarks.md can be rerun as they were taken.

``--bytecode-pairs N`` runs no test: it starts a locust process's imports N times with the package's
.pyc files and N times without them, in turn, and prints the CPU of each (the package is installed
editable, so only `make test`'s compile step writes them where PYTHONDONTWRITEBYTECODE is set).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STARTS = {
    "locust + plugin imports": "import locust, bench_plugin.plugin",
    "locust imports alone": "import locust",
    "reference server imports (PyTorch)": "import bench_plugin.servers.llm",
    "synthetic server imports": "import bench_plugin.servers.__main__, bench_plugin.servers.synthetic",
}


def start_cost(code: str, runs: int = 3) -> float:
    """Median CPU-s of a fresh interpreter running ``code``."""
    spent = []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        spent.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return sorted(spent)[len(spent) // 2]


def compile_package() -> None:
    subprocess.run([sys.executable, "-m", "compileall", "-q", "bench_plugin"], cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL)


def bytecode_pairs(pairs: int) -> int:
    """Locust-and-plugin start-up with and without the package's .pyc files, in turn; one JSON line."""
    code = STARTS["locust + plugin imports"]
    with_pyc, without = [], []
    for _ in range(pairs):
        compile_package()
        with_pyc.append(start_cost(code, runs=1))
        for pyc in (ROOT / "bench_plugin").rglob("__pycache__/*.pyc"):
            pyc.unlink()
        without.append(start_cost(code, runs=1))
    compile_package()
    extra = sorted(b - a for a, b in zip(with_pyc, without, strict=True))
    print(json.dumps({"with_pyc_cpu_s": [round(x, 2) for x in with_pyc],
                      "without_pyc_cpu_s": [round(x, 2) for x in without],
                      "extra_without_cpu_s": {"min": round(extra[0], 2), "median": round(extra[len(extra) // 2], 2),
                                              "max": round(extra[-1], 2)},
                      "cpus": os.cpu_count(), "machine": platform.platform(), "python": platform.python_version()}))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=25, help="files shown, most CPU first (default 25)")
    parser.add_argument("--bytecode-pairs", type=int, default=0, metavar="N",
                        help="run no test: time N locust start-ups with and N without the package's .pyc files")
    args, rest = parser.parse_known_args()
    if args.bytecode_pairs:
        return bytecode_pairs(args.bytecode_pairs)
    out = Path(tempfile.mkdtemp(prefix="suite-cpu-")) / "tests.jsonl"
    env = {**os.environ, "SUITE_CPU_OUT": str(out),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "benchmarks"), os.environ.get("PYTHONPATH")])),
           "PYTEST_ADDOPTS": " ".join(filter(None, [os.environ.get("PYTEST_ADDOPTS"), "-p suite_cpu_plugin"]))}
    compile_package()
    begun = time.monotonic()
    code = subprocess.call([sys.executable, str(ROOT / "tools" / "run_tests.py"), *rest], cwd=ROOT, env=env)
    wall = time.monotonic() - begun
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()] if out.is_file() else []
    files: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0])
    for row in rows:
        total = files[row["id"].split("::")[0]]
        total[0] += row["self_s"]
        total[1] += row["children_s"]
        total[2] += row["wall_s"]
        total[3] += 1
    print(f"\n{'CPU-s':>7} {'own':>6} {'reaped':>7} {'wall-s':>7} {'tests':>5}  file")
    for name, (own, reaped, took, n) in sorted(files.items(), key=lambda kv: -(kv[1][0] + kv[1][1]))[:args.top]:
        print(f"{own + reaped:7.1f} {own:6.1f} {reaped:7.1f} {took:7.1f} {n:5d}  {name}")
    starts = {name: round(start_cost(code_), 2) for name, code_ in STARTS.items()}
    for name, spent in starts.items():
        print(f"start-up, {name}: {spent:.2f} CPU-s")
    print(json.dumps({
        "run_tests_exit": code, "wall_s": round(wall, 1), "tests": len(rows),
        "cpu_s": round(sum(r["self_s"] + r["children_s"] for r in rows), 1),
        "pytest_own_cpu_s": round(sum(r["self_s"] for r in rows), 1), "start_up_cpu_s": starts,
        "cpus": os.cpu_count(), "machine": platform.platform(), "python": platform.python_version(),
    }))
    return code


if __name__ == "__main__":
    sys.exit(main())
