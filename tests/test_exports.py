"""The public surface: every name in __all__ resolves, and importing the package loads nothing heavy."""

from __future__ import annotations

import subprocess
import sys

from harness import ROOT

import bench_plugin


def test_all_matches_the_lazy_table() -> None:
    assert sorted(bench_plugin.__all__) == sorted(bench_plugin._EXPORTS)


def test_every_exported_name_resolves() -> None:
    for name in bench_plugin.__all__:
        assert getattr(bench_plugin, name) is not None, name


def test_import_has_no_side_effects() -> None:
    code = ("import sys, bench_plugin; "
            "print(sorted(m for m in ('locust', 'gevent', 'torch') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_a_load_generator_starts_without_the_analysis_libraries() -> None:
    # every worker imports the locustfile at start-up; scipy.stats alone takes about a second to import
    code = ("import sys, locust; sys.path.insert(0, 'locustfiles'); import mixed; "
            "print(sorted(m for m in ('scipy', 'matplotlib', 'torch') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert done.stdout.strip() == "[]"
