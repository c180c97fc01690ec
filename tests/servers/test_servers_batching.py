"""In-process checks of the dynamic batcher (its limits, its pipelining) and of the numpy-formatted embeddings body.

The pipelined batcher is driven against a stand-in asynchronous device: one thread that runs launched
batches in order, as a CUDA stream does, so what the worker does while a batch is on the device is seen.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np
import pytest

from bench_plugin.servers.api_embeddings import EmbeddingRequest, embeddings_body, embeddings_response, format_floats
from bench_plugin.servers.batching import DynamicBatcher, Pipelined
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


class Device:
    """Runs launched batches one after another on its own thread; logs the worker's launches and finishes."""

    def __init__(self, hold_first: threading.Event | None = None) -> None:
        self.log: list[tuple[str, list[int]]] = []
        self.hold_first = hold_first
        self.held_until_next_launch: bool | None = None
        self._stream = ThreadPoolExecutor(max_workers=1)

    def launch(self, batch: list[int]) -> Future[list[int]]:
        self.log.append(("launch", list(batch)))
        first = len(self.log) == 1
        if not first and self.hold_first is not None:
            self.hold_first.set()  # the next batch is launched: the first may end
        return self._stream.submit(self._run, list(batch), first)

    def _run(self, batch: list[int], first: bool) -> list[int]:
        if first and self.hold_first is not None:  # still on the device when the worker looks for more
            self.held_until_next_launch = self.hold_first.wait(timeout=60)
        if -1 in batch:
            raise ValueError("bad item")
        return [10 * item for item in batch]

    def finish(self, launched: Future[list[int]]) -> list[int]:
        results = launched.result()
        self.log.append(("finish", [r // 10 for r in results]))
        return results


def _pipelined(device: Device, waves: list[list[int]], max_batch: int,
               max_wait_s: float = 0.0) -> list[list[int | str]]:
    """Submit each wave of items once the last wave's results are in; each wave's results (or error text)."""
    go = threading.Event()

    def setup() -> Pipelined[int, int, Future[list[int]]]:
        go.wait()  # everything of the first wave is queued before the worker looks
        return Pipelined(device.launch, device.finish)

    async def main() -> list[list[int | str]]:
        batcher: DynamicBatcher[int, int] = DynamicBatcher("test", setup, max_batch_size=max_batch,
                                                           max_wait_s=max_wait_s, metrics=ServerMetrics())
        loop = asyncio.get_running_loop()
        batcher.start(lambda: None, lambda exc: None)
        out: list[list[int | str]] = []
        for index, wave in enumerate(waves):
            futures = [batcher.submit(item) for item in wave]
            if index == 0:
                loop.call_soon(go.set)
            done = await asyncio.gather(*futures, return_exceptions=True)
            out.append([r if isinstance(r, int) else str(r) for r in done])
        batcher.stop()
        return out

    return asyncio.run(main())


def test_the_next_batch_is_launched_while_the_last_is_on_the_device() -> None:
    device = Device(hold_first=threading.Event())
    results = _pipelined(device, [[1, 2, 3, 4, 5]], max_batch=2)
    assert results == [[10, 20, 30, 40, 50]]
    assert device.held_until_next_launch is True, "the worker waited for the first batch before launching more"
    assert device.log == [("launch", [1, 2]), ("launch", [3, 4]), ("finish", [1, 2]), ("launch", [5]),
                          ("finish", [3, 4]), ("finish", [5])]


def test_with_nothing_queued_the_batch_in_flight_is_finished_first() -> None:
    device = Device()
    # a full batch closes at once; the window only keeps a later wave from splitting as it is submitted
    assert _pipelined(device, [[1, 2], [3, 4]], max_batch=2, max_wait_s=5.0) == [[10, 20], [30, 40]]
    assert device.log == [("launch", [1, 2]), ("finish", [1, 2]), ("launch", [3, 4]), ("finish", [3, 4])]


def test_a_failed_batch_fails_its_own_items_only() -> None:
    device = Device()
    results = _pipelined(device, [[1, -1, 2, 3]], max_batch=2)
    assert results == [["bad item", "bad item", 20, 30]]


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
    assert format_floats(np.array([[0.5, -0.25]])) == [b" 0.500000000,-0.250000000 "]
    # Values the fixed-point form cannot hold fall back to json.dumps.
    odd = json.loads(embeddings_body(req, [np.array([12.5, np.nan], dtype=np.float32)], "m", 1))
    assert odd["data"][0]["embedding"][0] == 12.5 and np.isnan(odd["data"][0]["embedding"][1])
    b64 = json.loads(embeddings_body(EmbeddingRequest(["x"], "base64", None), vectors[:1], "m", 1))
    assert b64["data"][0]["embedding"] == embeddings_response(
        EmbeddingRequest(["x"], "base64", None), vectors[:1], "m", 1)["data"][0]["embedding"]


def test_the_devices_text_is_the_hosts_byte_for_byte() -> None:
    torch = pytest.importorskip("torch")
    from bench_plugin.servers.embedding_text import float_text

    rng = np.random.default_rng(1)
    rows = rng.standard_normal((9, 1024)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    rows[0, :6] = [1.0, -1.0, 0.0, -0.0, 9.9999995, -5e-10]  # the extremes, both zeros, a value that rounds to 0
    text = float_text(torch.from_numpy(rows)).numpy()
    assert [row.tobytes() for row in text] == format_floats(rows)
    assert json.loads(b"[" + text[0].tobytes() + b"]")[:4] == [1.0, -1.0, 0.0, -0.0]
