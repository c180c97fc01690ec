"""Distributed load: a real master with 1, 2 and 3 real workers sends exactly the scenario's arrivals.

Per class and stage the merged samples are exactly the seeded arrivals (each once, none lost at the
end of a stage or of the campaign), and P50/P95 of e2e, TTFT and TPOT match the single-process run
within max(2 ms, 3%), on the local backend (the master starts the servers) and the manual one.

Counting is exact and checked on every run. For the percentiles, what must not depend on the number
of load generators is what the harness reports ABOUT the server: each server logs its own timing of
every request (matched to the samples by X-Request-Id), and the figure compared is the reported
percentile minus the server's own percentile of the same requests. A server slowed by the busy
2-core machine it shares with the master and the workers (a stall of tens of ms, seen in CI) then
moves both sides alike; a harness that distorts latency on workers does not. A figure that still
misses, or a pair that the campaigns' own self-check flags (host busy with other work, generator
behind), is measured again, fresh single-process run and fresh distributed run side by side
(test_workers_send_exactly_the_offered_load says exactly when it passes, fails or is skipped).
"""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from harness import busy_stages
from loadgen_testlib import (
    Run,
    accounting,
    campaign,
    seeded_counts,
    sent_arrivals,
    server_records,
    small_clips_scenario,
    synthetic_server,
    workers_of,
)

pytestmark = [pytest.mark.slow, pytest.mark.serial]

FIGURES = (("latency_ms", "p50"), ("latency_ms", "p95"), ("ttft_ms", "p50"), ("ttft_ms", "p95"),
           ("tpot_ms", "p50"), ("tpot_ms", "p95"))
MEASUREMENTS = 3
"""At most this many pairs (a run and its single-process reference) are measured: the exact counts must
hold in every one, the figures in one pair measured side by side and not flagged by the self-check."""
RUNS = [("local", 1), ("manual", 2), ("local", 3)]
"""1, 2 and 3 workers, on both backends: the backend decides who starts the servers, the number of workers how
the arrivals are split; neither depends on the other, so each count runs once, not on every backend."""
SERVER_FIELD = {"latency_ms": "e2e_ms", "ttft_ms": "ttft_ms"}
"""The server's own record of a client figure; TPOT, a difference of two client times, is compared as is."""


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return small_clips_scenario(tmp_path_factory.mktemp("scenario"))


def measured(tmp_path: Path, workers: int, backend: str, scenario: Path) -> tuple[Run, dict[str, dict[str, Any]]]:
    """One campaign and its servers' own records: a server per class (local), or one of our own (manual)."""
    with ExitStack() as stack:
        args: list[str] = []
        log = tmp_path / "synthetic-timing.jsonl"
        if backend == "manual":
            tmp_path.mkdir(parents=True, exist_ok=True)
            url = stack.enter_context(synthetic_server(tmp_path / "synthetic.log", log))
            args = ["--host", url, "--arm", "synthetic"]
        run = campaign(tmp_path, workers, *args, scenario=scenario)
    logs = [log] if backend == "manual" else sorted((run.results / "logs").glob("synthetic-*.jsonl"))
    return run, server_records(*logs)


@pytest.fixture(scope="module")
def single(tmp_path_factory: pytest.TempPathFactory, scenario: Path) -> dict[str, tuple[Run, dict[str, Any]]]:
    """The same campaign on one process, per backend: the reference."""
    out = {}
    for backend in ("local", "manual"):
        run, records = measured(tmp_path_factory.mktemp(f"single-{backend}"), 0, backend, scenario)
        assert run.returncode == 0, run.output[-3000:]
        out[backend] = (run, records)
    return out


