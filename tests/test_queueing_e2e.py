"""Where the added latency goes, end to end: a real campaign on the contention simulator, whose servers log each
request's own queue and compute time, against what the campaign stored, summarised and reported.

scenarios/simulator-queueing.yaml runs three synthetic servers on one simulated device: each request waits for
one of its server's slots (its queue time), then for the device and its service there, then the class's own
latency (its compute time), and the server writes both to its timing log with the request's X-Request-Id. The
embedding and ASR replies say their split in TEI's headers; the LLM's streamed replies cannot, so its split
comes from its server's metrics, read twice a second through every stage. What is checked:

- each sample's server split is its server's record of the same request (to the millisecond the header keeps);
- per stage and class, the stored split's means are the means of the server's records of the stage's requests
  (exactly for the replies; for the LLM, from its metrics' totals over the stage's window, within what a window
  whose edges cut requests in flight allows);
- the growth of each part under time-slicing is the growth of the truth, and the parts add up to the whole;
- the series were stored per class and stage with their source, and the report and the answer say it.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from harness import Campaign, run_campaign

from bench_plugin.results.samples import Sample
from bench_plugin.results.store import open_campaign
from bench_plugin.results.summary import Summary, load_summary

pytestmark = [pytest.mark.slow, pytest.mark.serial]  # the simulator's times against its truth: a quiet host

HEADER_MS = 0.01
"""The headers say milliseconds to three decimals; the samples keep them."""


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> Campaign:
    return run_campaign(tmp_path_factory.mktemp("queueing"), "simulator-queueing")


@pytest.fixture(scope="module")
def summary(campaign: Campaign) -> Summary:
    return load_summary(campaign.results / "summary.json")


def records(campaign: Campaign) -> dict[str, dict[str, Any]]:
    """Every request's server record (all classes and arms), by its X-Request-Id."""
    out: dict[str, dict[str, Any]] = {}
    for log in (campaign.results / "logs").glob("timing-*.jsonl"):
        for line in log.read_text().splitlines():
            record = json.loads(line)
            if record.get("request_id"):
                out[record["request_id"]] = record
    return out


def samples(campaign: Campaign) -> Iterator[Sample]:
    with open_campaign(campaign.results / "results.sqlite") as reader:
        for trial in reader.trials():
            yield from reader.samples(trial.id)


def truth(record: dict[str, Any]) -> tuple[float, float]:
    """(queue, compute) in ms as the server logged them: arrival to its slot, then to when it took its times (its
    headers and metrics; the reply is written and the record ends a moment later)."""
    assert record["timed_s"] is not None and record["end_s"] >= record["timed_s"] >= record["scheduled_s"]
    scheduled = record["scheduled_s"]
    return (scheduled - record["received_s"]) * 1000.0, (record["timed_s"] - scheduled) * 1000.0


def key(s: Sample) -> str:
    return f"{s.worker}/{s.trial}.{s.segment}.{s.stage}/{s.workload}/{s.seq}"


def test_each_reply_says_what_its_server_logged(campaign: Campaign) -> None:
    logged = records(campaign)
    said = [s for s in samples(campaign) if s.ok and s.workload in ("embedding", "asr")]
    assert len(said) > 300 and all(s.server_queue_s is not None and s.server_compute_s is not None for s in said)
    for s in said:
        queue, compute = truth(logged[key(s)])
        assert s.server_queue_s is not None and s.server_compute_s is not None
        assert abs(s.server_queue_s * 1000.0 - queue) <= HEADER_MS, key(s)
        assert abs(s.server_compute_s * 1000.0 - compute) <= HEADER_MS, key(s)
    streamed = [s for s in samples(campaign) if s.workload == "llm"]
    assert streamed and all(s.server_queue_s is None for s in streamed)  # a stream's headers go before its end


def stage_truth(campaign: Campaign) -> dict[tuple[int, int, str], list[tuple[float, float]]]:
    """(trial, stage, class) -> the server's (queue, compute) of each successful request of it."""
    logged = records(campaign)
    out: dict[tuple[int, int, str], list[tuple[float, float]]] = {}
    for s in samples(campaign):
        if s.ok:
            out.setdefault((s.trial, s.stage, s.workload), []).append(truth(logged[key(s)]))
    return out


