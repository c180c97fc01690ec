"""Readiness sends each class's own request and judges it as a sample: real campaigns against quirky servers.

Each test runs the real ``locust`` command (manual backend: ``--host``) against tests/quirky_server.py,
an OpenAI-compatible server with one real server's quirk switched on: fields it rejects with a 422, a
stream without ``[DONE]``, a /v1/models that fails, a reply that is not a stream, a server that starts
failing mid-run. What they prove: a server that rejects the class's request stops the campaign with
exit 2 and one line before any load; one that merely ends its streams differently is measured; a stage
whose requests all fail with one protocol error stops the campaign instead of becoming a boundary.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from harness import manual_campaign as campaign
from harness import quirky

from bench_plugin.results.store import open_campaign, open_store, read_samples

pytestmark = pytest.mark.slow

LLM: dict[str, Any] = {"model": "bench-synthetic", "api": "chat",
                       "requests": {"count": 8, "input_tokens": 8, "output_tokens": 12, "seed": 1},
                       "slo": {"p95_ms": 2000, "ttft_p95_ms": 1000, "tpot_p95_ms": 100}}


def stored_samples(results: Path) -> int:
    """How many samples the campaign under ``results`` stored."""
    with open_store(results / "results.sqlite") as db:
        return len(read_samples(db))


def error_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if "bench_plugin" in line and ("error" in line or "failed" in line)]


def test_a_server_like_transformers_serve_is_measured_with_output_lengths_set_by_the_model(tmp_path: Path) -> None:
    # it rejects vLLM's fields with a 422, ends its streams without [DONE], and its /v1/models fails
    with quirky(tmp_path, "--reject", "ignore_eos,min_tokens", "--no-done", "--models-500") as url:
        done, results = campaign(tmp_path, url, {"llm": LLM}, {"llm": 4})
    assert done.returncode == 0, done.stdout[-3000:]
    summary = json.loads((results / "summary.json").read_text())
    llm = summary["trials"][0]["stages"][0]["classes"]["llm"]
    assert llm["requests"] == 12 and llm["errors"] == 0, llm
    assert llm["output_lengths"] == "model" and llm["tokens_from"] == {"usage": 12}
    assert llm["tokens_per_chunk"] == 1.0 and llm["itl_ms"]["p50"] is not None
    # the server sends a chunk every 4 ms: the gaps say so (and TPOT spreads the same time over the tokens)
    assert 3.5 <= llm["itl_ms"]["p50"] <= 40, llm["itl_ms"]
    with open_campaign(results / "results.sqlite") as reader:
        trials = reader.trials()
        ends = {sample.stream_end for sample in read_samples(reader.db)}
    protocol = trials[0].segments[0].protocol
    assert ends == {"finish"}
    assert protocol["llm"]["output_lengths"] == "model"
    assert "rejects ignore_eos, min_tokens (HTTP 422" in protocol["llm"]["note"]
    report = (results / "report.md").read_text() if (results / "report.md").exists() else ""
    assert not report or "output lengths set by the model" in report


def test_fixed_output_true_against_a_server_that_rejects_the_fields_stops_before_any_load(tmp_path: Path) -> None:
    with quirky(tmp_path, "--reject", "ignore_eos,min_tokens", "--no-done") as url:
        done, results = campaign(tmp_path, url, {"llm": {**LLM, "fixed_output": True}}, {"llm": 4})
    assert done.returncode == 2, done.stdout[-3000:]
    line = next(line for line in done.stdout.splitlines() if "rejects ignore_eos, min_tokens" in line)
    assert "HTTP 422" in line and "Unexpected fields in the request" in line and "fixed_output: false" in line
    assert "Traceback" not in done.stdout
    assert stored_samples(results) == 0, "refused before any load"


def test_fixed_output_true_against_a_server_that_ignores_the_fields_stops_before_any_load(tmp_path: Path) -> None:
    with quirky(tmp_path, "--stop-at", "5") as url:
        done, results = campaign(tmp_path, url, {"llm": {**LLM, "fixed_output": True}}, {"llm": 4})
    assert done.returncode == 2, done.stdout[-3000:]
    assert any("ignores ignore_eos, min_tokens (generated 5 tokens, expected exactly" in line
               for line in done.stdout.splitlines()), done.stdout[-3000:]
    assert stored_samples(results) == 0


def test_a_reply_the_class_cannot_read_stops_before_any_load(tmp_path: Path) -> None:
    with quirky(tmp_path, "--junk") as url:
        done, results = campaign(tmp_path, url, {"llm": {**LLM, "fixed_output": False}}, {"llm": 4})
    assert done.returncode == 2, done.stdout[-3000:]
    assert any("its reply cannot be read as the llm class reads it" in line for line in done.stdout.splitlines())
    assert stored_samples(results) == 0


def test_an_embedding_reply_without_index_is_refused_naming_the_field(tmp_path: Path) -> None:
    embedding = {"model": "bench-synthetic", "requests": {"count": 4, "batch_size": 2, "input_tokens": 8, "seed": 2},
                 "slo": {"p95_ms": 500}}
    with quirky(tmp_path, "--embedding-drop", "index") as url:
        done, _ = campaign(tmp_path, url, {"embedding": embedding}, {"embedding": 4})
    assert done.returncode == 2, done.stdout[-3000:]
    assert any("(data[0]: object missing required field `index`)" in line for line in done.stdout.splitlines()), \
        done.stdout[-3000:]


def test_a_stage_whose_requests_all_fail_with_one_protocol_error_stops_the_campaign(tmp_path: Path) -> None:
    # readiness and the warm-up pass; then every chat request gets the same 400: no capacity was measured
    with quirky(tmp_path, "--fail-after", "2") as url:
        done, results = campaign(tmp_path, url, {"llm": LLM}, {"llm": 8}, duration_s=6)
    assert done.returncode == 2, done.stdout[-3000:]
    assert any("requests so far failed with http_400, the last" in line and "model was unloaded" in line
               for line in done.stdout.splitlines()), done.stdout[-3000:]
    assert 5 <= stored_samples(results) < 48, "stopped early, keeping what it measured"
    summary = json.loads((results / "summary.json").read_text())
    stage = summary["trials"][0]["stages"][0]
    assert stage["protocol_failure"] and "http_400" in stage["protocol_failure"]
    boundary = summary["comparison"]["arms"]["synthetic"]["boundary"]
    assert boundary["status"] == "not measured" and "http_400" in boundary["text"], boundary


@pytest.mark.parametrize("form", ["text", "verbose_json"])
def test_transcriptions_in_each_response_format_are_measured(tmp_path: Path, form: str) -> None:
    asr = {"model": "bench-synthetic", "response_format": form, "requests": {"count": 2}, "slo": {"p95_ms": 1000}}
    with quirky(tmp_path) as url:
        done, results = campaign(tmp_path, url, {"asr": asr}, {"asr": 3})
    assert done.returncode == 0, done.stdout[-3000:]
    stats = json.loads((results / "summary.json").read_text())["trials"][0]["stages"][0]["classes"]["asr"]
    assert stats["requests"] == 9 and stats["errors"] == 0, stats
