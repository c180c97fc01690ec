"""The LLM server: OpenAI completions/chat, SSE framing, continuous batching, validation."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import aiohttp
import pytest
import requests
from servers_testlib import (
    ServerProcess,
    SseResult,
    assert_openai_error,
    metric_samples,
    post,
    stream_sse,
    stream_sse_async,
)

PROMPT = "the quick brown fox jumps over the lazy dog"  # 9 words
SSE_FRAMING = re.compile(rb"(data: [^\n]+\n\n)+")


def _check_stream(result: SseResult, chat: bool, n_tokens: int, usage: bool) -> list[dict[str, Any]]:
    assert result.status == 200
    assert result.content_type.startswith("text/event-stream")
    assert SSE_FRAMING.fullmatch(result.raw), result.raw[:300]
    assert result.raw.endswith(b"data: [DONE]\n\n")
    chunks = result.json_events()
    expected_object = "chat.completion.chunk" if chat else "text_completion"
    assert all(c["object"] == expected_object for c in chunks)
    assert len({c["id"] for c in chunks}) == 1
    if usage:
        last = chunks.pop()
        assert last["choices"] == []
        assert last["usage"] == {"prompt_tokens": 9, "completion_tokens": n_tokens, "total_tokens": 9 + n_tokens}
    assert all("usage" not in c for c in chunks)
    final = chunks.pop()
    assert final["choices"][0]["finish_reason"] == "length"
    assert all(c["choices"][0]["finish_reason"] is None for c in chunks)
    if chat:
        assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
        chunks = chunks[1:]
        pieces = [c["choices"][0]["delta"]["content"] for c in chunks]
    else:
        pieces = [c["choices"][0]["text"] for c in chunks]
    assert len(pieces) == n_tokens and all(pieces)
    assert len("".join(pieces).split()) == n_tokens
    return chunks


def test_completion_non_stream(llm_server: ServerProcess) -> None:
    resp = post(llm_server, "/v1/completions", {"model": "bench-llm-tiny", "prompt": PROMPT, "max_tokens": 7})
    assert resp.status_code == 200
    body = resp.json()
    assert body["object"] == "text_completion" and body["model"] == "bench-llm-tiny"
    (choice,) = body["choices"]
    assert choice["finish_reason"] == "length" and len(choice["text"].split()) == 7
    assert body["usage"] == {"prompt_tokens": 9, "completion_tokens": 7, "total_tokens": 16}


def test_chat_non_stream_and_default_max_tokens(llm_server: ServerProcess) -> None:
    messages = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "one two"}, {"type": "text", "text": "three"}]},
    ]
    body = post(llm_server, "/v1/chat/completions", {"messages": messages, "temperature": 0.7, "seed": 3}).json()
    assert body["object"] == "chat.completion"
    message = body["choices"][0]["message"]
    assert message["role"] == "assistant" and len(message["content"].split()) == 16
    assert body["usage"]["prompt_tokens"] == 5 and body["usage"]["completion_tokens"] == 16


def test_greedy_is_deterministic(llm_server: ServerProcess) -> None:
    body = {"prompt": PROMPT, "max_tokens": 5}
    first = post(llm_server, "/v1/completions", body).json()["choices"][0]["text"]
    again = post(llm_server, "/v1/completions", {**body, "prompt": [PROMPT]}).json()["choices"][0]["text"]
    assert again == first


@pytest.mark.parametrize("usage", [True, False])
def test_chat_stream_framing(llm_server: ServerProcess, usage: bool) -> None:
    body = {
        "messages": [{"role": "user", "content": PROMPT}],
        "max_completion_tokens": 6,
        "max_tokens": 99,
        "stream": True,
        "stream_options": {"include_usage": usage},
    }
    _check_stream(stream_sse(llm_server.url + "/v1/chat/completions", body), chat=True, n_tokens=6, usage=usage)


@pytest.mark.parametrize("usage", [True, False])
def test_completion_stream_framing(llm_server: ServerProcess, usage: bool) -> None:
    body = {"prompt": PROMPT, "max_tokens": 5, "stream": True, "stream_options": {"include_usage": usage}}
    chunks = _check_stream(stream_sse(llm_server.url + "/v1/completions", body), chat=False, n_tokens=5, usage=usage)
    assert all(c["choices"][0]["logprobs"] is None for c in chunks)


def test_stream_matches_non_stream(llm_server: ServerProcess) -> None:
    body = {"prompt": PROMPT, "max_tokens": 8}
    text = post(llm_server, "/v1/completions", body).json()["choices"][0]["text"]
    chunks = stream_sse(llm_server.url + "/v1/completions", {**body, "stream": True}).json_events()
    assert "".join(c["choices"][0]["text"] for c in chunks) == text


def test_continuous_batching(llm_server: ServerProcess) -> None:
    n_tokens = 48
    solo = post(llm_server, "/v1/completions", {"prompt": PROMPT, "max_tokens": n_tokens}).json()
    before = metric_samples(requests.get(llm_server.url + "/metrics", timeout=5).text, "bench_server_batch_size")

    async def run_all() -> list[SseResult]:
        async with aiohttp.ClientSession() as session:
            jobs = [
                stream_sse_async(session, llm_server.url + "/v1/completions",
                                 {"prompt": PROMPT if i % 2 == 0 else f"word {i}", "max_tokens": n_tokens,
                                  "stream": True})
                for i in range(8)
            ]  # fmt: skip
            return await asyncio.gather(*jobs)

    results = asyncio.run(run_all())
    for i, result in enumerate(results):
        chunks = _check_stream(result, chat=False, n_tokens=n_tokens, usage=False)
        if i % 2 == 0:  # batching must not change the greedy result
            assert "".join(c["choices"][0]["text"] for c in chunks) == solo["choices"][0]["text"]
    after = metric_samples(requests.get(llm_server.url + "/metrics", timeout=5).text, "bench_server_batch_size")
    steps = after["bench_server_batch_size_count"] - before["bench_server_batch_size_count"]
    single = after['bench_server_batch_size_bucket{le="1.0"}'] - before['bench_server_batch_size_bucket{le="1.0"}']
    assert steps - single > 0, "no model step ever ran more than one sequence"
    assert after["bench_server_batch_size_sum"] - before["bench_server_batch_size_sum"] > steps  # mean > 1
    metrics = requests.get(llm_server.url + "/metrics", timeout=5).text
    assert metric_samples(metrics, "bench_server_generated_tokens_total")["bench_server_generated_tokens_total"] >= (
        9 * n_tokens
    )
    assert metric_samples(metrics, "bench_server_in_flight")["bench_server_in_flight"] == 0


def test_context_length_exceeded(llm_server: ServerProcess) -> None:
    resp = post(llm_server, "/v1/completions", {"prompt": "w " * 500, "max_tokens": 13})
    assert assert_openai_error(resp, 400, param="max_tokens")["code"] == "context_length_exceeded"
    assert post(llm_server, "/v1/completions", {"prompt": "w " * 500, "max_tokens": 12}).status_code == 200


COMPLETION_ERRORS: list[tuple[Any, str | None]] = [
    ({}, "prompt"),
    ({"prompt": 5}, "prompt"),
    ({"prompt": ""}, "prompt"),
    ({"prompt": "   "}, "prompt"),
    ({"prompt": ["a", "b"]}, "prompt"),
    ({"prompt": [1, 2, 3]}, "prompt"),
    ({"prompt": "hi", "max_tokens": "5"}, "max_tokens"),
    ({"prompt": "hi", "max_tokens": 0}, "max_tokens"),
    ({"prompt": "hi", "max_tokens": True}, "max_tokens"),
    ({"prompt": "hi", "max_tokens": 2.5}, "max_tokens"),
    ({"prompt": "hi", "n": 2}, "n"),
    ({"prompt": "hi", "stream": "yes"}, "stream"),
    ({"prompt": "hi", "stream": True, "stream_options": [1]}, "stream_options"),
    ({"prompt": "hi", "temperature": "hot"}, "temperature"),
    ({"prompt": "hi", "top_p": 3}, "top_p"),
    ({"prompt": "hi", "logprobs": 5}, "logprobs"),
    ({"prompt": "hi", "echo": True}, "echo"),
    ({"prompt": "hi", "best_of": 3}, "best_of"),
    ({"prompt": "hi", "min_tokens": 20, "max_tokens": 5}, "min_tokens"),
    ({"prompt": "hi", "ignore_eos": "no"}, "ignore_eos"),
    ({"prompt": "hi", "model": 7}, "model"),
]

CHAT_ERRORS: list[tuple[Any, str | None]] = [
    ({}, "messages"),
    ({"messages": "hi"}, "messages"),
    ({"messages": []}, "messages"),
    ({"messages": ["hi"]}, "messages[0]"),
    ({"messages": [{"content": "hi"}]}, "messages[0].role"),
    ({"messages": [{"role": "wizard", "content": "hi"}]}, "messages[0].role"),
    ({"messages": [{"role": "user", "content": 5}]}, "messages[0].content"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]}, "messages[0].content"),
    ({"messages": [{"role": "user", "content": ""}]}, "messages"),
    ({"messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": -1}, "max_completion_tokens"),
    ({"messages": [{"role": "user", "content": "hi"}], "n": 3}, "n"),
    ({"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function"}]}, "tools"),
    ({"messages": [{"role": "user", "content": "hi"}], "logprobs": True}, "logprobs"),
    ({"messages": [{"role": "user", "content": "hi"}], "response_format": {"type": "json_object"}}, "response_format"),
]


@pytest.mark.parametrize(("body", "param"), COMPLETION_ERRORS)
def test_completion_rejects(llm_server: ServerProcess, body: Any, param: str | None) -> None:
    assert_openai_error(post(llm_server, "/v1/completions", body), 400, param=param)


@pytest.mark.parametrize(("body", "param"), CHAT_ERRORS)
def test_chat_rejects(llm_server: ServerProcess, body: Any, param: str | None) -> None:
    assert_openai_error(post(llm_server, "/v1/chat/completions", body), 400, param=param)


@pytest.mark.parametrize("raw", [b"{not json", b"[1, 2]", b"", b"\xff\xfe"])
def test_rejects_non_object_bodies(llm_server: ServerProcess, raw: bytes) -> None:
    resp = post(llm_server, "/v1/chat/completions", data=raw, headers={"Content-Type": "application/json"})
    assert_openai_error(resp, 400)


def test_accepts_vllm_extensions(llm_server: ServerProcess) -> None:
    body = {"prompt": "hi", "max_tokens": 3, "ignore_eos": True, "min_tokens": 3, "top_p": 0.9, "n": 1,
            "temperature": 0, "user": "x", "stop": ["\n"], "logprobs": None, "echo": False}  # fmt: skip
    assert post(llm_server, "/v1/completions", body).json()["usage"]["completion_tokens"] == 3
