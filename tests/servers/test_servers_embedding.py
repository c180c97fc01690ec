"""The embedding server: OpenAI /v1/embeddings shapes, norms, encodings, batching, validation."""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import aiohttp
import numpy as np
import pytest
import requests
from servers_testlib import ServerProcess, assert_openai_error, metric_samples, post

DIM = 64  # tiny preset
MAX_LEN = 128


def _vectors(body: dict[str, Any]) -> np.ndarray:
    return np.array([d["embedding"] for d in body["data"]], dtype=np.float32)


def test_single_string(embedding_server: ServerProcess) -> None:
    resp = post(embedding_server, "/v1/embeddings", {"model": "bench-embedding-tiny", "input": "hello there world"})
    assert resp.status_code == 200
    body = resp.json()
    assert body["object"] == "list" and body["model"] == "bench-embedding-tiny"
    assert body["usage"] == {"prompt_tokens": 3, "total_tokens": 3}
    (item,) = body["data"]
    assert item["object"] == "embedding" and item["index"] == 0
    assert len(item["embedding"]) == DIM
    assert np.linalg.norm(item["embedding"]) == pytest.approx(1.0, abs=1e-5)


def test_batch_inputs_order_and_determinism(embedding_server: ServerProcess) -> None:
    texts = ["alpha", "beta gamma", "delta epsilon zeta eta", "alpha"]
    body = post(embedding_server, "/v1/embeddings", {"input": texts, "dimensions": DIM}).json()
    assert [d["index"] for d in body["data"]] == [0, 1, 2, 3]
    assert body["usage"]["prompt_tokens"] == 8
    vectors = _vectors(body)
    assert vectors.shape == (4, DIM)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(vectors[0], vectors[3], atol=1e-5)
    assert not np.allclose(vectors[0], vectors[1])
    alone = _vectors(post(embedding_server, "/v1/embeddings", {"input": "beta gamma"}).json())[0]
    np.testing.assert_allclose(alone, vectors[1], atol=1e-5)


def test_token_id_inputs(embedding_server: ServerProcess) -> None:
    one = post(embedding_server, "/v1/embeddings", {"input": [10, 20, 30]}).json()
    many = post(embedding_server, "/v1/embeddings", {"input": [[10, 20, 30], [40]]}).json()
    assert len(one["data"]) == 1 and len(many["data"]) == 2
    assert many["usage"]["prompt_tokens"] == 4
    np.testing.assert_allclose(_vectors(one)[0], _vectors(many)[0], atol=1e-5)


def test_base64_equals_float(embedding_server: ServerProcess) -> None:
    texts = ["one two three", "four"]
    floats = _vectors(post(embedding_server, "/v1/embeddings", {"input": texts}).json())
    b64 = post(embedding_server, "/v1/embeddings", {"input": texts, "encoding_format": "base64"}).json()
    decoded = np.stack([np.frombuffer(base64.b64decode(d["embedding"]), dtype="<f4") for d in b64["data"]])
    np.testing.assert_allclose(decoded, floats, atol=1e-6)


def test_truncation_is_reported(embedding_server: ServerProcess) -> None:
    resp = post(embedding_server, "/v1/embeddings", {"input": ["w " * (MAX_LEN + 50), "short"]})
    assert resp.status_code == 200
    assert resp.headers["X-Truncated-Inputs"] == "1"
    assert resp.json()["usage"]["prompt_tokens"] == MAX_LEN + 1


def test_concurrent_requests_are_batched(embedding_server: ServerProcess) -> None:
    url = embedding_server.url + "/v1/embeddings"

    async def run_all() -> list[int]:
        async with aiohttp.ClientSession() as session:

            async def one(i: int) -> int:
                async with session.post(url, json={"input": f"request number {i}"}) as resp:
                    await resp.read()
                    return resp.status

            return await asyncio.gather(*(one(i) for i in range(16)))

    before = metric_samples(requests.get(embedding_server.url + "/metrics", timeout=5).text, "bench_server_batch")
    assert asyncio.run(run_all()) == [200] * 16
    after = metric_samples(requests.get(embedding_server.url + "/metrics", timeout=5).text, "bench_server_batch")
    steps = after["bench_server_batch_size_count"] - before["bench_server_batch_size_count"]
    assert after["bench_server_batch_size_sum"] - before["bench_server_batch_size_sum"] == 16
    assert steps < 16, "16 concurrent inputs were never batched together"


EMBEDDING_ERRORS: list[tuple[Any, str]] = [
    ({}, "input"),
    ({"input": ""}, "input"),
    ({"input": "   "}, "input"),
    ({"input": []}, "input"),
    ({"input": ["ok", ""]}, "input"),
    ({"input": [1, "a"]}, "input"),
    ({"input": 5}, "input"),
    ({"input": {"text": "a"}}, "input"),
    ({"input": [[1], []]}, "input"),
    ({"input": [[1, 2], [True]]}, "input"),
    ({"input": [99999]}, "input"),
    ({"input": [-1]}, "input"),
    ({"input": ["a"] * 2049}, "input"),
    ({"input": "a", "encoding_format": "int8"}, "encoding_format"),
    ({"input": "a", "dimensions": 7}, "dimensions"),
    ({"input": "a", "dimensions": "64"}, "dimensions"),
]


@pytest.mark.parametrize(("body", "param"), EMBEDDING_ERRORS)
def test_rejects(embedding_server: ServerProcess, body: Any, param: str) -> None:
    assert_openai_error(post(embedding_server, "/v1/embeddings", body), 400, param=param)


def test_rejects_bad_json(embedding_server: ServerProcess) -> None:
    assert_openai_error(post(embedding_server, "/v1/embeddings", data=b"{"), 400)
