"""On a host without NVML (this project's CI machine) the sampler says why and the exporter exits 2.

Skipped where NVML works: there test_gpu.py runs the sampler for real.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from bench_plugin.telemetry.exporter import EXIT_NO_NVML
from bench_plugin.telemetry.nvml import NvmlSampler

pytestmark = pytest.mark.skipif(bool(NvmlSampler().available()), reason="NVML works on this host")


def test_sampler_is_unavailable_with_a_reason_and_never_raises() -> None:
    sampler = NvmlSampler(["cuda:0"])
    availability = sampler.available()
    assert not availability
    assert availability.reason.startswith("NVML unavailable: ")
    started = sampler.start()
    assert not started and started.reason == availability.reason
    assert not sampler.running
    assert sampler.drain() == [] and sampler.latest() == []
    sampler.stop()  # a no-op, not an error


def test_polling_an_unstarted_sampler_is_counted_not_raised() -> None:
    sampler = NvmlSampler()
    assert sampler.poll_once() == []
    assert sampler.problems() == {"RuntimeError: the NVML sampler is not started": 1}


def test_exporter_exits_2_with_one_clear_line() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "bench_plugin.telemetry.exporter", "--port", "0"],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert result.returncode == EXIT_NO_NVML == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("bench_plugin.telemetry.exporter: NVML unavailable: ")
    assert "Traceback" not in result.stderr
