"""A reply cut off mid-body (a server that crashes or is killed while answering) is a recorded error.

Real processes: the ``locust`` command (manual backend) against tests/quirky_server.py with
``--cut-every 2``, which announces a whole embedding reply in its headers, sends half of it and
closes the connection, every second reply. Each such request must be a sample with an error kind
and the reason, not a traceback of the sending greenlet with no error recorded; every request of the
stage is in results.sqlite and counted in summary.json.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from harness import manual_campaign, quirky

from bench_plugin.results.store import open_campaign, read_samples

pytestmark = pytest.mark.slow

EMBEDDING = {"model": "bench-synthetic", "requests": {"count": 4, "batch_size": 2, "input_tokens": 8, "seed": 2},
             "slo": {"p95_ms": 500}, "error_budget": 0.6}  # half the replies fail: the guard must not stop the stage


def test_a_reply_cut_off_mid_body_is_a_connection_error_of_its_sample(tmp_path: Path) -> None:
    with quirky(tmp_path, "--cut-every", "2") as url:
        done, results = manual_campaign(tmp_path, url, {"embedding": EMBEDDING}, {"embedding": 8}, duration_s=3)
    assert "Traceback" not in done.stdout, done.stdout[-3000:]
    with open_campaign(results / "results.sqlite") as reader:
        samples = [s for s in read_samples(reader.db) if s.stage >= 0]
    assert len(samples) == 24, len(samples)  # 8 req/s x 3 s, each one recorded
    cut = [(s.error, s.detail) for s in samples if not s.ok]
    assert 8 <= len(cut) <= 16, cut  # every second reply of the server's, readiness and warm-up included
    assert {error for error, _ in cut} == {"connection"}, cut
    assert all(detail.startswith("reply cut off while reading its body: ") for _, detail in cut), cut
    stage = json.loads((results / "summary.json").read_text())["trials"][0]["stages"][0]["classes"]["embedding"]
    assert stage["requests"] == 24 and stage["errors"] == len(cut), stage
