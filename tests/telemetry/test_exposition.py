"""The exporter's /metrics text against dcgm-exporter's format, fed with readings recorded on the H200.

The NVML calls themselves only run on a GPU host (gpu_check.py, test_gpu.py); here the recorded
readings go through the same conversion (readings.py) and exposition (exposition.py) the exporter uses.
The expected HELP/TYPE lines are copied from NVIDIA/dcgm-exporter etc/default-counters.csv (release
4.5.3-4.8.2) and the label order from its internal/pkg/rendermetrics/render_metrics.go.
"""

from __future__ import annotations

import re

import pytest
from prometheus_client.parser import text_string_to_metric_families
from telemetry_testlib import MIG_UUID, Recorded, mig_device, mig_reading

from bench_plugin.results.telemetry_rows import DeviceInfo, TelemetryRow
from bench_plugin.telemetry import fields as F
from bench_plugin.telemetry.exposition import render
from bench_plugin.telemetry.readings import MIB, DeviceReading, reading_rows

# etc/default-counters.csv, the lines of the fields our exporter writes (verbatim, spacing included)
DEFAULT_COUNTERS_CSV = """\
DCGM_FI_DEV_SM_CLOCK,  gauge, SM clock frequency (in MHz).
DCGM_FI_DEV_MEM_CLOCK, gauge, Memory clock frequency (in MHz).
DCGM_FI_DEV_GPU_TEMP,    gauge, GPU temperature (in C).
DCGM_FI_DEV_POWER_USAGE,              gauge, Power draw (in W).
DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION, counter, Total energy consumption since boot (in mJ).
DCGM_FI_DEV_GPU_UTIL,      gauge, GPU utilization (in %).
DCGM_FI_DEV_MEM_COPY_UTIL, gauge, Memory utilization (in %).
DCGM_FI_DEV_FB_FREE, gauge, Framebuffer memory free (in MiB).
DCGM_FI_DEV_FB_USED, gauge, Framebuffer memory used (in MiB).
DCGM_FI_DEV_FB_RESERVED, gauge, Framebuffer memory reserved (in MiB).
"""

# gpuMetricsFormat: gpu, UUID, pci_bus_id, device, modelName, [GPU_I_PROFILE, GPU_I_ID], [Hostname], label
# counters (DCGM_FI_DRIVER_VERSION), attributes (our pid)
SAMPLE_LINE = re.compile(
    r'^(?P<name>[A-Za-z_]\w*)\{gpu="(?P<gpu>\d+)",UUID="(?P<uuid>GPU-[^"]+)",pci_bus_id="[^"]+",'
    r'device="nvidia(?P=gpu)",modelName="[^"]+"'
    r'(?:,GPU_I_PROFILE="(?P<profile>[^"]+)",GPU_I_ID="(?P<gi>\d+)")?'
    r'(?:,Hostname="(?P<host>[^"]+)")?'
    r',DCGM_FI_DRIVER_VERSION="(?P<driver>[^"]+)"'
    r'(?:,pid="(?P<pid>\d+)")?\} (?P<value>-?[0-9.e+]+)$'
)


def _csv() -> dict[str, tuple[str, str]]:
    out = {}
    for line in DEFAULT_COUNTERS_CSV.splitlines():
        name, prom_type, help_text = (part.strip() for part in line.split(",", 2))
        out[name] = (prom_type, help_text)
    return out


def _page(recorded: Recorded, readings: list[DeviceReading], devices: list[DeviceInfo]) -> str:
    rows = [row for r in readings for row in reading_rows(r)]
    return render(rows, devices, hostname="gpu-host-1", driver_version=recorded.driver_version)


def test_help_and_type_lines_are_dcgm_exporters(recorded: Recorded) -> None:
    lines = _page(recorded, recorded.readings[-1:], recorded.devices).splitlines()
    for name, (prom_type, help_text) in _csv().items():
        at = lines.index(f"# HELP {name} {help_text}")
        assert lines[at + 1] == f"# TYPE {name} {prom_type}"
        assert lines[at + 2].startswith(name + "{"), "samples follow their TYPE line"
    # every family, ours included, has HELP then TYPE then samples of that name only
    for i, line in enumerate(lines):
        if line.startswith("# HELP "):
            name = line.split()[2]
            assert lines[i + 1].startswith(f"# TYPE {name} ")


