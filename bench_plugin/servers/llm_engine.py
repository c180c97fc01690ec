"""Continuous (iteration-level) batching engine for the decoder LM.

One engine thread owns the model and its KV cache. Each iteration it (1) admits waiting
requests into free cache slots and prefills them (their first token comes out of the
prefill), then (2) launches one batched decode step for every sequence that still needs
tokens. New requests therefore join between decode steps instead of waiting for a whole
batch to finish. Decoding is greedy and every request generates exactly ``max_tokens``
tokens: with random weights EOS means nothing, so it never ends a request (the
``ignore_eos`` behaviour, always on).

Pipelining: a request's length is known up front, so which sequences take part in the
next step never depends on the tokens just generated, and the decode runner feeds each
step's tokens to the next on the device. So the engine launches step N+1 *before* it
copies step N's tokens to the host and hands them to the requests: the GPU always has a
step queued while Python streams tokens out. A sequence whose last step is launched gives
its slot back at once (the stream orders a later prefill into that slot after the step);
its request finishes when that last token is delivered.
"""

from __future__ import annotations

import heapq
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from .llm_decode import DecodeRunner
from .llm_model import DecoderLM
from .metrics import ServerMetrics

_IDLE_WAIT_S = 0.1  # how often an idle engine re-checks for shutdown
# Most padded tokens in one prefill call: bounds activation memory when many prompts
# arrive at once (they are still all admitted in the same iteration).
PREFILL_TOKEN_BUDGET = 16384


@dataclass(eq=False)
class GenerationRequest:
    """One request as the engine sees it; callbacks run on the engine thread."""

    prompt_ids: list[int]
    max_tokens: int
    on_token: Callable[[int], object]
    on_finish: Callable[[BaseException | None], object]
    arrival: float = field(default_factory=time.perf_counter)
    scheduled: float | None = None
    """When the engine admitted it into the running batch (perf_counter)."""
    # Set by the HTTP side when the client went away; the engine frees the slot.
    cancelled: bool = False


@dataclass(eq=False)
class _Sequence:
    request: GenerationRequest
    slot: int
    length: int  # tokens in the KV cache once every launched step has run
    launched: int = 0  # tokens whose generation has been launched
    delivered: int = 0  # tokens handed to the request
    finished: bool = False


@dataclass(eq=False)
class _Launched:
    """A launched prefill or decode step whose tokens are still on their way to the host."""

    seqs: list[tuple[_Sequence, int]]  # (sequence, row of ``tokens``)
    tokens: torch.Tensor  # host copy, valid once ``ready`` is done
    ready: torch.cuda.Event | None  # None on CPU, where the copy is synchronous


