"""Batched decode steps for :class:`~.llm_model.DecoderLM`, replayed from CUDA graphs.

Eager PyTorch launches each of a decode step's ~500 kernels from Python (an 8B model took
~32 ms a step on an H200 that way, against a ~4 ms memory bound), so on CUDA every step
shape is captured once, at warm-up, into a CUDA graph and replayed with one launch.

A graph needs static shapes and static input addresses, hence:

- steps always cover the slot prefix ``0..B-1``, B a batch bucket (1, 2, 4, ... up to the
  slot count); the engine hands out the lowest free slot, so the prefix stays dense, and
  rows of free slots ride along (position 0 of a free slot is scratch space);
- the attention window W (cached positions read per slot) is a bucket too
  (:func:`~.llm_model.window_buckets`), the smallest that covers the longest sequence;
- inputs live in device buffers: ``positions`` is uploaded each step, and ``tokens`` is fed
  back by the graph itself (each step writes its greedy tokens where the next step reads
  them), so a step can be launched before the previous one's tokens reach the host. The
  engine uses that to keep the GPU a step ahead of Python.

Without CUDA (or with ``--no-cuda-graphs``) the same function runs eagerly, on the same
buffers, so CPU tests exercise the exact code that is captured.
"""

from __future__ import annotations

import time
from functools import partial

import torch
from torch import Tensor

from .llm_model import DecoderLM, window_buckets
from .torch_common import capture_cuda_graph


def batch_buckets(max_batch: int) -> list[int]:
    """Powers of two below ``max_batch``, then ``max_batch`` itself."""
    sizes, size = [], 1
    while size < max_batch:
        sizes.append(size)
        size *= 2
    return [*sizes, max_batch]


def bucket_for(buckets: list[int], n: int) -> int:
    """The smallest bucket >= n."""
    for size in buckets:
        if size >= n:
            return size
    raise ValueError(f"{n} exceeds the largest bucket {buckets[-1]}")


class DecodeRunner:
    """Owns the device-side decode inputs and one CUDA graph per (batch bucket, window)."""

    def __init__(self, model: DecoderLM, use_graphs: bool) -> None:
        if model.cache is None:
            raise RuntimeError("allocate the model's cache before building a DecodeRunner")
        device = model.embed.weight.device
        if use_graphs and device.type != "cuda":
            raise ValueError("CUDA graphs need a CUDA device")
        self.model = model
        self.device = device
        self.use_graphs = use_graphs
        self.batches = batch_buckets(model.cache.slots)
        self.windows = window_buckets(model.cache.max_len)
        # The next input token of each slot; written by prefill (first token) and by each step.
        self.tokens = torch.zeros(model.cache.slots, dtype=torch.long, device=device)
        self.positions = torch.zeros(model.cache.slots, dtype=torch.long, device=device)
        self._graphs: dict[tuple[int, int], torch.cuda.CUDAGraph] = {}
        self.capture_s = 0.0

    def _step(self, batch: int, window: int) -> None:
        """The captured work: one decode step whose greedy tokens overwrite its inputs."""
        logits = self.model.decode(self.tokens[:batch], self.positions[:batch], window)
        self.tokens[:batch].copy_(logits.argmax(dim=-1))

    def capture(self) -> None:
        """Warm up and capture every (batch, window) shape; no-op without graphs.

        Largest shapes first, all sharing one memory pool: a step's intermediates are dead
        once it ends and steps never overlap, so later captures reuse the same blocks.
        """
        if not self.use_graphs:
            for batch in (self.batches[0], self.batches[-1]):  # eager warm-up: kernel selection, allocator
                self._step(batch, self.windows[0])
            return
        start = time.perf_counter()
        pool = torch.cuda.graph_pool_handle()
        side = torch.cuda.Stream(self.device)
        for batch in reversed(self.batches):
            for window in reversed(self.windows):
                self._graphs[(batch, window)] = capture_cuda_graph(
                    partial(self._step, batch, window), self.device, side, pool)
        torch.cuda.synchronize(self.device)
        self.tokens.zero_()
        self.capture_s = time.perf_counter() - start

    @property
    def graph_count(self) -> int:
        """How many step shapes were captured."""
        return len(self._graphs)

    def step(self, positions: list[int]) -> Tensor:
        """Launch one decode step for slots ``0..len(positions)-1``; returns the device tokens it writes.

        ``positions[s]`` is the cache position of slot s's input token (0 for slots that are
        not decoding). Asynchronous on CUDA: the result is valid once the current stream
        reaches this point.
        """
        batch = bucket_for(self.batches, len(positions))
        window = bucket_for(self.windows, max(positions) + 1)
        padded = positions + [0] * (batch - len(positions))
        host = torch.tensor(padded, dtype=torch.long, pin_memory=self.device.type == "cuda")
        self.positions[:batch].copy_(host, non_blocking=True)
        graph = self._graphs.get((batch, window))
        if graph is not None:
            graph.replay()
        else:
            self._step(batch, window)
        return self.tokens[:batch]

    def set_first_tokens(self, slots: Tensor, tokens: Tensor) -> None:
        """Seed the next input of newly prefilled ``slots`` with their first generated ``tokens``."""
        self.tokens[slots] = tokens