def test_every_sample_line_has_dcgm_exporters_labels_in_order(recorded: Recorded) -> None:
    text = _page(recorded, recorded.readings[-1:], recorded.devices)
    samples = [line for line in text.splitlines() if not line.startswith("#")]
    assert samples
    for line in samples:
        match = SAMPLE_LINE.match(line)
        assert match, line
        assert match["uuid"] == recorded.devices[0].uuid
        assert match["host"] == "gpu-host-1"
        assert match["driver"] == "580.159.04"
        assert (match["pid"] is not None) == match["name"].startswith("bench_process_")


def test_values_follow_dcgm_units(recorded: Recorded) -> None:
    reading = recorded.readings[-1]
    text = _page(recorded, [reading], recorded.devices)
    values = {(m["name"], m["pid"]): float(m["value"]) for m in map(SAMPLE_LINE.match, text.splitlines()) if m}
    assert reading.power_mw is not None and reading.fb_used_bytes is not None and reading.fb_total_bytes
    assert values[(F.POWER_USAGE, None)] == reading.power_mw / 1000
    assert values[(F.FB_USED, None)] == reading.fb_used_bytes // MIB
    assert values[(F.FB_TOTAL, None)] == 143771  # the H200's 143771 MiB, as nvidia-smi says
    assert values[(F.GPU_UTIL, None)] == reading.gpu_util
    worker = reading.processes[0]
    assert worker.used_bytes is not None
    assert values[(F.PROCESS_MEMORY, str(worker.pid))] == worker.used_bytes // MIB


def test_counter_keeps_its_dcgm_name(recorded: Recorded) -> None:
    text = _page(recorded, recorded.readings[-1:], recorded.devices)
    assert f"\n{F.TOTAL_ENERGY}{{" in text
    assert "_total{" not in text


def test_mig_instance_is_labelled_like_dcgm_exporter(recorded: Recorded) -> None:
    parent = recorded.devices[0]
    mig = mig_device(parent)
    text = _page(recorded, [recorded.readings[-1], mig_reading(recorded.readings[-1].t)], [parent, mig])
    mig_lines = [m for m in map(SAMPLE_LINE.match, text.splitlines()) if m and m["gi"]]
    assert {m["name"] for m in mig_lines} == {F.FB_FREE, F.FB_USED, F.FB_RESERVED, F.FB_TOTAL, F.PROCESS_MEMORY}
    for m in mig_lines:
        assert (m["gpu"], m["uuid"], m["profile"], m["gi"]) == ("0", parent.uuid, "1g.18gb", "9")
    assert {m["pid"] for m in mig_lines if m["pid"]} == {"5001"}, "a process NVML cannot size has no series"
    assert MIG_UUID not in text, "dcgm-exporter never shows the MIG UUID"


def test_text_parses_as_prometheus_exposition(recorded: Recorded) -> None:
    odd = DeviceInfo("cuda:0", 0, "GPU-x", "00000000:00:06.0", 'NVIDIA "H200"\\ test')
    text = render(reading_rows(recorded.readings[-1]), [odd])
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert families[F.TOTAL_ENERGY].type == "counter"
    assert families[F.GPU_UTIL].documentation == "GPU utilization (in %)."
    assert families[F.GPU_UTIL].samples[0].labels["modelName"] == 'NVIDIA "H200"\\ test'
    assert "Hostname" not in families[F.GPU_UTIL].samples[0].labels


def test_newest_row_per_series_is_served() -> None:
    info = DeviceInfo("cuda:0", 0, "GPU-x", "00000000:00:06.0", "NVIDIA H200")
    rows = [TelemetryRow(2.0, "cuda:0", F.GPU_UTIL, 50.0), TelemetryRow(1.0, "cuda:0", F.GPU_UTIL, 10.0)]
    assert render(rows, [info]).splitlines()[-1].endswith("} 50")


def test_row_of_an_unknown_device_is_refused() -> None:
    info = DeviceInfo("cuda:0", 0, "GPU-x", "00000000:00:06.0", "NVIDIA H200")
    with pytest.raises(ValueError, match="no device info for cuda:1"):
        render([TelemetryRow(1.0, "cuda:1", F.GPU_UTIL, 5.0)], [info])
