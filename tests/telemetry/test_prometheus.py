"""PrometheusSeries against a REAL Prometheus scraping stand-in dcgm-exporters with known values.

Prometheus (Debian's binary, on loopback) scrapes three pages every second (exporter_pages.py says what
each holds). The pages serve phase 1, then phase 2; the module waits until every job has four scrapes
of each phase, and takes as each phase's stage window the span in which every job's newest sample is
of that phase. Range queries over a window must then return exactly that phase's values, per class,
at every step of the window. Waits poll the server with generous deadlines, never fixed sleeps.
"""

from __future__ import annotations

import subprocess
import sys
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests
from exporter_pages import (
    A_ASR,
    A_EMBEDDING,
    A_GPU1,
    A_LLM,
    B_LLM,
    C_GPU0,
    EXPORTER_POD,
    G0,
    G1,
    G3,
    MIG_ASR,
    REFERENCE,
    SERVED,
    page,
)
from prometheus_testlib import PageServer, PrometheusProcess, ScrapeJob, free_port

from bench_plugin.results.telemetry_rows import TelemetryRow
from bench_plugin.telemetry import fields as F
from bench_plugin.telemetry.prometheus import PrometheusSeries
from bench_plugin.telemetry.promql import STAGE_METRICS, selector
from bench_plugin.telemetry.stage_series import ClassTarget, SeriesSummary

JOBS = [
    ScrapeJob("dcgm-a", "/a"),
    ScrapeJob("dcgm-b", "/b", target_labels={"namespace": EXPORTER_POD[0], "pod": EXPORTER_POD[1]}),
    ScrapeJob("dcgm-c", "/c"),
]
JOB_OF = {job.path: job.name for job in JOBS}
STEP_S = 0.5

LLM = ClassTarget("llm", device="cuda:0", gpu_uuid=G0, pod="llm-0", namespace="bench")
EMBEDDING = ClassTarget("embedding", device="cuda:0", pod="embedding-0", namespace="bench")
ASR = ClassTarget("asr", device=MIG_ASR, gpu_uuid=G1, gpu_instance_id=1, pod="asr-0", namespace="bench")


@dataclass(frozen=True)
class Stack:
    """The running Prometheus and what the module learnt of its samples."""

    prometheus: PrometheusProcess
    times: dict[tuple[str, int], list[float]]
    """(page path, phase) -> timestamps of the reference series' samples of that phase."""

    def window(self, phase: int, paths: tuple[str, ...] = ("/a", "/b", "/c")) -> tuple[float, float]:
        """A window in which every page's newest sample is of ``phase``."""
        return (max(self.times[(p, phase)][0] for p in paths), min(self.times[(p, phase)][-1] for p in paths))


def _phase_times(prometheus: PrometheusProcess, path: str, phase: int) -> list[float]:
    ref = REFERENCE[path]
    found = prometheus.samples(selector(ref.metric, {"job": JOB_OF[path]}))
    return sorted(t for _, points in found for t, v in points if v == ref.values[phase - 1])


@pytest.fixture(scope="module")
def stack(page_server: PageServer, start_prometheus: Callable[[list[ScrapeJob]], PrometheusProcess]) -> Stack:
    for path in REFERENCE:
        page_server.set(path, page(path, 1))
    prometheus = start_prometheus(JOBS)
    times: dict[tuple[str, int], list[float]] = {}
    for phase in (1, 2):
        if phase == 2:
            for path in REFERENCE:
                page_server.set(path, page(path, 2))

        def ingested(phase: int = phase) -> bool:
            times.update({(path, phase): _phase_times(prometheus, path, phase) for path in REFERENCE})
            return all(len(times[(path, phase)]) >= 4 for path in REFERENCE)

        prometheus.wait_for(f"four scrapes of phase {phase} from every job", ingested)
    done = Stack(prometheus, times)
    for phase in (1, 2):
        start, end = done.window(phase)
        assert end - start >= 1.0, (phase, start, end)
    return done


@pytest.fixture
def series(stack: Stack) -> Iterator[PrometheusSeries]:
    with PrometheusSeries(stack.prometheus.url, timeout_s=30) as client:
        yield client


def points_in(start_s: float, end_s: float, step_s: float) -> int:
    """How many points Prometheus evaluates in [start, end] every step (it counts in milliseconds)."""
    return (round(end_s * 1000) - round(start_s * 1000)) // round(step_s * 1000) + 1


def observed(rows: list[TelemetryRow]) -> dict[tuple[str, str, str | None], list[float]]:
    grouped: dict[tuple[str, str, str | None], list[float]] = defaultdict(list)
    for row in rows:
        grouped[(row.device, row.metric, row.process)].append(row.value)
    return dict(grouped)


def served(labels: str, device: str, process: str | None, phase: int) -> dict[tuple[str, str, str | None], float]:
    return {(device, s.metric, process): float(s.values[phase - 1]) for s in SERVED if s.labels == labels}


