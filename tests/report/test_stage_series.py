"""The per-stage GPU series table: Prometheus's figures beside NVML's, per trial, only where there are any."""

from __future__ import annotations

import re
import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from bench_plugin.report.html import write_report
from bench_plugin.results.recorder import Recorder
from bench_plugin.results.store import open_campaign
from bench_plugin.results.telemetry_rows import TelemetryRow
from bench_plugin.telemetry import fields as F

pytestmark = pytest.mark.cpu_bound

MakeCampaign = Callable[..., Path]
NOTE = "DCGM_FI_PROF_SM_ACTIVE: no series for llm (pod bench/llm-0, UUID GPU-1234)"


def stage_window(results: Path, trial: int, stage: int) -> tuple[float, float]:
    """When stage ``stage`` of segment 0 of ``trial`` started and ended."""
    with open_campaign(results / "results.sqlite") as reader:
        (record,) = (t for t in reader.trials() if t.id == trial)
    (found,) = (s for s in record.stages if s.segment == 0 and s.index == stage)
    assert found.started_s is not None and found.ended_s is not None, found
    return float(found.started_s), float(found.ended_s)


def nvml_figures(results: Path, start: float, end: float, metric: str) -> tuple[float, float]:
    """The oracle: mean and peak of every device-wide telemetry row in the window (read whole, not thinned), worked
    out here rather than by the SQL aggregate the report uses."""
    with open_campaign(results / "results.sqlite") as reader:
        series = reader.telemetry_series(start, end, [metric], max_points=sys.maxsize)
    values = [float(v) for line in series if line.process is None for v in line.value]
    assert values
    return sum(values) / len(values), max(values)


def add_series(results: Path, trial: int, stage: int, rows: dict[str, list[TelemetryRow]], notes: list[str]) -> None:
    rec = Recorder(results / "results.sqlite")
    rec.add_stage_series(trial, 0, stage, "prometheus", rows, notes)
    rec.close()


def section(text: str) -> str:
    match = re.search(r'<section id="gpu-series">.*?</section>', text, re.S)
    assert match, "no gpu-series section"
    return match.group(0)


def test_prometheus_figures_sit_beside_nvml_figures_per_stage_and_class(make_campaign: MakeCampaign) -> None:
    results = make_campaign()
    start, end = stage_window(results, 2, 0)
    mid = (start + end) / 2
    process = "pod:bench/llm-0"
    rows = {"llm": [TelemetryRow(start, "cuda:0", F.GPU_UTIL, 40.0, process),
                    TelemetryRow(mid, "cuda:0", F.GPU_UTIL, 60.0, process),
                    TelemetryRow(start, "cuda:0", F.FB_USED, 1000.0, process),
                    TelemetryRow(mid, "cuda:0", F.FB_USED, 3000.0, process),
                    TelemetryRow(start, "cuda:0", F.PROF_GR_ENGINE_ACTIVE, 0.25, process),
                    TelemetryRow(mid, "cuda:0", F.PROF_GR_ENGINE_ACTIVE, 0.75, process)],
            "embedding": []}
    add_series(results, 2, 0, rows, [NOTE])
    text = write_report(results).read_text(encoding="utf-8")
    html = section(text)
    util_mean, util_peak = nvml_figures(results, start, end, F.GPU_UTIL)
    fb_mean, fb_peak = nvml_figures(results, start, end, F.FB_USED)
    assert "Trial 2: arm shared, repeat 1 (Prometheus)" in html
    assert ("<tr><td>0 low</td><td>llm</td><td>cuda:0</td><td>DCGM_FI_DEV_GPU_UTIL (%)</td><td>50.0</td>"
            f"<td>60.0</td><td>2</td><td>{util_mean:.1f}</td><td>{util_peak:.1f}</td></tr>") in html
    assert ("<tr><td>0 low</td><td>llm</td><td>cuda:0</td><td>DCGM_FI_DEV_FB_USED (MiB)</td><td>2000</td>"
            f"<td>3000</td><td>2</td><td>{fb_mean:.0f}</td><td>{fb_peak:.0f}</td></tr>") in html
    assert ("<td>DCGM_FI_PROF_GR_ENGINE_ACTIVE (ratio)</td><td>0.500</td><td>0.750</td><td>2</td>"
            "<td>-</td><td>-</td></tr>") in html  # NVML has no profiling ratios
    assert "<li>stage 0 low: DCGM_FI_PROF_SM_ACTIVE: no series for llm (pod bench/llm-0, UUID GPU-1234)</li>" in html
    assert "Trial 1:" not in html and "Trial 4:" not in html  # no series there: no table
    assert text.index('id="timelines"') < text.index('id="gpu-series"') < text.index('id="errors"')
    md = (results / "report.md").read_text(encoding="utf-8")
    assert "## GPU series per stage" in md and "### Trial 2: arm shared, repeat 1 (Prometheus)" in md
    assert (f"| 0 low | llm | cuda:0 | DCGM_FI_DEV_GPU_UTIL (%) | 50.0 | 60.0 | 2 | {util_mean:.1f} "
            f"| {util_peak:.1f} |") in md
    assert f"- stage 0 low: {NOTE}" in md
    assert md.index("## Per-stage figures") < md.index("## GPU series per stage") < md.index("## Measurement checks")


def test_notes_alone_still_say_what_was_missing(make_campaign: MakeCampaign) -> None:
    results = make_campaign()
    note = "Prometheus at http://127.0.0.1:1 unreachable: Connection refused; no series for DCGM_FI_DEV_GPU_UTIL"
    add_series(results, 3, 1, {"llm": []}, [note])
    html = section(write_report(results).read_text(encoding="utf-8"))
    assert "No series came back for this trial." in html
    assert f"<li>stage 1 high: {note}</li>" in html


@pytest.mark.parametrize("tables", ["empty", "absent"])
def test_no_stage_series_means_no_section(make_campaign: MakeCampaign, tables: str) -> None:
    results = make_campaign()
    if tables == "absent":  # a store written before the recorder had these tables
        db = sqlite3.connect(results / "results.sqlite")
        db.execute("DROP TABLE stage_series")
        db.execute("DROP TABLE stage_series_notes")
        db.commit()
        db.close()
    text = write_report(results).read_text(encoding="utf-8")
    assert 'id="gpu-series"' not in text and "GPU series per stage" not in text
    assert "GPU series per stage" not in (results / "report.md").read_text(encoding="utf-8")
