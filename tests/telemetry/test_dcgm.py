"""DcgmScraper against a real HTTP server on loopback serving a dcgm-exporter page.

The page is what dcgm-exporter 4.5.3-4.8.2 writes for a host with one whole H200 and one in MIG mode:
built from its internal/pkg/rendermetrics/render_metrics.go templates (gpuMetricsFormat for GPU and
MIG series, linkMetricsFormat for an NVLink series), label values as gpu_collector.go sets them,
Go's sorted map order for label counters and attributes, DOUBLE fields printed with %f, the XID
attributes of toMetric, and the pod attributes its Kubernetes mode adds
(internal/pkg/transformation/kubernetes.go: the device-level series kept, one per-pod series added).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from bench_plugin.results.telemetry_rows import TelemetryRow
from bench_plugin.telemetry import fields as F
from bench_plugin.telemetry.dcgm import DcgmScraper, parse_metrics

G0 = "GPU-c7f5d2c5-3e7c-2881-b1b9-66fc489b02e7"
G1 = "GPU-0a1b2c3d-4e5f-6789-abcd-ef0123456789"
MIG_1 = "MIG-11111111-2222-5333-8444-555555555555"
COMMON0 = f'gpu="0",UUID="{G0}",pci_bus_id="00000000:18:00.0",device="nvidia0",modelName="NVIDIA H200"'
COMMON1 = f'gpu="1",UUID="{G1}",pci_bus_id="00000000:2A:00.0",device="nvidia1",modelName="NVIDIA H200"'
HOST = 'Hostname="gpu-host-1",DCGM_FI_DRIVER_VERSION="580.159.04"'
LINK_HELP = "The number of bytes of active NVLink rx or tx data including both header and payload."
LINK = (  # linkMetricsFormat: its own label names (gpu_uuid, model_name) and already a lowercase hostname
    f'nvlink="0",gpu="0",gpu_uuid="{G0}",pci_bus_id="00000000:18:00.0",device="nvidia0",'
    'model_name="NVIDIA H200",hostname="gpu-host-1"'
)

DCGM_EXPORTER_PAGE = f"""\
# HELP DCGM_FI_DEV_SM_CLOCK SM clock frequency (in MHz).
# TYPE DCGM_FI_DEV_SM_CLOCK gauge
DCGM_FI_DEV_SM_CLOCK{{{COMMON0},{HOST}}} 1980
DCGM_FI_DEV_SM_CLOCK{{{COMMON1},{HOST}}} 345
# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).
# TYPE DCGM_FI_DEV_POWER_USAGE gauge
DCGM_FI_DEV_POWER_USAGE{{{COMMON0},{HOST}}} 674.634000
DCGM_FI_DEV_POWER_USAGE{{{COMMON1},{HOST}}} 88.125000
# HELP DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION Total energy consumption since boot (in mJ).
# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter
DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{{{COMMON0},{HOST}}} 7212631
# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{{{COMMON0},{HOST}}} 100
# HELP DCGM_FI_DEV_XID_ERRORS Value of the last XID error encountered.
# TYPE DCGM_FI_DEV_XID_ERRORS gauge
DCGM_FI_DEV_XID_ERRORS{{{COMMON0},{HOST},err_code="0",err_msg="No Error"}} 0
# HELP DCGM_FI_DEV_FB_USED Framebuffer memory used (in MiB).
# TYPE DCGM_FI_DEV_FB_USED gauge
DCGM_FI_DEV_FB_USED{{{COMMON0},{HOST}}} 3442
DCGM_FI_DEV_FB_USED{{{COMMON0},{HOST},container="llm",namespace="bench",pod="llm-0",pod_uid="u-1"}} 3434
DCGM_FI_DEV_FB_USED{{{COMMON1},GPU_I_PROFILE="3g.71gb",GPU_I_ID="1",{HOST}}} 20480
DCGM_FI_DEV_FB_USED{{{COMMON1},GPU_I_PROFILE="4g.71gb",GPU_I_ID="2",{HOST}}} 512
# HELP DCGM_FI_PROF_GR_ENGINE_ACTIVE Ratio of time the graphics engine is active.
# TYPE DCGM_FI_PROF_GR_ENGINE_ACTIVE gauge
DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{COMMON1},GPU_I_PROFILE="3g.71gb",GPU_I_ID="1",{HOST}}} 0.812345
# HELP DCGM_FI_DEV_NVLINK_BANDWIDTH_L0 {LINK_HELP}
# TYPE DCGM_FI_DEV_NVLINK_BANDWIDTH_L0 counter
DCGM_FI_DEV_NVLINK_BANDWIDTH_L0{{{LINK}}} 123