def offsets(run: Run, records: dict[str, dict[str, Any]]) -> dict[tuple[int, str], dict[str, Any]]:
    """(stage, class) -> request count, and per figure the reported percentile less the server's own."""
    own: dict[tuple[int, str], dict[str, list[float]]] = {}
    with run.reader() as reader:
        samples = [s for s in reader.samples(1) if s.ok]
    for sample in samples:
        rid = f"{sample.worker}/1.{sample.segment}.{sample.stage}/{sample.workload}/{sample.seq}"
        record = records[rid]  # every sample has the server's record of it
        slot = own.setdefault((sample.stage, sample.workload), {})
        for figure, field in SERVER_FIELD.items():
            if record.get(field) is not None:
                slot.setdefault(figure, []).append(float(record[field]))
    out: dict[tuple[int, str], dict[str, Any]] = {}
    for stage in run.summary()["trials"][0]["stages"]:
        for name, stats in stage["classes"].items():
            key = (stage["index"], name)
            out[key] = {"requests": stats["requests"]}
            for figure, p in FIGURES:
                if stats.get(figure) is None:
                    continue
                server = own[key].get(figure)
                base = float(np.percentile(server, int(p[1:]))) if server else 0.0
                out[key][(figure, p)] = (stats[figure][p], stats[figure][p] - base)
    return out


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
    assert all(stats["errors"] == 0 for stage in run.summary()["trials"][0]["stages"]
               for stats in stage["classes"].values())
    for stage in run.summary()["trials"][0]["stages"]:  # each worker's stall monitor reported over the wire
        assert len(stage["generators"]) == workers, stage["generators"]
        assert all(used["stalls"]["threshold_ms"] == 5.0 for used in stage["generators"].values())


def misses(mine: dict[Any, dict[Any, Any]], theirs: dict[Any, dict[Any, Any]], workers: int) -> list[str]:
    """Each figure whose offset from the server differs from the single-process run's by over max(2 ms, 3%)."""
    assert {k: f["requests"] for k, f in mine.items()} == {k: f["requests"] for k, f in theirs.items()}
    out = []
    for key, figures in sorted(mine.items()):
        for fig in FIGURES:
            if fig not in figures:
                continue
            (got, off), (truth, ref_off) = figures[fig], theirs[key][fig]
            if abs(off - ref_off) > max(2.0, 0.03 * truth):
                out.append(f"{key} {fig[0]} {fig[1]}: {got:.2f} ms ({off:+.2f} ms from the server's own) with "
                           f"{workers} workers, {truth:.2f} ms ({ref_off:+.2f} ms) on one process")
    return out


def host_noise(*runs: Run) -> list[str]:
    """What the campaigns' own self-check says against their figures (host busy, generator behind)."""
    return [f"{run.results.parent.name}: {reason}" for run in runs for reason in busy_stages(run.summary())]


@pytest.mark.parametrize(("backend", "workers"), RUNS)
def test_workers_send_exactly_the_offered_load(tmp_path: Path, backend: str, workers: int, scenario: Path,
                                               single: dict[str, tuple[Run, dict[str, Any]]]) -> None:
    """The counts hold in every run; the figures in a pair measured side by side that the campaigns' own
    self-check does not flag. A flagged pair is measured again (the reason printed): the harness answers
    for its figures, not for a host that its self-check saw busy. A pair that is not flagged and misses is
    measured again too, up to MEASUREMENTS pairs (a burst shorter than a stage can hide from the
    self-check), and the test fails if no unflagged pair holds; it is skipped, saying why, only when
    every pair was flagged."""
    reference = single[backend]
    run, records = measured(tmp_path / "first", workers, backend, scenario)
    missed: list[str] = []
    judged = False
    for attempt in range(1, MEASUREMENTS + 1):
        check_exact(run, workers)
        noise = host_noise(reference[0], run)
        if noise:
            print(f"pair {attempt} of {MEASUREMENTS} measured on a busy host:", *noise, sep="\n  ")
        else:
            judged = True
            missed = misses(offsets(run, records), offsets(*reference), workers)
            if not missed:
                return
            print(f"pair {attempt} of {MEASUREMENTS} missed:", *missed, sep="\n  ")
        if attempt < MEASUREMENTS:  # both sides again, next to each other
            reference = measured(tmp_path / f"reference-{attempt}", 0, backend, scenario)
            run, records = measured(tmp_path / f"again-{attempt}", workers, backend, scenario)
    if not judged:
        pytest.skip(f"the self-check flagged every one of {MEASUREMENTS} pairs ({noise[0]}): figures not judged here")
    assert not missed, "\n".join(missed)