def assert_exactly(rows: list[TelemetryRow], expected: dict[tuple[str, str, str | None], float], n: int) -> None:
    got = observed(rows)
    assert set(got) == set(expected)
    for key, value in expected.items():
        assert got[key] == [value] * n, key


def test_check_reaches_the_real_server(series: PrometheusSeries) -> None:
    assert series.check()


@pytest.mark.parametrize("phase", [1, 2])
def test_each_class_gets_exactly_its_known_values_in_each_stage_window(series: PrometheusSeries, stack: Stack,
                                                                      phase: int) -> None:
    start, end = stack.window(phase)
    result = series.query_stage(start, end, STEP_S, [LLM, EMBEDDING, ASR])
    n = points_in(start, end, STEP_S)
    assert set(result.rows) == {"llm", "embedding", "asr"}
    # two pods on one GPU: each gets its own copy, with its own per-process FB_USED and GPU_UTIL
    assert_exactly(result.rows["llm"], served(A_LLM, "cuda:0", "pod:bench/llm-0", phase), n)
    assert_exactly(result.rows["embedding"], served(A_EMBEDDING, "cuda:0", "pod:bench/embedding-0", phase), n)
    # the MIG instance's series by GPU_I_ID, named by the MIG UUID; instance 2's tenant is not asr's
    assert_exactly(result.rows["asr"], served(A_ASR, MIG_ASR, "pod:bench/asr-0", phase), n)
    assert all(start <= row.t <= end for rows in result.rows.values() for row in rows)


def test_a_missing_metric_is_a_note_never_a_crash(series: PrometheusSeries, stack: Stack) -> None:
    result = series.query_stage(*stack.window(1), STEP_S, [LLM, EMBEDDING, ASR])
    assert sorted(result.notes) == sorted([
        f"{F.GPU_UTIL}: no series for asr (pod bench/asr-0, UUID {G1}, GPU_I_ID 1)",
        f"{F.PROF_SM_ACTIVE}: no series for llm (pod bench/llm-0, UUID {G0})",
        f"{F.PROF_SM_ACTIVE}: no series for embedding (pod bench/embedding-0)",
        f"{F.PROF_SM_ACTIVE}: no series for asr (pod bench/asr-0, UUID {G1}, GPU_I_ID 1)",
        f"{F.POWER_USAGE}: no series for asr (pod bench/asr-0, UUID {G1}, GPU_I_ID 1)",
    ])
    assert all("\n" not in note for note in result.notes)


def test_pod_labels_renamed_on_scrape_are_read_as_the_workloads(series: PrometheusSeries, stack: Stack) -> None:
    raw = stack.prometheus.samples(selector(F.GPU_UTIL, {"job": "dcgm-b"}))
    labels = raw[0][0]
    assert (labels["exported_namespace"], labels["exported_pod"]) == ("bench", "llm-1")  # honor_labels: false
    assert (labels["namespace"], labels["pod"]) == EXPORTER_POD  # the target's own pod, not the workload's
    start, end = stack.window(2)
    result = series.query_stage(start, end, STEP_S, [ClassTarget("llm", pod="llm-1", namespace="bench")])
    assert_exactly(result.rows["llm"], served(B_LLM, "cuda:0", "pod:bench/llm-1", 2), points_in(start, end, STEP_S))


def test_the_old_uuid_label_of_a_bare_metal_exporter(series: PrometheusSeries, stack: Stack) -> None:
    start, end = stack.window(1)
    result = series.query_stage(start, end, STEP_S, [ClassTarget("embedding", device="cuda:0", gpu_uuid=G3)])
    assert_exactly(result.rows["embedding"], served(C_GPU0, "cuda:0", None, 1), points_in(start, end, STEP_S))


def test_a_gpu_target_without_a_pod_gets_every_pods_copy_and_no_mig_series(series: PrometheusSeries,
                                                                           stack: Stack) -> None:
    start, end = stack.window(2)
    n = points_in(start, end, STEP_S)
    whole = series.query_stage(start, end, STEP_S, [ClassTarget("llm", gpu_uuid=G0)])
    assert_exactly(whole.rows["llm"], {**served(A_LLM, "cuda:0", "pod:bench/llm-0", 2),
                                       **served(A_EMBEDDING, "cuda:0", "pod:bench/embedding-0", 2)}, n)
    by_index = series.query_stage(start, end, STEP_S, [ClassTarget("asr", device="cuda:1")])
    assert_exactly(by_index.rows["asr"], served(A_GPU1, "cuda:1", None, 2), n)  # GPU_I_ID="" leaves out MIG


