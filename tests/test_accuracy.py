"""Accuracy: against a server with known latencies that logs its own timings, request by request.

Every request carries an X-Request-Id, and the synthetic server logs it beside its own timings, so
each sample is paired with the server's record of the same request. Per request the harness can only
report more than the server took (the client also waits for the network and its own event loop),
never less; the difference is the transport. What the tests hold, for e2e latency and TTFT:

- the request counts match, pair by pair;
- causality: no sample reports less than its server record (0.5 ms allowed for the two clocks'
  reads), which catches a latency measured from a later start or to an earlier end. The server's
  record ends no later than a client can see the end: before the closing chunks of a stream, before
  the write of a whole reply;
- the transport is small: its median over the stage is under 5 ms on loopback;
- the harness adds a constant for the wire and distorts nothing else, request by request: at least
  95% of the samples are within max(5 ms, 3%) of their own server record plus that median transport
  (a tail it invents or loses shows up here, whichever percentile it would move);
- the reported P50/P95 are the percentiles of exactly those samples, and the P50 is also within the
  tolerance of the server's own P50 shifted by the transport. The server's P95 is not compared the same
  way: the slow share puts it between the two modes, where numpy's interpolation weighs the fast mode's
  largest sample, so the request with the most transport of all the fast ones moves it by several times
  that request's own excess (8 ms from one 12-ms delay, in one CI run): a test of which sample is
  the largest, not of the harness.

TPOT is a difference of two client times, so the transport cancels: it is compared directly. A busy
2-core machine moves the transport by a millisecond or three from run to run; that is measured
here, not absorbed into the tolerance. A run whose own self-check flags a stage (the host busy with
other work, the generator behind) is not judged: it is measured again (see ``calibration``).

Every check runs twice: on one process (the local runner) and on two workers under a master
(``--processes 2``, what the sizing gives wherever the host has the cores): the samples that cross
from the workers to the master must say what the server logged just as well.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from harness import Campaign, busy_stages, run_campaign

from bench_plugin.results.samples import Sample
from bench_plugin.results.store import open_campaign

pytestmark = [pytest.mark.slow, pytest.mark.serial]

ATTEMPTS = 3
CAUSALITY_SLACK_MS = 0.5
TRANSPORT_LIMIT_MS = 5.0
JITTER_MS = 5.0
"""How far one request's transport may stray from the stage's median (or 3% of its server time, if more):
a 2-core machine's scheduler moves single requests by a few ms (1 to 4.5 ms at worst in a run here). A moment
the hypervisor takes the machine (10 ms once, in a stage whose steal was 0.1% of its CPU time) delays every
request in flight then, two or three at once: the stage is long enough (about 96 requests a class) that such a
moment stays within the 5% of samples that may stray."""


def tolerance(reference: float) -> float:
    return max(2.0, 0.03 * reference)


PROCESSES = {"one process": (), "2 workers": ("--processes", "2")}
"""How the calibration campaign is run: the local runner (the session's shared run), and two workers under a master."""


@pytest.fixture(scope="module", params=list(PROCESSES))
def calibration(request: pytest.FixtureRequest, calibration_campaign: Campaign,
                tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """The calibration campaign, run again (at most ATTEMPTS in all) while its own self-check flags a stage.

    A stage measured while other work held the CPU, or while the load generator fell behind, is flagged
    by the campaign itself (host_busy, generator_limited), and its figures are not the harness's to
    answer for. Such a run is measured again, the reason printed; one that is not flagged is judged
    with the full tolerance. If every run is flagged, the host never let the harness be judged: skipped,
    saying why.
    """
    flags = PROCESSES[request.param]
    campaign = run_campaign(tmp_path_factory.mktemp("calibration"), "calibration", *flags) if flags \
        else calibration_campaign
    for attempt in range(1, ATTEMPTS + 1):
        summary = json.loads((campaign.results / "summary.json").read_text())
        senders = summary["load_generators"]["processes"]
        assert len(senders) == (int(flags[1]) if flags else 1), senders
        noise = busy_stages(summary)
        if not noise:
            return campaign.results, summary
        print(f"calibration run {attempt} of {ATTEMPTS} was measured on a busy host:", *noise, sep="\n  ")
        if attempt < ATTEMPTS:
            campaign = run_campaign(tmp_path_factory.mktemp("calibration-again"), "calibration", *flags)
    pytest.skip(f"the host was busy in all {ATTEMPTS} calibration runs ({noise[0]}): accuracy cannot be judged here")


def pairs(results: Path, name: str) -> list[tuple[Sample, dict[str, Any]]]:
    """(sample, server record) of every successful request of the stage, matched by X-Request-Id."""
    with open_campaign(results / "results.sqlite") as reader:
        samples = {f"{s.worker}/1.0.0/{name}/{s.seq}": s for s in reader.samples(1)
                   if s.stage == 0 and s.workload == name and s.ok}
    lines = (results / "logs" / f"synthetic-{name}.jsonl").read_text().splitlines()
    records = {r["request_id"]: r for r in map(json.loads, lines) if r.get("request_id")}
    assert set(samples) == set(records), "every sample must have its server record, and no record more"
    return [(samples[key], records[key]) for key in sorted(samples)]


def check(reported: dict[str, float], client: list[float], server: list[float], what: str) -> None:
    gaps = np.asarray(client) - np.asarray(server)
    assert gaps.min() >= -CAUSALITY_SLACK_MS, f"{what}: a sample reports {-gaps.min():.2f} ms less than the server took"
    transport = float(np.median(gaps))
    assert transport < TRANSPORT_LIMIT_MS, f"{what}: the median transport is {transport:.2f} ms"
    excess = np.abs(gaps - transport) / np.maximum(JITTER_MS, 0.03 * np.asarray(server))
    outside = int((excess > 1).sum())
    assert outside <= 0.05 * len(gaps), (
        f"{what}: {outside} of {len(gaps)} samples are off their server record plus {transport:.2f} ms transport "
        f"by more than the tolerance (worst {float(np.max(np.abs(gaps - transport))):.2f} ms)")
    for p in (50, 95):
        own = float(np.percentile(client, p))
        assert abs(reported[f"p{p}"] - own) <= 0.01, f"{what} p{p}: reported {reported[f'p{p}']:.3f}, samples {own:.3f}"
    truth = float(np.percentile(server, 50)) + transport
    assert abs(reported["p50"] - truth) <= tolerance(truth), (
        f"{what} p50: reported {reported['p50']:.2f} ms, server {truth - transport:.2f} + {transport:.2f} ms transport")


def test_llm_e2e_ttft_tpot_match_the_server(calibration: tuple[Path, dict[str, Any]]) -> None:
    results, summary = calibration
    figures = summary["trials"][0]["stages"][0]["classes"]["llm"]
    matched = pairs(results, "llm")
    assert figures["requests"] == len(matched) > 20
    assert figures["errors"] == 0
    assert sum(rec["slow"] for _, rec in matched) > 0, "the known slow share must show up in the sample"
    e2e = [(s.end_s - s.intended_s) * 1000 for s, _ in matched]
    check(figures["latency_ms"], e2e, [rec["e2e_ms"] for _, rec in matched], "e2e")
    ttft = [(s.first_token_s - s.intended_s) * 1000 for s, _ in matched if s.first_token_s is not None]
    assert len(ttft) == len(matched), "every llm sample has its first token"
    check(figures["ttft_ms"], ttft, [rec["ttft_ms"] for _, rec in matched], "TTFT")
    server_tpot = [rec["tpot_ms"] for _, rec in matched]
    for p in (50, 95):
        truth = float(np.percentile(server_tpot, p))
        assert abs(figures["tpot_ms"][f"p{p}"] - truth) <= tolerance(truth), ("TPOT", p)
    # ITL pools every gap between tokens (one a chunk here); their mean is the server's time from first to last
    # token over its gaps, which packets that arrive together cannot move (a short gap, then a long one)
    spans = sum(rec["last_token_s"] - rec["first_token_s"] for _, rec in matched)
    truth = spans * 1000 / sum(rec["output_tokens"] - 1 for _, rec in matched)
    assert figures["tokens_per_chunk"] == 1.0 and figures["tokens_from"] == {"usage": len(matched)}
    assert abs(figures["itl_ms"]["mean"] - truth) <= tolerance(truth), ("ITL mean", figures["itl_ms"], truth)
    assert abs(figures["itl_ms"]["p50"] - 8) <= tolerance(8), ("ITL p50 against the configured 8 ms", figures["itl_ms"])


def test_embedding_latency_matches_the_server(calibration: tuple[Path, dict[str, Any]]) -> None:
    results, summary = calibration
    figures = summary["trials"][0]["stages"][0]["classes"]["embedding"]
    matched = pairs(results, "embedding")
    assert figures["requests"] == len(matched) > 20
    e2e = [(s.end_s - s.intended_s) * 1000 for s, _ in matched]
    check(figures["latency_ms"], e2e, [rec["e2e_ms"] for _, rec in matched], "e2e")


def test_server_latencies_are_the_configured_ones(calibration: tuple[Path, dict[str, Any]]) -> None:
    """The reference itself: 40 ms TTFT (+150 ms when slow), 8 ms between tokens."""
    matched = pairs(calibration[0], "llm")
    fast = [rec for _, rec in matched if not rec["slow"]]
    assert abs(np.median([r["ttft_ms"] for r in fast]) - 40) < 3
    assert abs(np.median([r["tpot_ms"] for _, r in matched]) - 8) < 1