"""

MIG_DEVICES = {f"{G1}/1": MIG_1}  # instance 2 is left unresolved on purpose


def expected_rows(t: float) -> list[TelemetryRow]:
    """The rows the page holds, in page order."""
    return [
        TelemetryRow(t, "cuda:0", F.SM_CLOCK, 1980.0),
        TelemetryRow(t, "cuda:1", F.SM_CLOCK, 345.0),
        TelemetryRow(t, "cuda:0", F.POWER_USAGE, 674.634),
        TelemetryRow(t, "cuda:1", F.POWER_USAGE, 88.125),
        TelemetryRow(t, "cuda:0", F.TOTAL_ENERGY, 7212631.0),
        TelemetryRow(t, "cuda:0", F.GPU_UTIL, 100.0),
        TelemetryRow(t, "cuda:0", "DCGM_FI_DEV_XID_ERRORS", 0.0),
        TelemetryRow(t, "cuda:0", F.FB_USED, 3442.0),
        TelemetryRow(t, "cuda:0", F.FB_USED, 3434.0, "pod:bench/llm-0"),
        TelemetryRow(t, MIG_1, F.FB_USED, 20480.0),
        TelemetryRow(t, f"{G1}/2", F.FB_USED, 512.0),
        TelemetryRow(t, MIG_1, "DCGM_FI_PROF_GR_ENGINE_ACTIVE", 0.812345),
    ]


def test_parse_maps_labels_to_devices_and_processes() -> None:
    rows = parse_metrics(DCGM_EXPORTER_PAGE, 1.5, mig_devices=MIG_DEVICES)
    assert rows == expected_rows(1.5)


def test_parse_keeps_only_requested_devices_and_metrics() -> None:
    rows = parse_metrics(DCGM_EXPORTER_PAGE, 1.5, mig_devices=MIG_DEVICES, devices=[MIG_1, G0], metrics=[F.FB_USED])
    assert [(r.device, r.process) for r in rows] == [("cuda:0", None), ("cuda:0", "pod:bench/llm-0"), (MIG_1, None)]


def test_scraper_polls_a_dcgm_exporter_over_http(http_page: Callable[..., str]) -> None:
    url = http_page(lambda: (200, DCGM_EXPORTER_PAGE))
    scraper = DcgmScraper(url, interval_s=0.05, mig_devices=MIG_DEVICES)
    assert scraper.available()
    before = time.time()
    assert scraper.start()
    deadline = time.time() + 10
    while scraper.polls < 3 and time.time() < deadline:
        time.sleep(0.02)
    scraper.stop()
    rows = scraper.drain()
    assert scraper.polls >= 3 and len(rows) == scraper.polls * len(expected_rows(0))
    first = rows[: len(expected_rows(0))]
    assert before <= first[0].t <= time.time()
    assert first == expected_rows(first[0].t)
    assert scraper.drain() == [], "drain empties the buffer"
    assert scraper.problems() == {}


def test_unreachable_exporter_is_unavailable_with_a_reason(http_page: Callable[..., str]) -> None:
    url = http_page(lambda: (200, DCGM_EXPORTER_PAGE))
    dead = url.rsplit(":", 1)[0] + ":9/metrics"  # the discard port: nothing listens on loopback
    scraper = DcgmScraper(dead, interval_s=0.05)
    availability = scraper.available()
    assert not availability and dead in availability.reason
    assert not scraper.start() and not scraper.running
    assert scraper.drain() == []


def test_page_without_gpu_series_is_unavailable(http_page: Callable[..., str]) -> None:
    url = http_page(lambda: (200, "# HELP up x\n# TYPE up gauge\nup 1\n"))
    availability = DcgmScraper(url).available()
    assert not availability and "no GPU series" in availability.reason


def test_failing_polls_are_counted_and_the_loop_goes_on(http_page: Callable[..., str]) -> None:
    answers = iter([(200, DCGM_EXPORTER_PAGE), (500, "boom"), (500, "boom")])
    url = http_page(lambda: next(answers, (200, DCGM_EXPORTER_PAGE)))
    scraper = DcgmScraper(url, interval_s=0.05)
    assert scraper.start()  # available() took the first answer
    deadline = time.time() + 10
    while scraper.polls < 2 and time.time() < deadline:
        time.sleep(0.02)
    scraper.stop()
    problems = scraper.problems()
    assert len(problems) == 1 and next(iter(problems.values())) == 2
    assert "500" in next(iter(problems))
    assert scraper.polls >= 2 and scraper.drain()


def test_values_that_are_not_finite_are_left_out_and_noted_per_metric(http_page: Callable[..., str]) -> None:
    # NaN, +Inf and -Inf are legal sample values in the exposition format; a store of readings keeps none of them
    page = (DCGM_EXPORTER_PAGE.replace(f"{{{COMMON0},{HOST}}} 674.634000", f"{{{COMMON0},{HOST}}} NaN")
            .replace(f"{{{COMMON1},{HOST}}} 345", f"{{{COMMON1},{HOST}}} +Inf"))
    assert page.count("NaN") == 1 and page.count("+Inf") == 1
    scraper = DcgmScraper(http_page(lambda: (200, page)), interval_s=0.05, mig_devices=MIG_DEVICES)
    rows = scraper.poll_once()
    gone = {(F.POWER_USAGE, 674.634), (F.SM_CLOCK, 345.0)}
    wanted = [r for r in expected_rows(rows[0].t) if (r.metric, r.value) not in gone]
    assert rows == wanted and len(rows) == len(expected_rows(0)) - 2
    assert scraper.problems() == {
        f"{F.POWER_USAGE}: values that are not finite numbers (NaN, +Inf, -Inf) left out": 1,
        f"{F.SM_CLOCK}: values that are not finite numbers (NaN, +Inf, -Inf) left out": 1,
    }
