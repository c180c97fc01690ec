"""In-process checks of the dynamic batcher's limits and of the numpy-formatted embeddings body."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable

import numpy as np

from bench_plugin.servers.api_embeddings import EmbeddingRequest, embeddings_body, embeddings_response, format_floats
from bench_plugin.servers.batching import DynamicBatcher
from bench_plugin.servers.metrics import ServerMetrics


def _run_batcher(items: list[list[int]], max_batch: int, max_cost: int | None) -> list[list[int]]:
    """Submit ``items`` at once to a batcher whose worker starts afterwards; returns the batches' costs."""
    batches: list[list[int]] = []
    go = threading.Event()

    def setup() -> Callable[[list[list[int]]], list[int]]:
        go.wait()  # hold the worker until everything is queued, so batch boundaries are deterministic

        def process(batch: list[list[int]]) -> list[int]:
            batches.append([len(item) for item in batch])
            return [len(item) for item in batch]

        return process

    async def main() -> list[int]:
        batcher: DynamicBatcher[list[int], int] = DynamicBatcher(
            "test", setup, max_batch_size=max_batch, max_wait_s=0.0, metrics=ServerMetrics(), cost=len,
            max_cost=max_cost,
        )
        ready = asyncio.Event()
        loop = asyncio.get_running_loop()
        batcher.start(lambda: loop.call_soon_threadsafe(ready.set), lambda exc: None)
        futures = [batcher.submit(item) for item in items]
        go.set()
        results = await asyncio.gather(*futures)
        batcher.stop()
        return list(results)

    assert asyncio.run(main()) == [len(item) for item in items]
    return batches


def test_batches_close_at_the_token_budget() -> None:
    items = [[1] * n for n in (100, 300, 200, 50, 900, 10, 10)]
    batches = _run_batcher(items, max_batch=8, max_cost=500)
    assert batches == [[100, 300], [200, 50], [900], [10, 10]]  # an item over budget goes alone


def test_batches_close_at_the_item_count_without_a_budget() -> None:
    batches = _run_batcher([[1] * 5 for _ in range(7)], max_batch=3, max_cost=None)
    assert [len(b) for b in batches] == [3, 3, 1]


def test_numpy_formatted_body_parses_to_the_json_response() -> None:
    rng = np.random.default_rng(0)
    vectors = [v / np.linalg.norm(v) for v in rng.standard_normal((5, 64)).astype(np.float32)]
    vectors.append(np.array([1.0, -1.0, 0.0, -0.0] * 16, dtype=np.float32))
    req = EmbeddingRequest(["x"] * len(vectors), "float", None)
    fast = json.loads(embeddings_body(req, vectors, "m", 7))
    slow = embeddings_response(req, vectors, "m", 7)
    assert {k: v for k, v in fast.items() if k != "data"} == {k: v for k, v in slow.items() if k != "data"}
    for a, b in zip(fast["data"], slow["data"], strict=True):
        assert a["index"] == b["index"] and a["object"] == b["object"]
        np.testing.assert_allclose(a["embedding"], b["embedding"], atol=5.1e-10, rtol=0)
    assert format_floats(np.array([[0.5, -0.25]])) == [b"0.500000000,-0.250000000"]
    # Values the fixed-point form cannot hold fall back to json.dumps.
    odd = json.loads(embeddings_body(req, [np.array([12.5, np.nan], dtype=np.float32)], "m", 1))
    assert odd["data"][0]["embedding"][0] == 12.5 and np.isnan(odd["data"][0]["embedding"][1])
    b64 = json.loads(embeddings_body(EmbeddingRequest(["x"], "base64", None), vectors[:1], "m", 1))
    assert b64["data"][0]["embedding"] == embeddings_response(
        EmbeddingRequest(["x"], "base64", None), vectors[:1], "m", 1)["data"][0]["embedding"]
