"""The ``embedding`` server: OpenAI ``/v1/embeddings`` over a dynamically batched encoder.

Each input of a request is one batcher item (so ``bench_server_queue_depth`` and the
batch-size histogram count inputs, which equals requests for single-input calls); a
batch closes at ``--max-batch-size`` inputs or ``--max-batch-tokens`` tokens. Float
vectors are formatted as fixed-width decimals, not by json: on CUDA by the GPU with each batch
(:mod:`.embedding_text`), which then launches the next batch while the host hands this one back
(``--no-pipelining`` turns that off); on CPU by numpy (:func:`~.api_embeddings.format_floats`).
Inputs longer than the model's maximum length are truncated to it; the response then
carries ``X-Truncated-Inputs: <count>`` and usage counts the tokens actually embedded.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

import numpy as np
import torch
from aiohttp import web

from . import api_embeddings
from .app import ApiError, ServerState, create_app, read_json_object, serve
from .batching import BatchFn, DynamicBatcher, Pipelined
from .embedding_model import TextEncoder, pack_batch
from .embedding_text import float_text
from .metrics import RequestTimer, ServerMetrics
from .presets import EMBEDDING_PRESETS, EncoderConfig
from .tokenizer import WordTokenizer
from .torch_common import build_model, configure_torch, resolve_device, resolve_dtype

Embedded = tuple[np.ndarray, bytes | None]
"""One input's unit vector and, where the GPU formatted it, its JSON text (:mod:`.embedding_text`)."""
TokenBatcher = DynamicBatcher[list[int], Embedded]


@dataclass(frozen=True)
class Launched:
    """A launched batch: its vectors and text in pinned host buffers and the event of their copies
    (CUDA), or its vectors already computed (CPU: ``done`` None, no text)."""

    vectors: torch.Tensor
    text: torch.Tensor | None
    done: torch.cuda.Event | None


BatchWork = BatchFn[list[int], Embedded] | Pipelined[list[int], Embedded, Launched]


