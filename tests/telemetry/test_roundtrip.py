"""Round trip: recorded NVML readings -> rows -> the exporter's HTTP server -> DcgmScraper -> the same rows.

The exporter's server (exporter.make_server) runs for real on a loopback port; only the page it
serves is built from readings recorded on the H200 rather than from a live sampler, since the NVML
calls themselves only run on a GPU host (gpu_check.py covers that path there).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import replace

import pytest
from telemetry_testlib import MIG_UUID, Recorded, mig_device, mig_reading

from bench_plugin.results.telemetry_rows import DeviceInfo, TelemetryRow
from bench_plugin.telemetry.dcgm import DcgmScraper
from bench_plugin.telemetry.exporter import make_server
from bench_plugin.telemetry.exposition import render
from bench_plugin.telemetry.readings import reading_rows


def _input(recorded: Recorded) -> tuple[list[TelemetryRow], list[DeviceInfo]]:
    reading = recorded.readings[-1]
    devices = [*recorded.devices, mig_device(recorded.devices[0])]
    rows = reading_rows(reading) + reading_rows(mig_reading(reading.t))
    keys = [(r.metric, r.device, r.process) for r in rows]
    assert len(keys) == len(set(keys)), "one row per series, as one /metrics page holds"
    return rows, devices


@pytest.fixture
def serve() -> Iterator[Callable[[str], str]]:
    """``serve(page) -> url``: the exporter's own HTTP server on a loopback port, serving ``page``."""
    servers = []

    def start(page: str) -> str:
        server = make_server("127.0.0.1", 0, lambda: page)
        servers.append(server)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{server.server_address[1]}/metrics"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def _page(recorded: Recorded, rows: list[TelemetryRow], devices: list[DeviceInfo], timestamps: bool) -> str:
    return render(rows, devices, hostname="gpu-host-1", driver_version=recorded.driver_version, timestamps=timestamps)


def _mig_map(devices: list[DeviceInfo]) -> dict[str, str]:
    return {d.mig_key: d.key for d in devices if d.mig_key}


def test_exporter_to_scraper_gives_back_the_rows(recorded: Recorded, serve: Callable[[str], str]) -> None:
    rows, devices = _input(recorded)
    url = serve(_page(recorded, rows, devices, timestamps=True))
    scraped = DcgmScraper(url, mig_devices=_mig_map(devices)).poll_once()
    # the text format carries milliseconds: the one change a row's time goes through
    expected = {replace(r, t=round(r.t * 1000) / 1000) for r in rows}
    assert set(scraped) == expected and len(scraped) == len(rows)
    assert any(r.device == MIG_UUID and r.process == "5001" for r in scraped)


def test_without_timestamps_rows_come_back_stamped_with_the_scrape(
    recorded: Recorded, serve: Callable[[str], str]
) -> None:
    rows, devices = _input(recorded)
    url = serve(_page(recorded, rows, devices, timestamps=False))
    scraped = DcgmScraper(url, mig_devices=_mig_map(devices)).poll_once()
    assert len({r.t for r in scraped}) == 1
    assert {replace(r, t=0.0) for r in scraped} == {replace(r, t=0.0) for r in rows}


def test_unresolved_mig_instance_is_named_by_parent_uuid_and_instance(
    recorded: Recorded, serve: Callable[[str], str]
) -> None:
    rows, devices = _input(recorded)
    scraped = DcgmScraper(serve(_page(recorded, rows, devices, timestamps=False))).poll_once()
    assert {r.device for r in scraped} == {"cuda:0", f"{devices[0].uuid}/9"}