def test_each_stages_split_is_the_servers_own(campaign: Campaign, summary: Summary) -> None:
    known = stage_truth(campaign)
    checked = 0
    for trial in summary.trials:
        for stage in trial.stages:
            for name, c in stage.classes.items():
                assert c.server is not None and c.server.mean is not None and c.server.engine == "reference"
                mean = c.server.mean
                queue, compute = np.mean(known[(trial.id, stage.index, name)], axis=0)
                assert mean.queue_ms is not None and mean.compute_ms is not None and mean.other_ms is not None
                slack_ms = 2 * HEADER_MS
                if name == "llm":  # from the metrics over the span its requests ended in: one reading at each edge
                    assert c.server.split_from == "metrics" and c.server.p95 is None
                    compute_ms, queue_ms = max(3.0, 0.1 * compute), max(3.0, 0.25 * queue)
                    assert abs(mean.compute_ms - compute) <= compute_ms, (trial.id, stage.index)
                    assert abs(mean.queue_ms - queue) <= queue_ms, (trial.id, stage.index)
                    slack_ms += compute_ms + queue_ms  # the rest is what the two estimates leave of the mean
                else:
                    assert c.server.split_from == "replies" and c.server.p95 is not None
                    assert mean.queue_ms == pytest.approx(queue, abs=HEADER_MS)
                    assert mean.compute_ms == pytest.approx(compute, abs=HEADER_MS)
                # The rest is the latency the server's own records leave (writing the reply, loopback, the client
                # reading it): never negative (the server's time is inside the client's), and what the split says.
                rest = mean.total_ms - mean.client_ms - queue - compute
                assert rest >= -slack_ms and abs(mean.other_ms - rest) <= slack_ms, (trial.id, stage.index, name)
                assert -1.0 <= mean.client_ms <= 20.0
                assert mean.total_ms == pytest.approx(mean.client_ms + mean.queue_ms + mean.compute_ms
                                                      + mean.other_ms)
                checked += 1
    assert checked == 4 * 2 * 3  # trials x stages x classes


def test_sharing_adds_compute_and_at_the_busy_stage_queueing(campaign: Campaign, summary: Summary) -> None:
    known = stage_truth(campaign)
    arms = {t.id: (t.arm, t.repeat) for t in summary.trials}
    split = summary.comparison.arms["time-slicing"]
    for stage in split.stages:
        for name, c in stage.classes.items():
            s = c.latency_split
            assert s is not None and s.mean.queue_ms is not None and s.mean.compute_ms is not None
            assert s.mean.total_ms.n == 2 and s.mean.total_ms.ci95 is not None  # over the paired repeats
            parts = (s.mean.client_ms.mean or 0) + s.mean.queue_ms.mean + s.mean.compute_ms.mean \
                + (s.mean.other_ms.mean if s.mean.other_ms else 0)  # type: ignore[operator]
            assert parts == pytest.approx(s.mean.total_ms.mean)
            if name == "llm":
                continue  # its split is checked against the truth per stage above
            by_repeat = {}
            for trial, (arm, repeat) in arms.items():
                by_repeat[(arm, repeat)] = np.mean(known[(trial, stage.index, name)], axis=0)
            grown = [by_repeat[("time-slicing", r)] - by_repeat[("exclusive", r)] for r in (1, 2)]
            assert s.mean.queue_ms.values == pytest.approx([g[0] for g in grown], abs=2 * HEADER_MS)
            assert s.mean.compute_ms.values == pytest.approx([g[1] for g in grown], abs=2 * HEADER_MS)
            assert s.mean.compute_ms.mean > 5.0  # 14 ms of service where the control had 10, on a busier device
    busy = split.stages[1].classes["embedding"].latency_split
    assert busy is not None and busy.mean.queue_ms is not None and busy.mean.queue_ms.mean > 10.0  # slots held longer


def test_the_series_are_stored_per_class_and_stage_with_their_source(campaign: Campaign) -> None:
    db = sqlite3.connect(campaign.results / "results.sqlite")
    rows = db.execute("SELECT trial, stage, workload, quantity, COUNT(*) FROM server_series WHERE stage >= 0 "
                      "GROUP BY trial, stage, workload, quantity").fetchall()
    seen = {(trial, stage, workload, quantity): n for trial, stage, workload, quantity, n in rows}
    for trial in (1, 2, 3, 4):
        for stage in (0, 1):
            for workload in ("llm", "embedding", "asr"):
                for quantity in ("queue_depth", "running", "queue_time_s", "compute_time_count"):
                    assert seen.get((trial, stage, workload, quantity), 0) >= 4, (trial, stage, workload, quantity)
    sources = [json.loads(detail) for (detail,) in db.execute("SELECT detail FROM events WHERE kind='server_metrics'")]
    assert len(sources) == 2 * 3 + 2 * 1  # exclusive: a segment per class; time-slicing: one
    for entry in sources:
        for source in entry["sources"]:
            assert source["engine"] == "reference" and source["problems"] == {}
            assert source["url"].endswith("/metrics") and source["names"]["queue_depth"] == "bench_server_queue_depth"


def test_the_answer_and_the_report_say_where_it_goes(campaign: Campaign, summary: Summary) -> None:
    answer = summary.comparison.arms["time-slicing"].answer
    assert answer is not None and answer.growth is not None
    assert "Where it goes: at stage" in campaign.output
    report = (campaign.results / "report.md").read_text()
    assert "## Where the added latency goes" in report and "| 1 busy | embedding | around the P95" in report
    html = (campaign.results / "report.html").read_text()
    assert 'id="where-it-goes"' in html and 'data-plot="split-time-slicing"' in html
