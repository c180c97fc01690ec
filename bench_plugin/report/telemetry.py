"""GPU telemetry panels of a trial's timeline: which series are drawn, and how.

results.sqlite's ``telemetry`` table holds rows ``(t, device, metric, value, process)`` from NVML or a
dcgm-exporter scrape, with DCGM field names for device-wide series and ``bench_process_*`` names for
per-process ones (bench_plugin.telemetry writes them). The timeline draws what answers the seed's
questions — is the GPU busy, and whose memory is on it — one panel each, device-wide series as thick
lines and each process as a thin line in its class's colour (its pid is matched to the server the
backend placed). Other recorded series (clocks, temperature, energy) stay in results.sqlite. With no
table, or no rows in the trial's window, there is no panel.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from matplotlib.axes import Axes

from bench_plugin.report.figures import DataMarks, class_colour, plain_y
from bench_plugin.results.store import TelemetrySeries, TrialRecord
from bench_plugin.telemetry.fields import (
    FB_TOTAL,
    FB_USED,
    FIELDS,
    GPU_UTIL,
    MEM_COPY_UTIL,
    POWER_USAGE,
    PROCESS_MEM_UTIL,
    PROCESS_MEMORY,
    PROCESS_SM_UTIL,
)

_DEVICE_COLOURS = ("#333333", "#e6550d", "#3182bd", "#31a354", "#756bb1", "#636363")


@dataclass(frozen=True)
class TelemetryPanel:
    """One panel: a device-wide series, its per-process counterpart and, for memory, the capacity."""

    title: str
    device_metric: str
    process_metric: str | None = None
    capacity_metric: str | None = None

    @property
    def unit(self) -> str:
        """What its values are in: its device-wide field's unit (telemetry.fields)."""
        return FIELDS[self.device_metric].unit

    @property
    def label(self) -> str:
        """``VRAM used (MiB)``."""
        return f"{self.title} ({self.unit})"


PANELS: tuple[TelemetryPanel, ...] = (
    TelemetryPanel("GPU utilisation", GPU_UTIL, PROCESS_SM_UTIL),
    TelemetryPanel("VRAM used", FB_USED, PROCESS_MEMORY, FB_TOTAL),
    TelemetryPanel("memory bandwidth utilisation", MEM_COPY_UTIL, PROCESS_MEM_UTIL),
    TelemetryPanel("power", POWER_USAGE),
)
"""The panels, top to bottom; a panel without rows in the trial's window is left out."""


def drawn_metrics() -> tuple[str, ...]:
    """Every metric some panel draws (the report reads only these)."""
    names: list[str] = []
    for panel in PANELS:
        names += [m for m in (panel.device_metric, panel.process_metric, panel.capacity_metric) if m]
    return tuple(names)


def panels_with_data(series: Sequence[TelemetrySeries]) -> list[tuple[TelemetryPanel, list[TelemetrySeries]]]:
    """The panels that have a device-wide or per-process series, each with its series."""
    out = []
    for panel in PANELS:
        mine = [s for s in series if s.metric in (panel.device_metric, panel.process_metric, panel.capacity_metric)]
        if any(s.metric != panel.capacity_metric for s in mine):
            out.append((panel, mine))
    return out


def process_names(trial: TrialRecord) -> dict[str, str]:
    """Telemetry process label (a pid as text) -> the class whose server that process is."""
    names: dict[str, str] = {}
    for seg in trial.segments:
        for cls, where in seg.placement.items():
            if where.pid is not None:
                names[str(where.pid)] = cls
    return names


def draw_panel(ax: Axes, panel: TelemetryPanel, series: list[TelemetrySeries], t0: float, processes: dict[str, str],
               marks: DataMarks) -> None:
    """Draw one telemetry panel on ``ax`` (times relative to ``t0``)."""
    devices = sorted({s.device for s in series})
    for s in sorted(series, key=lambda s: (s.metric != panel.device_metric, s.device, s.process or "")):
        device_colour = _DEVICE_COLOURS[devices.index(s.device) % len(_DEVICE_COLOURS)]
        where = s.device if len(devices) > 1 else ""
        if s.metric == panel.capacity_metric:
            ax.plot(s.t - t0, s.value, color=device_colour, linestyle="--", linewidth=1.0,
                    label=f"{where} capacity".strip())
            continue
        if s.metric == panel.process_metric:
            cls = processes.get(s.process or "")
            name = f"{cls} (pid {s.process})" if cls else f"process {s.process}"
            marks.tag(ax.plot(s.t - t0, s.value, color=class_colour(cls) if cls else device_colour, linewidth=1.2,
                              label=f"{where} {name}".strip())[0])
            continue
        marks.tag(ax.plot(s.t - t0, s.value, color=device_colour, linewidth=2.0,
                          label=f"{s.device} (whole device)")[0])
    ax.set_ylabel(panel.unit)
    if panel.unit == "%":
        ax.set_ylim(0, 105)  # the whole scale: "half busy" must look half busy
    else:
        ax.set_ylim(bottom=0)
    plain_y(ax)  # 143771 MiB as itself, never "1e5" or an offset
    ax.set_title(panel.label, loc="left")
    ax.legend(loc="center left", bbox_to_anchor=(1.005, 0.5), frameon=False)
