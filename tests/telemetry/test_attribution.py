"""Attributing per-process GPU memory to workload classes from a server pid -> class map (pure functions), and from
the marks a server's environment carries."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from bench_plugin.results.placement import CAMPAIGN_ENV, CLASS_ENV
from bench_plugin.results.telemetry_rows import TelemetryRow
from bench_plugin.telemetry import fields as F
from bench_plugin.telemetry.attribution import (
    UNATTRIBUTED,
    ClassValue,
    class_series,
    classify_processes,
    peak_by_class,
    proc_marked_class,
    proc_parent,
    resolve_class,
)

SERVERS = {100: "llm", 200: "embedding", 300: "asr"}
PARENTS = {101: 100, 102: 101, 201: 200, 900: 1, 50: 51, 51: 50}  # 102 is a grandchild; 50 <-> 51 a loop


def test_a_server_pid_is_its_class() -> None:
    assert resolve_class(100, SERVERS) == "llm"
    assert resolve_class("300", SERVERS) == "asr"


def test_a_descendant_takes_its_nearest_servers_class() -> None:
    assert resolve_class(102, SERVERS, PARENTS.get) == "llm"
    assert resolve_class(201, SERVERS, PARENTS.get) == "embedding"


def test_without_a_parent_lookup_only_the_pid_itself_counts() -> None:
    assert resolve_class(102, SERVERS) is None


def test_foreign_processes_and_parent_loops_resolve_to_none() -> None:
    assert resolve_class(900, SERVERS, PARENTS.get) is None
    assert resolve_class(50, SERVERS, PARENTS.get) is None
    assert resolve_class("pod:bench/llm-0", SERVERS, PARENTS.get) is None


def test_classify_marks_the_unknown_as_unattributed() -> None:
    assert classify_processes(["102", "201", "900"], SERVERS, PARENTS.get) == {
        "102": "llm", "201": "embedding", "900": UNATTRIBUTED,
    }


def test_proc_parent_reads_the_live_process_tree() -> None:
    assert proc_parent(os.getpid()) == os.getppid()
    assert proc_parent(2**22 + 12345) is None  # above Linux's pid_max: never a live process


def _mem(t: float, device: str, pid: str, mib: float) -> TelemetryRow:
    return TelemetryRow(t, device, F.PROCESS_MEMORY, mib, pid)


# time-slicing: llm (two processes) and embedding share cuda:0, llm also holds cuda:1, a stranger on cuda:0
ROWS = [
    _mem(1.0, "cuda:0", "101", 1000.0),
    _mem(1.0, "cuda:0", "102", 500.0),
    _mem(1.0, "cuda:0", "201", 300.0),
    _mem(1.0, "cuda:0", "900", 50.0),
    _mem(1.0, "cuda:1", "102", 700.0),
    _mem(2.0, "cuda:0", "101", 1200.0),
    _mem(2.0, "cuda:0", "201", 900.0),
    TelemetryRow(2.0, "cuda:0", F.FB_USED, 99999.0),  # device-wide: not anyone's
    TelemetryRow(2.0, "cuda:0", F.PROCESS_SM_UTIL, 80.0, "101"),  # another metric
]
CLASSES = classify_processes(["101", "102", "201", "900"], SERVERS, PARENTS.get)


def test_class_series_sums_each_class_per_device_and_poll() -> None:
    assert class_series(ROWS, CLASSES) == [
        ClassValue(1.0, "cuda:0", "embedding", 300.0),
        ClassValue(1.0, "cuda:0", "llm", 1500.0),
        ClassValue(1.0, "cuda:0", UNATTRIBUTED, 50.0),
        ClassValue(1.0, "cuda:1", "llm", 700.0),
        ClassValue(2.0, "cuda:0", "embedding", 900.0),
        ClassValue(2.0, "cuda:0", "llm", 1200.0),
    ]


def test_peak_adds_a_class_across_devices_at_one_poll() -> None:
    assert peak_by_class(ROWS, CLASSES) == {"llm": 2200.0, "embedding": 900.0, UNATTRIBUTED: 50.0}


def test_other_metrics_can_be_attributed_too() -> None:
    assert peak_by_class(ROWS, CLASSES, F.PROCESS_SM_UTIL) == {"llm": 80.0}


def test_a_process_missing_from_the_map_is_unattributed() -> None:
    assert peak_by_class(ROWS, {}) == {UNATTRIBUTED: 2550.0}


def test_a_server_started_anew_is_attributed_by_the_class_its_environment_names(tmp_path: Path) -> None:
    """A restarted server is no child of a known server pid: the marks the local backend sets in its environment
    name its class, for this campaign only."""
    campaign = str(tmp_path.resolve())
    env = {**os.environ, CAMPAIGN_ENV: campaign, CLASS_ENV: "embedding"}
    server = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], env=env)
    try:
        assert proc_marked_class(server.pid, campaign) == "embedding"
        assert proc_marked_class(server.pid, campaign + "-other") is None  # another campaign's server: a tenant
        assert proc_marked_class(os.getpid(), campaign) is None  # no marks
    finally:
        server.kill()
        server.wait()
    assert proc_marked_class(server.pid, campaign) is None  # gone
