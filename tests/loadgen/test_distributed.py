"""Distributed load: a real master with 1, 2 and 3 real workers sends exactly the scenario's arrivals.

Per class and stage the merged samples are exactly the seeded arrivals (each once, none lost at the
end of a stage or of the campaign), and P50/P95 of e2e, TTFT and TPOT match the single-process run
within max(2 ms, 3%), on the local backend (the master starts the servers) and the manual one.

Counting is exact and checked on every run. The percentiles come from 18-72 requests per stage on a
2-core machine shared by the master, the workers and the servers, where a request now and then
loses 5-10 ms to the scheduler in either run: a figure that misses the tolerance is measured again,
on a fresh single-process run and a fresh distributed run side by side, and must hold then (the miss
is printed). A harness that distorts latency misses every time; host noise seldom strikes twice.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from loadgen_testlib import (
    Run,
    accounting,
    campaign,
    seeded_counts,
    sent_arrivals,
    small_clips_scenario,
    synthetic_server,
    workers_of,
)

pytestmark = pytest.mark.slow

FIGURES = (("latency_ms", "p50"), ("latency_ms", "p95"), ("ttft_ms", "p50"), ("ttft_ms", "p95"),
           ("tpot_ms", "p50"), ("tpot_ms", "p95"))


@pytest.fixture(scope="module")
def manual_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with synthetic_server(tmp_path_factory.mktemp("server") / "synthetic.log") as url:
        yield url


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return small_clips_scenario(tmp_path_factory.mktemp("scenario"))


def backend_args(backend: str, host: str) -> list[str]:
    return ["--host", host, "--arm", "synthetic"] if backend == "manual" else []


def reference(tmp_path: Path, scenario: Path, args: list[str]) -> Run:
    run = campaign(tmp_path, 0, *args, scenario=scenario)
    assert run.returncode == 0, run.output[-3000:]
    return run


@pytest.fixture(scope="module")
def single(tmp_path_factory: pytest.TempPathFactory, manual_host: str, scenario: Path) -> dict[str, Run]:
    """The same campaign on one process, per backend: the reference."""
    return {backend: reference(tmp_path_factory.mktemp(f"single-{backend}"), scenario,
                               backend_args(backend, manual_host)) for backend in ("local", "manual")}


def figures(run: Run) -> dict[tuple[int, str], dict[str, Any]]:
    return {(stage["index"], name): stats for stage in run.summary()["trials"][0]["stages"]
            for name, stats in stage["classes"].items()}


def check_exact(run: Run, workers: int) -> None:
    """Every seeded arrival of every class and stage was sent once, by a share of every worker."""
    assert run.returncode == 0, run.output[-3000:]
    assert run.worker_codes == [0] * workers, [log.read_text()[-1500:] for log in run.worker_logs]
    assert "campaign completed" in run.output
    expected, sent = seeded_counts(run), sent_arrivals(run)
    assert set(sent) == set(expected)
    for key, n in expected.items():
        assert sent[key] == list(range(n)), f"{key}: arrivals sent {sent[key]} instead of 0..{n - 1} once each"
    for stage in (0, 1):
        assert {name: len(ids) for name, ids in workers_of(run, stage).items()} == dict.fromkeys(
            ("llm", "embedding", "asr"), workers)
    assert all(event["problems"] == [] for event in accounting(run))
    assert all(stats["errors"] == 0 for stats in figures(run).values())


def misses(run: Run, ref: Run, workers: int) -> list[str]:
    """Each percentile of ``run`` farther than max(2 ms, 3%) from the single-process ``ref``."""
    mine, theirs = figures(run), figures(ref)
    assert {key: f["requests"] for key, f in mine.items()} == {key: f["requests"] for key, f in theirs.items()}
    out = []
    for key, stats in sorted(mine.items()):
        for figure, p in FIGURES:
            if stats.get(figure) is None:
                continue
            got, truth = stats[figure][p], theirs[key][figure][p]
            if abs(got - truth) > max(2.0, 0.03 * truth):
                out.append(f"{key} {figure} {p}: {got:.2f} ms with {workers} workers, {truth:.2f} ms on one process")
    return out


@pytest.mark.parametrize("workers", [1, 2, 3])
@pytest.mark.parametrize("backend", ["local", "manual"])
def test_workers_send_exactly_the_offered_load(tmp_path: Path, backend: str, workers: int, manual_host: str,
                                               scenario: Path, single: dict[str, Run]) -> None:
    args = backend_args(backend, manual_host)
    run = campaign(tmp_path / "first", workers, *args, scenario=scenario)
    check_exact(run, workers)
    missed = misses(run, single[backend], workers)
    if missed:
        print("measured again after a miss (host noise?):", *missed, sep="\n  ")
        ref = reference(tmp_path / "reference", scenario, args)
        run = campaign(tmp_path / "again", workers, *args, scenario=scenario)
        check_exact(run, workers)
        missed = misses(run, ref, workers)
    assert not missed, "\n".join(missed)
