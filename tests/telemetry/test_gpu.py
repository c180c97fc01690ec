"""The NVML sampler, exporter and scraper on a real GPU: runs gpu_check.py where NVML works, else skips.

This is the only test in which the NVML calls themselves run; on the lent H200 it was run as the plain
script (its report is summarised in docs/telemetry.md).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from gpu_check import run_check

from bench_plugin.telemetry.nvml import NvmlSampler


@pytest.mark.slow
@pytest.mark.skipif(not NvmlSampler().available(), reason="needs NVML and a GPU")
@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="the check's GPU load uses torch")
def test_sampler_exporter_and_scraper_on_a_gpu(tmp_path: Path) -> None:
    report = run_check(tmp_path)
    assert report["failures"] == [], report
