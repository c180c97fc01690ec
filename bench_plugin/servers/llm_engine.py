"""Continuous (iteration-level) batching engine for the decoder LM.

One engine thread owns the model and its KV cache. Each iteration it (1) admits
waiting requests into free cache slots and prefills them together (their first
token comes out of the prefill), then (2) runs one batched decode step for every
active sequence, hands each new token to its request, and frees the slots of
sequences that reached ``max_tokens``. New requests therefore join between decode
steps instead of waiting for a whole batch to finish. Decoding is greedy and every
request generates exactly ``max_tokens`` tokens: with random weights EOS means
nothing, so it never ends a request (the ``ignore_eos`` behaviour, always on).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from .llm_model import DecoderLM
from .metrics import ServerMetrics

_IDLE_WAIT_S = 0.1  # how often an idle engine re-checks for shutdown


@dataclass(eq=False)
class GenerationRequest:
    """One request as the engine sees it; callbacks run on the engine thread."""

    prompt_ids: list[int]
    max_tokens: int
    on_token: Callable[[int], object]
    on_finish: Callable[[BaseException | None], object]
    arrival: float = field(default_factory=time.perf_counter)
    # Set by the HTTP side when the client went away; the engine frees the slot.
    cancelled: bool = False


@dataclass(eq=False)
class _Sequence:
    request: GenerationRequest
    slot: int
    length: int  # tokens already in the KV cache
    last_token: int  # generated but not yet in the cache
    generated: int


class LlmEngine:
    """Owns the model on a dedicated thread and schedules requests onto it."""

    def __init__(
        self, build: Callable[[], DecoderLM], max_batch_size: int, max_model_len: int, metrics: ServerMetrics
    ) -> None:
        self._build = build
        self.max_batch_size = max_batch_size
        self.max_model_len = max_model_len
        self._metrics = metrics
        self._cond = threading.Condition()
        self._waiting: deque[GenerationRequest] = deque()
        self._active: list[_Sequence] = []
        self._free_slots = list(range(max_batch_size - 1, -1, -1))
        self._stopped = False
        self._model: DecoderLM | None = None
        self._thread: threading.Thread | None = None

    def start(self, on_ready: Callable[[], object], on_error: Callable[[BaseException], object]) -> None:
        """Build and warm the model on the engine thread, then serve until stopped."""
        self._thread = threading.Thread(target=self._run, args=(on_ready, on_error), name="llm-engine", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop after the current step; pending requests are failed."""
        with self._cond:
            self._stopped = True
            self._cond.notify_all()

    def submit(self, request: GenerationRequest) -> None:
        """Queue a request (any thread); it is admitted at the next iteration."""
        with self._cond:
            if self._stopped:
                raise RuntimeError("engine is shutting down")
            self._waiting.append(request)
            self._metrics.queue_depth.set(len(self._waiting))
            self._cond.notify()

    def _run(self, on_ready: Callable[[], object], on_error: Callable[[BaseException], object]) -> None:
        try:
            with torch.inference_mode():
                self._model = self._build()
                self._model.allocate_cache(self.max_batch_size, self.max_model_len)
                self._warm()
        except Exception as exc:
            on_error(exc)
            return
        on_ready()
        with torch.inference_mode():
            while self._iterate():
                pass
        self._fail_all(RuntimeError("server is shutting down"))

    def _warm(self) -> None:
        # A few real passes: a prefill, then decode steps at batch 1 and at full batch,
        # so lazy kernel selection and allocator growth happen before /health says ready.
        n = min(self.max_batch_size, 4)
        prompt = torch.arange(8, 16, device=self._device).view(1, -1)
        self._forward(prompt, torch.arange(8, device=self._device).view(1, -1), [0], 8, [7], observe=False)
        for batch in (1, n):
            tokens = torch.full((batch, 1), 9, device=self._device)
            positions = torch.full((batch, 1), 8, device=self._device)
            self._forward(tokens, positions, list(range(batch)), 9, [0] * batch, observe=False)

    @property
    def _device(self) -> torch.device:
        assert self._model is not None
        return self._model.embed.weight.device

    def _iterate(self) -> bool:
        """One scheduling iteration; False once the engine is stopped."""
        admitted = self._admit()
        if admitted is None:
            return False
        try:
            if admitted:
                self._prefill(admitted)
            self._drop_cancelled()
            if self._active:
                self._decode()
        except Exception as exc:  # a model fault fails the affected requests, not the server
            self._fail_all(exc)
        return True

    def _admit(self) -> list[GenerationRequest] | None:
        """Pop waiting requests that fit into free slots (blocks while idle)."""
        with self._cond:
            while not self._waiting and not self._active and not self._stopped:
                self._cond.wait(_IDLE_WAIT_S)
            if self._stopped:
                return None
            admitted: list[GenerationRequest] = []
            while self._waiting and len(admitted) < len(self._free_slots):
                request = self._waiting.popleft()
                if not request.cancelled:
                    admitted.append(request)
            self._metrics.queue_depth.set(len(self._waiting))
        now = time.perf_counter()
        for request in admitted:
            self._metrics.queue_time.observe(now - request.arrival)
        return admitted

    def _prefill(self, requests: list[GenerationRequest]) -> None:
        """Prefill new requests as one right-padded batch; emit their first tokens."""
        lengths = [len(r.prompt_ids) for r in requests]
        width = max(lengths)
        # Padding continues each sequence's positions; those cache cells are overwritten
        # by decode before anything attends to them.
        padded = [r.prompt_ids + [0] * (width - len(r.prompt_ids)) for r in requests]
        tokens = torch.tensor(padded, device=self._device)
        positions = torch.arange(width, device=self._device).expand(len(requests), -1)
        slots = [self._free_slots.pop() for _ in requests]
        new = [_Sequence(r, s, n, -1, 0) for r, s, n in zip(requests, slots, lengths, strict=True)]
        self._active.extend(new)
        self._metrics.in_flight.set(len(self._active))
        next_tokens = self._forward(tokens, positions, slots, width, [n - 1 for n in lengths])
        self._emit(new, next_tokens)

    def _decode(self) -> None:
        """One decode step for every active sequence."""
        seqs = list(self._active)
        tokens = torch.tensor([[s.last_token] for s in seqs], device=self._device)
        positions = torch.tensor([[s.length] for s in seqs], device=self._device)
        kv_len = max(s.length for s in seqs) + 1
        for s in seqs:
            s.length += 1
        next_tokens = self._forward(tokens, positions, [s.slot for s in seqs], kv_len, [0] * len(seqs))
        self._emit(seqs, next_tokens)

    def _forward(
        self,
        tokens: torch.Tensor,
        positions: torch.Tensor,
        slots: list[int],
        kv_len: int,
        last: list[int],
        observe: bool = True,
    ) -> list[int]:
        """One model step; returns the greedy next token of each sequence."""
        assert self._model is not None
        if observe:  # warm-up passes stay out of the batch-size histogram
            self._metrics.batch_size.observe(len(slots))
        logits = self._model(
            tokens,
            positions,
            torch.tensor(slots, device=self._device),
            kv_len,
            torch.tensor(last, device=self._device),
        )
        return logits.argmax(dim=-1).tolist()

    def _emit(self, seqs: list[_Sequence], next_tokens: list[int]) -> None:
        """Deliver one new token per sequence; retire sequences that are done."""
        for seq, token in zip(seqs, next_tokens, strict=True):
            seq.last_token = token
            seq.generated += 1
            seq.request.on_token(token)
        self._metrics.generated_tokens.inc(len(seqs))
        for seq in seqs:
            if seq.generated >= seq.request.max_tokens:
                self._retire(seq, None)

    def _retire(self, seq: _Sequence, error: BaseException | None) -> None:
        self._active.remove(seq)
        self._free_slots.append(seq.slot)
        self._metrics.in_flight.set(len(self._active))
        seq.request.on_finish(error)

    def _drop_cancelled(self) -> None:
        for seq in [s for s in self._active if s.request.cancelled]:
            self._retire(seq, None)

    def _fail_all(self, exc: BaseException) -> None:
        for seq in list(self._active):
            self._retire(seq, exc)
        with self._cond:
            waiting = list(self._waiting)
            self._waiting.clear()
            self._metrics.queue_depth.set(0)
        for request in waiting:
            request.on_finish(exc)
