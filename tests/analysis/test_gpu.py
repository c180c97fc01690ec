"""GPU figures per stage: device utilisation and VRAM, each class's own VRAM, into summary.json's stages."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench_plugin.analysis.gpu import stage_gpu
from bench_plugin.report.outputs import summarise
from bench_plugin.results.placement import ClassPlacement, Placement
from bench_plugin.results.recorder import Recorder
from bench_plugin.results.telemetry_rows import TelemetryRow
from bench_plugin.results.timeline import Telemetry
from bench_plugin.scenario import Arm
from bench_plugin.telemetry import fields as F


def polls(t0: float, n: int) -> list[TelemetryRow]:
    """n polls, 0.2 s apart: util ramps 10..; llm's two processes hold 100 and 200+k MiB; one stranger 50."""
    rows = []
    for k in range(n):
        t = t0 + 0.2 * k
        rows += [TelemetryRow(t, "cuda:0", F.GPU_UTIL, 10.0 + k, None),
                 TelemetryRow(t, "cuda:0", F.FB_USED, 1000.0 + k, None),
                 TelemetryRow(t, "cuda:0", F.PROCESS_MEMORY, 100.0, "11"),
                 TelemetryRow(t, "cuda:0", F.PROCESS_MEMORY, 200.0 + k, "12"),
                 TelemetryRow(t, "cuda:0", F.PROCESS_MEMORY, 300.0, "21"),
                 TelemetryRow(t, "cuda:0", F.PROCESS_MEMORY, 50.0, "99")]
    return rows


def test_device_and_class_figures_sum_a_class_over_its_processes() -> None:
    gpu = stage_gpu(polls(0.0, 5), {"11": "llm", "12": "llm", "21": "embedding"})
    util = gpu.devices["cuda:0"]["util_pct"]
    assert (util.mean, util.peak, util.points) == (12.0, 14.0, 5)
    assert gpu.devices["cuda:0"]["vram_used_mib"].peak == 1004.0
    llm = gpu.classes["llm"]["vram_mib"]
    assert (llm.mean, llm.peak, llm.points) == (302.0, 304.0, 5)
    assert gpu.classes["embedding"]["vram_mib"].peak == 300.0
    assert gpu.classes["unattributed"]["vram_mib"].peak == 50.0  # another tenant is shown, not dropped


def test_no_rows_no_figures() -> None:
    gpu = stage_gpu([], {})
    assert gpu.devices == {} and gpu.classes == {}


def test_summary_json_carries_each_stage_s_gpu_figures(tmp_path: Path) -> None:
    rec = Recorder(tmp_path / "results.sqlite")
    rec.add_trial(1, 0, Arm(name="a"), 1)
    rec.segment_applied(1, 0, ["llm", "embedding"], Placement({
        "llm": ClassPlacement(url="http://127.0.0.1:1", device="cuda:0", pid=11),
        "embedding": ClassPlacement(url="http://127.0.0.1:2", device="cuda:0", pid=21)}))
    for stage, start in enumerate((100.0, 110.0)):
        rec.stage_started(1, 0, stage, None, {"llm": 1.0, "embedding": 1.0},
                          {"llm": "poisson", "embedding": "poisson"}, start, planned_s=5.0,
                          arrivals={"llm": 5, "embedding": 5})
        rec.add_telemetry(1, polls(start + 0.1, 5 + stage))
        rec.stage_ended(1, 0, stage, start + 5.0, "completed")
    rec.add_telemetry(1, polls(105.5, 3))  # between the stages: in no stage's figures
    rec.note(Telemetry(segment=0, processes={"11": "llm", "12": "llm", "21": "embedding"}, polls=10, overruns=0,
                       problems={}), 1)
    rec.trial_ended(1, "completed")
    rec.close()
    stages = json.loads(summarise(tmp_path).to_json())["trials"][0]["stages"]
    assert [s["gpu"]["devices"]["cuda:0"]["util_pct"]["points"] for s in stages] == [5, 6]
    assert stages[1]["gpu"]["classes"]["llm"]["vram_mib"] == {"mean": pytest.approx(302.5), "peak": 305.0,
                                                              "points": 6}
    assert stages[0]["gpu"]["classes"]["embedding"]["vram_mib"]["mean"] == 300.0