class LlmEngine:
    """Owns the model on a dedicated thread and schedules requests onto it."""

    def __init__(
        self,
        build: Callable[[], DecoderLM],
        max_batch_size: int,
        max_model_len: int,
        metrics: ServerMetrics,
        cuda_graphs: bool | None = None,
    ) -> None:
        """``cuda_graphs``: replay decode steps from CUDA graphs (None: on CUDA devices only)."""
        self._build = build
        self.max_batch_size = max_batch_size
        self.max_model_len = max_model_len
        self.cuda_graphs = cuda_graphs
        self._metrics = metrics
        self._cond = threading.Condition()
        self._waiting: deque[GenerationRequest] = deque()
        self._active: list[_Sequence] = []  # sequences still needing steps launched
        self._unfinished: set[_Sequence] = set()  # requests not yet finished (active or draining)
        self._free_slots = list(range(max_batch_size))  # a heap: lowest slot first keeps the prefix dense
        self._launched: deque[_Launched] = deque()
        self._stopped = False
        self._model: DecoderLM | None = None
        self._runner: DecodeRunner | None = None
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

    @property
    def runner(self) -> DecodeRunner | None:
        """The decode runner, once the model is built."""
        return self._runner

    def _run(self, on_ready: Callable[[], object], on_error: Callable[[BaseException], object]) -> None:
        try:
            with torch.inference_mode():
                self._model = self._build()
                self._model.allocate_cache(self.max_batch_size, self.max_model_len)
                device = self._model.embed.weight.device
                graphs = device.type == "cuda" if self.cuda_graphs is None else self.cuda_graphs
                self._runner = DecodeRunner(self._model, graphs)
                self._warm()
        except Exception as exc:
            on_error(exc)
            return
        assert self._runner is not None
        print(f"bench-server llm decode: cuda graphs {'on' if self._runner.use_graphs else 'off'}, "
              f"{self._runner.graph_count} captured in {self._runner.capture_s:.1f} s "
              f"(batches {self._runner.batches}, windows {self._runner.windows})", flush=True)
        on_ready()
        with torch.inference_mode():
            while self._iterate():
                pass
        self._fail_all(RuntimeError("server is shutting down"))

    def _warm(self) -> None:
        # A real prefill first (kernel selection, allocator growth), then every decode shape:
        # captured into graphs on CUDA, so no step after /health turns ready captures or tunes.
        assert self._model is not None and self._runner is not None
        device = self._runner.device
        prompt = torch.arange(8, 16, device=device).view(1, -1)
        self._model.prefill(prompt, torch.tensor([0], device=device), torch.tensor([7], device=device))
        self._runner.capture()
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    def _iterate(self) -> bool:
        """One scheduling iteration; False once the engine is stopped."""
        admitted = self._admit()
        if admitted is None:
            return False
        try:
            launched = False
            if admitted:
                self._prefill(admitted)
                launched = True
            self._drop_cancelled()
            if self._active:
                self._decode()
                launched = True
            # Leave the newest launch running on the GPU while the older ones are delivered.
            while len(self._launched) > (1 if launched else 0):
                self._deliver(self._launched.popleft())
        except Exception as exc:  # a model fault fails the affected requests, not the server
            self._fail_all(exc)
        return True

    def _admit(self) -> list[GenerationRequest] | None:
        """Pop waiting requests that fit into free slots (blocks while idle)."""
        with self._cond:
            while not self._waiting and not self._active and not self._launched and not self._stopped:
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
            request.scheduled = now
        return admitted

    def _prefill(self, requests: list[GenerationRequest]) -> None:
        """Prefill new requests in right-padded groups of similar length; launch their first tokens."""
        new = [_Sequence(r, heapq.heappop(self._free_slots), len(r.prompt_ids)) for r in requests]
        self._active.extend(new)
        self._unfinished.update(new)
        self._metrics.in_flight.set(len(self._unfinished))
        group: list[_Sequence] = []
        for seq in sorted(new, key=lambda s: s.length):
            if group and (len(group) + 1) * seq.length > PREFILL_TOKEN_BUDGET:
                self._prefill_group(group)
                group = []
            group.append(seq)
        self._prefill_group(group)

    def _prefill_group(self, seqs: list[_Sequence]) -> None:
        assert self._model is not None and self._runner is not None
        device = self._runner.device
        width = max(s.length for s in seqs)
        # Padding continues each sequence's positions; those cache cells are overwritten by
        # decode before anything attends to them.
        padded = [s.request.prompt_ids + [0] * (width - s.length) for s in seqs]
        tokens = torch.tensor(padded, device=device)
        slots = torch.tensor([s.slot for s in seqs], device=device)
        last = torch.tensor([s.length - 1 for s in seqs], device=device)
        self._metrics.batch_size.observe(len(seqs))
        first = self._model.prefill(tokens, slots, last).argmax(dim=-1)
        self._runner.set_first_tokens(slots, first)
        for seq in seqs:
            seq.launched = 1
        self._launch_done([(s, i) for i, s in enumerate(seqs)], first)
        self._retire_launched(seqs)

    def _decode(self) -> None:
        """Launch one decode step for every sequence that still needs tokens."""
        assert self._runner is not None
        seqs = list(self._active)
        positions = [0] * (max(s.slot for s in seqs) + 1)
        for s in seqs:
            positions[s.slot] = s.length
            s.length += 1
            s.launched += 1
        self._metrics.batch_size.observe(len(seqs))
        tokens = self._runner.step(positions)
        self._launch_done([(s, s.slot) for s in seqs], tokens)
        self._retire_launched(seqs)

    def _launch_done(self, seqs: list[tuple[_Sequence, int]], tokens: torch.Tensor) -> None:
        """Start copying a launch's tokens to the host; they are delivered later, in launch order."""
        if tokens.device.type == "cuda":
            host = torch.empty(tokens.shape, dtype=tokens.dtype, pin_memory=True)
            host.copy_(tokens, non_blocking=True)
            ready = torch.cuda.Event()
            ready.record()
            self._launched.append(_Launched(seqs, host, ready))
        else:
            self._launched.append(_Launched(seqs, tokens.clone(), None))

    def _retire_launched(self, seqs: list[_Sequence]) -> None:
        """Sequences whose last step is launched leave the batch and give their slot back."""
        done = [s for s in seqs if s.launched >= s.request.max_tokens]
        if done:
            gone = set(done)
            self._active = [s for s in self._active if s not in gone]
            for seq in done:
                heapq.heappush(self._free_slots, seq.slot)

    def _deliver(self, launch: _Launched) -> None:
        """Hand a launch's tokens to their requests; finish the requests that are complete."""
        if launch.ready is not None:
            launch.ready.synchronize()
        values = launch.tokens.tolist()
        delivered = 0
        for seq, row in launch.seqs:
            if seq.finished:  # cancelled meanwhile
                continue
            seq.delivered += 1
            delivered += 1
            seq.request.on_token(values[row])
            if seq.delivered >= seq.request.max_tokens:
                self._finish(seq, None)
        self._metrics.generated_tokens.inc(delivered)

    def _finish(self, seq: _Sequence, error: BaseException | None) -> None:
        if error is None and seq.request.scheduled is not None:  # both as it ends, as vLLM observes them
            self._metrics.queue_time.observe(seq.request.scheduled - seq.request.arrival)
            self._metrics.compute_time.observe(time.perf_counter() - seq.request.scheduled)
        seq.finished = True
        self._unfinished.discard(seq)
        self._metrics.in_flight.set(len(self._unfinished))
        seq.request.on_finish(error)

    def _drop_cancelled(self) -> None:
        cancelled = [s for s in self._active if s.request.cancelled]
        if not cancelled:
            return
        gone = set(cancelled)
        self._active = [s for s in self._active if s not in gone]
        for seq in cancelled:
            heapq.heappush(self._free_slots, seq.slot)
            self._finish(seq, None)

    def _fail_all(self, exc: BaseException) -> None:
        self._launched.clear()
        for seq in list(self._unfinished):
            if seq in self._active:
                heapq.heappush(self._free_slots, seq.slot)
            self._finish(seq, exc)
        self._active = []
        with self._cond:
            waiting = list(self._waiting)
            self._waiting.clear()
            self._metrics.queue_depth.set(0)
        for request in waiting:
            request.on_finish(exc)
