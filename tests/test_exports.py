"""The public surface: every name in __all__ resolves, and importing the package loads nothing heavy."""

from __future__ import annotations

import subprocess
import sys

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