def test_stage_figures_are_mean_and_peak_of_the_points(series: PrometheusSeries, stack: Stack) -> None:
    first_1, first_2 = stack.times[("/a", 1)][0], stack.times[("/a", 2)][0]
    start, end = first_1, stack.times[("/a", 2)][-1]
    result = series.query_stage(start, end, STEP_S, [LLM], metrics=[F.GPU_UTIL, F.POWER_USAGE])
    n = points_in(start, end, STEP_S)
    n_2 = n - points_in(start, first_2 - 0.001, STEP_S)  # points at or after phase 2's first sample
    assert 0 < n_2 < n
    expected = [SeriesSummary("llm", "cuda:0", metric, ((n - n_2) * low + n_2 * high) / n, max(low, high), n)
                for metric, (low, high) in ((F.GPU_UTIL, (61.0, 97.0)), (F.POWER_USAGE, (402.125, 655.5)))]
    got = sorted(result.summaries(), key=lambda s: s.metric)
    assert [(s.workload, s.device, s.metric, s.peak, s.points) for s in got] == [
        (e.workload, e.device, e.metric, e.peak, e.points) for e in sorted(expected, key=lambda s: s.metric)]
    for g, e in zip(got, sorted(expected, key=lambda s: s.metric), strict=True):
        assert g.mean == pytest.approx(e.mean, rel=1e-12)


def test_a_failed_query_is_a_one_line_note_with_prometheus_reason(series: PrometheusSeries, stack: Stack) -> None:
    result = series.query_stage(*stack.window(1), STEP_S, [LLM], metrics=["not a metric name", F.GPU_UTIL])
    assert len(result.notes) == 1
    note = result.notes[0]
    assert note.startswith("not a metric name: query failed: HTTP Status Code 400: ") and "parse error" in note
    assert "\n" not in note and len(result.rows["llm"]) > 0  # the next metric was still queried


def test_a_window_too_long_for_the_step_raises_the_step(series: PrometheusSeries, stack: Stack) -> None:
    end = stack.window(1)[1]
    result = series.query_stage(end - 22_000, end, 1.0, [LLM], metrics=[F.GPU_UTIL])
    assert result.step_s == 2.0
    assert result.notes == ["step raised from 1 s to 2 s: Prometheus returns at most 11000 points per series"]
    assert {row.value for row in result.rows["llm"]} <= {61.0}


def test_an_unreachable_server_is_unavailable_and_a_note() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with PrometheusSeries(url, timeout_s=5) as series:
        availability = series.check()
        result = series.query_stage(100.0, 160.0, 1.0, [LLM, ASR])
    assert not availability
    assert availability.reason == f"no Prometheus query API at {url}: Connection refused"
    assert result.rows == {"llm": [], "asr": []}
    assert result.notes == [f"Prometheus at {url} unreachable: Connection refused; no series for "
                            + ", ".join(STAGE_METRICS)]
    assert result.summaries() == []


def test_the_real_server_accepts_every_golden_query(stack: Stack) -> None:
    golden = Path(__file__).parent / "golden"
    queries = [line for path in sorted(golden.glob("*.promql"))
               for line in path.read_text(encoding="utf-8").splitlines() if line and not line.startswith("#")]
    assert len(queries) == 7 * len(list(golden.glob("*.promql")))
    for query in queries:
        answer = requests.get(f"{stack.prometheus.url}/api/v1/query", params={"query": query}, timeout=30)
        assert answer.status_code == 200 and answer.json()["status"] == "success", (query, answer.text)


def test_the_client_library_is_loaded_only_when_used_and_its_absence_named() -> None:
    code = ("import sys; import bench_plugin.telemetry, bench_plugin.report.markdown; "
            "print(sorted(m for m in ('prometheus_api_client', 'pandas', 'dateparser') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
    # a core install lacks the library: importing None from sys.modules is how Python says "not installed"
    code = ("import sys; sys.modules['prometheus_api_client'] = None\n"
            "from bench_plugin.telemetry.prometheus import PrometheusSeries\n"
            "try:\n    PrometheusSeries('http://127.0.0.1:9')\n"
            "except ImportError as exc:\n    print(exc)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout == "prometheus-api-client is not installed: pip install 'bench-plugin[prometheus]'\n"


def test_points_that_are_not_finite_are_left_out_with_a_note() -> None:
    # a range query answers values as strings, and "NaN", "+Inf" and "-Inf" are among them (a rate over a reset
    # counter, a ratio by zero); the store keeps readings, so they go, and the stage's notes say how many
    from bench_plugin.telemetry.prometheus import _parse
    from bench_plugin.telemetry.stage_series import ClassTarget, StageSeries

    answer = [{"metric": {"gpu": "0", "UUID": "GPU-x"},
               "values": [[100, "50"], [101, "NaN"], [102, "+Inf"], [103, "-Inf"], [104, "60"]]}]
    result = StageSeries(100.0, 104.0, 1.0, rows={"llm": []})
    PrometheusSeries._assign(F.GPU_UTIL, _parse(answer), [ClassTarget("llm", device="cuda:0")], result)
    assert [(row.t, row.value) for row in result.rows["llm"]] == [(100.0, 50.0), (104.0, 60.0)]
    assert result.notes == [f"{F.GPU_UTIL}: 3 points of llm that are not finite numbers (NaN, +Inf, -Inf) left out"]
