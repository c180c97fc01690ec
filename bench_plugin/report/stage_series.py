"""The per-stage GPU series a queried source (Prometheus) returned, beside NVML's figures of the same field.

results.sqlite's ``stage_series`` holds, per stage, the points Prometheus gave for each class's pod or
GPU (bench_plugin.telemetry.prometheus), and ``stage_series_notes`` what was missing. Per trial, one
compact table lists per stage, class, device and metric the mean and peak of those points
(telemetry.stage_series.summarise, the same figures the campaign gets), and beside them the mean and
peak of the device-wide ``telemetry`` rows (NVML's on this host, or a dcgm-exporter scrape's) of the
same DCGM field and device within the stage's window: "-" where those were not sampled (NVML has no
profiling ratios; a pod's device elsewhere). The notes follow the table. A trial with neither rows
nor notes has no table, and a campaign without any has no section.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

from bench_plugin.report.page import Block, Heading, Paragraph, Section, bullets, table
from bench_plugin.results.store import SampledFigures, StageRecord, TrialRecord, read_stage_series, telemetry_figures
from bench_plugin.telemetry.fields import FIELDS, PROFILING_FIELDS
from bench_plugin.telemetry.stage_series import summarise

SOURCE_NAMES = {"prometheus": "Prometheus"}

HEADERS = ("stage", "class", "device", "metric", "{source} mean", "{source} peak", "points", "NVML mean",
           "NVML peak")


@dataclass(frozen=True)
class SeriesFigures:
    """One row of a trial's table: a class's figures for one metric on one device in one stage."""

    stage: str
    """The stage's index and name (``0 low``)."""
    workload: str
    device: str
    metric: str
    mean: float
    peak: float
    points: int
    sampled: SampledFigures | None
    """The telemetry table's figures of the same metric and device in the stage window, if any."""


@dataclass(frozen=True)
class TrialSeries:
    """One trial's table: its rows, in stage order, and the notes (``stage 0 low: ...``)."""

    trial: TrialRecord
    source: str
    rows: list[SeriesFigures]
    notes: list[str]


def _stage_label(stage: StageRecord | None, index: int) -> str:
    return f"{index} {stage.name}" if stage and stage.name else str(index)


def read_trial_series(db: sqlite3.Connection, trials: Sequence[TrialRecord]) -> list[TrialSeries]:
    """The table of every trial that has stage series or notes, in run order."""
    out = []
    for trial in trials:
        records = read_stage_series(db, trial.id)
        for source in dict.fromkeys(r.source for r in records):
            rows: list[SeriesFigures] = []
            notes: list[str] = []
            for record in (r for r in records if r.source == source):
                stage = next((s for s in trial.stages if (s.segment, s.index) == (record.segment, record.stage)), None)
                label = _stage_label(stage, record.stage)
                summaries = summarise(record.rows)
                sampled: dict[tuple[str, str], SampledFigures] = {}
                if stage and stage.started_s is not None and stage.ended_s is not None:
                    sampled = telemetry_figures(db, stage.started_s, stage.ended_s,
                                                sorted({s.metric for s in summaries}))
                rows += [SeriesFigures(label, s.workload, s.device, s.metric, s.mean, s.peak, s.points,
                                       sampled.get((s.device, s.metric))) for s in summaries]
                notes += [f"stage {label}: {note}" for note in record.notes]
            out.append(TrialSeries(trial, source, rows, notes))
    return out


def unit(metric: str) -> str:
    """The unit of a DCGM field (``MiB``, ``W``, ``%``; ``ratio`` for profiling fields); "" for one not known."""
    field = FIELDS.get(metric) or PROFILING_FIELDS.get(metric)
    return field.unit if field is not None else ""


def number(value: float | None, metric: str) -> str:
    """A figure as the table shows it: ratios to 3 decimals, MiB whole, others to 1 decimal."""
    if value is None:
        return "-"
    if metric in PROFILING_FIELDS:
        return f"{value:.3f}"
    return f"{value:.0f}" if unit(metric) == "MiB" else f"{value:.1f}"


def _cells(row: SeriesFigures) -> list[str]:
    sampled = row.sampled
    metric = f"{row.metric} ({unit(row.metric)})" if unit(row.metric) else row.metric
    return [row.stage, row.workload, row.device, metric, number(row.mean, row.metric), number(row.peak, row.metric),
            str(row.points), number(sampled.mean if sampled else None, row.metric),
            number(sampled.peak if sampled else None, row.metric)]


def _headers(source: str) -> list[str]:
    return [h.format(source=SOURCE_NAMES.get(source, source)) for h in HEADERS]


def _title(series: TrialSeries) -> str:
    t = series.trial
    return f"Trial {t.id}: arm {t.arm}, repeat {t.repeat} ({SOURCE_NAMES.get(series.source, series.source)})"


INTRO = ("Per stage, the mean and peak of the points a range query returned for each class's pod or GPU (one "
         "every step over the stage window), beside the mean and peak of the device-wide samples of the same DCGM "
         "field on the same device in the same window that the trial's own telemetry took (NVML on this host): "
         "\"-\" where it did not sample that field. Notes say what could not be had.")


def section(trials: Sequence[TrialSeries]) -> Section | None:
    """The section (None when there is nothing to show): the intro, then per trial its table and its notes."""
    if not trials:
        return None
    blocks: list[Block] = [Paragraph((INTRO,))]
    for series in trials:
        blocks.append(Heading(_title(series)))
        if series.rows:
            blocks.append(table(_headers(series.source), (_cells(r) for r in series.rows), "series"))
        else:
            blocks.append(Paragraph(("No series came back for this trial.",), "note"))
        if series.notes:
            blocks.append(bullets(series.notes, "notes"))
    return Section("gpu-series", "GPU series per stage", tuple(blocks))
