"""A server that answers 503 while it loads, or sheds load with 429, is waited for or measured, never misread.

Real processes: the ``locust`` command (manual backend) against tests/quirky_server.py. ``--busy-for``
answers 503 with ``Retry-After`` for its first seconds, as a server still loading its model does: readiness
must wait it out (a 503 means "not yet") and the campaign then measure as usual. ``--shed-above`` answers 429
with ``Retry-After`` to a request beyond its concurrency, as a server or gateway that sheds load does: those
are load-caused errors of the stage (``http_429``), recorded one sample each and counted against the error
budget, not a protocol failure and not a server that stopped serving.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path

import pytest
from harness import manual_campaign, quirky

from bench_plugin.results.store import open_campaign, read_samples

pytestmark = pytest.mark.slow

LLM = {"model": "bench-synthetic", "requests": {"count": 4, "input_tokens": 8, "output_tokens": 8, "seed": 1},
       "slo": {"p95_ms": 2000}, "fixed_output": False}


def test_a_server_still_loading_is_waited_for(tmp_path: Path) -> None:
    with quirky(tmp_path, "--busy-for", "3") as url:
        started = time.time()
        done, results = manual_campaign(tmp_path, url, {"llm": LLM}, {"llm": 4}, duration_s=2)
    assert done.returncode == 0, done.stdout[-3000:]
    assert "Traceback" not in done.stdout
    with open_campaign(results / "results.sqlite") as reader:
        ready = reader.trials()[0].segments[0].ready
        samples = [s.ok for s in read_samples(reader.db) if s.stage >= 0]
    assert ready["llm"] >= started + 3 - 0.5, (ready, started)  # not before the 503s ended
    assert samples == [True] * 8, samples


def test_load_shed_with_429_is_the_stages_errors(tmp_path: Path) -> None:
    llm = {**LLM, "error_budget": 0.9}  # the guard must let the stage run its course: its errors are the subject
    with quirky(tmp_path, "--shed-above", "1", "--itl-ms", "20") as url:
        done, results = manual_campaign(tmp_path, url, {"llm": llm}, {"llm": 20}, duration_s=3)
    assert done.returncode == 0, done.stdout[-3000:]
    assert "Traceback" not in done.stdout
    with open_campaign(results / "results.sqlite") as reader:
        kinds = Counter("ok" if s.error is None else s.error for s in read_samples(reader.db) if s.stage >= 0)
        status = reader.trials()[0].stages[0].status
    assert set(kinds) == {"ok", "http_429"} and sum(kinds.values()) == 60, kinds  # 20 req/s x 3 s, each recorded
    assert status == "completed"
    stage = json.loads((results / "summary.json").read_text())["trials"][0]["stages"][0]["classes"]["llm"]
    assert stage["errors"] == kinds["http_429"] and stage["errors_by_kind"] == {"http_429": kinds["http_429"]}