def make_setup(
    cfg: EncoderConfig, device: torch.device, dtype: torch.dtype, seed: int, max_batch: int, max_tokens: int,
    pipelining: bool = True,
) -> Callable[[], BatchWork]:
    """Returns the worker-side setup: build + warm the encoder, give back the batch function (on CUDA a
    launch/finish pair, so the GPU encodes the next batch while the host hands this one back)."""

    def setup() -> BatchWork:
        model = build_model(lambda: TextEncoder(cfg), device, dtype, seed)

        @torch.inference_mode()
        def launch(batch: list[list[int]]) -> Launched:
            vectors = model.embed(pack_batch(batch, device))
            if device.type != "cuda":
                return Launched(vectors, None, None)
            host = torch.empty(vectors.shape, dtype=vectors.dtype, pin_memory=True)
            host.copy_(vectors, non_blocking=True)  # queued behind the batch's kernels
            text = float_text(vectors)
            host_text = torch.empty(text.shape, dtype=text.dtype, pin_memory=True)
            host_text.copy_(text, non_blocking=True)
            done = torch.cuda.Event()
            done.record()
            return Launched(host, host_text, done)

        def finish(launched: Launched) -> list[Embedded]:
            if launched.done is not None:
                launched.done.synchronize()  # releases the GIL while the GPU works
            vectors = launched.vectors.numpy()
            if launched.text is None:
                return [(v, None) for v in vectors]
            return [(v, t.tobytes()) for v, t in zip(vectors, launched.text.numpy(), strict=True)]

        def embed(batch: list[list[int]]) -> list[Embedded]:
            return finish(launch(batch))

        print(f"bench-server embedding attention: {choose_attention(model, embed)}", flush=True)
        # Warm: a single short input, a full batch of long ones, and one of mixed lengths.
        full = max(1, min(max_batch, max_tokens // cfg.max_len))
        embed([[10, 11, 12]])
        embed([[10] * cfg.max_len] * full)
        embed([[10] * (1 + i * (cfg.max_len - 1) // max(1, full - 1)) for i in range(full)])
        return Pipelined(launch, finish) if pipelining and device.type == "cuda" else embed

    return setup


def choose_attention(model: TextEncoder, embed: Callable[[list[list[int]]], list[Embedded]]) -> str:
    """Use packed flash attention if this torch and device have it and it agrees with the padded path.

    Returns a line for the log saying which path serves and, on a fallback, why.
    """
    if not model.use_varlen(True):
        return "padded (no variable-length flash attention on this device or torch)"
    longest = model.pos_embed.num_embeddings  # the model's max_len: a longer probe indexes past its positions
    probe = [list(range(10, 10 + min(n, longest))) for n in (5, 77, 200)]
    try:
        fast = np.stack([vector for vector, _ in embed(probe)])
    except Exception as exc:  # an unsupported layout or dtype in this torch's kernel: use the other path
        model.use_varlen(False)
        return f"padded (varlen flash failed: {exc!r})"
    model.use_varlen(False)
    reference = np.stack([vector for vector, _ in embed(probe)])
    agreement = float(np.min(np.sum(fast * reference, axis=1)))  # cosine: both unit-norm
    if agreement < 0.999:
        return f"padded (varlen flash disagreed with the padded path: cosine {agreement:.4f})"
    model.use_varlen(True)
    return f"varlen flash (cosine {agreement:.5f} against the padded path)"


class EmbeddingRoutes:
    """HTTP handler for /v1/embeddings."""

    def __init__(self, state: ServerState, batcher: TokenBatcher, cfg: EncoderConfig) -> None:
        self.state = state
        self.batcher = batcher
        self.cfg = cfg
        self.tokenizer = WordTokenizer(cfg.vocab_size)

    async def embeddings(self, request: web.Request) -> web.Response:
        """POST /v1/embeddings."""
        body = await read_json_object(request)
        self.state.check_model(body)
        req = api_embeddings.parse_embeddings(body, self.cfg.vocab_size)
        api_embeddings.check_dimensions(req, self.cfg.d_model)
        if not self.state.ready:
            raise ApiError("model is still loading", status=503, err_type="server_error", code="not_ready")
        token_lists = [self.tokenizer.encode(x) if isinstance(x, str) else x for x in req.inputs]
        truncated = sum(len(t) > self.cfg.max_len for t in token_lists)
        token_lists = [t[: self.cfg.max_len] for t in token_lists]
        timer = RequestTimer()
        try:
            futures = [self.batcher.submit(t, timer) for t in token_lists]
        except RuntimeError as exc:
            raise ApiError(str(exc), status=503, err_type="server_error") from None
        try:
            embedded = await asyncio.gather(*futures)
        except Exception as exc:
            for f in futures:
                f.cancel()
            raise ApiError(f"embedding failed: {exc!r}", status=500, err_type="server_error") from None
        n_tokens = sum(len(t) for t in token_lists)
        texts = [text for _, text in embedded]
        payload = api_embeddings.embeddings_body(req, [vector for vector, _ in embedded], self.state.model_name,
                                                 n_tokens, None if None in texts else cast(list[bytes], texts))
        headers = timer.done(self.state.metrics)
        if truncated:
            headers["X-Truncated-Inputs"] = str(truncated)
        return web.Response(body=payload, content_type="application/json", headers=headers)


def run(args: argparse.Namespace) -> int:
    """Entry point for ``python -m bench_plugin.servers embedding``."""
    device = resolve_device(args.device)
    configure_torch(args.threads, device, args.memory_limit_mib, args.stream_priority)
    dtype = resolve_dtype(args.dtype, device)
    cfg = EMBEDDING_PRESETS[args.size]
    metrics = ServerMetrics()
    state = ServerState("embedding", args.model_name, str(device), metrics)
    batcher: TokenBatcher = DynamicBatcher(
        "embedding-worker",
        make_setup(cfg, device, dtype, args.seed, args.max_batch_size, args.max_batch_tokens, not args.no_pipelining),
        max_batch_size=args.max_batch_size,
        max_wait_s=args.max_wait_ms / 1000.0,
        metrics=metrics,
        cost=len,
        max_cost=args.max_batch_tokens,
    )
    app = create_app(state)
    app.router.add_post("/v1/embeddings", EmbeddingRoutes(state, batcher, cfg).embeddings)
    return serve(app, state, batcher, args.host, args.port)
