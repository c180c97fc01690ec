"""The ``llm`` server: OpenAI completions and chat completions over :class:`LlmEngine`.

Routes tokenize the prompt (one token per word), hand the request to the engine
thread, and relay generated tokens back to the event loop through a :class:`LoopRelay`
(one loop wake-up per decode step, not per token), so each streamed token is written as
soon as its step is delivered.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import AsyncGenerator

from aiohttp import web

from . import api_text
from .app import ApiError, LoopRelay, ServerState, create_app, read_json_object, serve
from .llm_engine import GenerationRequest, LlmEngine
from .llm_model import DecoderLM
from .metrics import ServerMetrics
from .presets import LLM_PRESETS, LlmConfig
from .tokenizer import WordTokenizer
from .torch_common import build_model, configure_torch, resolve_device, resolve_dtype

_FINISHED = object()  # queue sentinel: the engine finished this request


class LlmRoutes:
    """HTTP handlers for the generation endpoints."""

    def __init__(self, state: ServerState, engine: LlmEngine, tokenizer: WordTokenizer) -> None:
        self.state = state
        self.engine = engine
        self.tokenizer = tokenizer
        self._relay: LoopRelay | None = None

    async def completions(self, request: web.Request) -> web.StreamResponse:
        """POST /v1/completions."""
        body = await read_json_object(request)
        self.state.check_model(body)
        return await self._serve(request, api_text.parse_completion(body))

    async def chat(self, request: web.Request) -> web.StreamResponse:
        """POST /v1/chat/completions."""
        body = await read_json_object(request)
        self.state.check_model(body)
        return await self._serve(request, api_text.parse_chat(body))

    async def _serve(self, request: web.Request, req: api_text.TextRequest) -> web.StreamResponse:
        if not self.state.ready:
            raise ApiError("model is still loading", status=503, err_type="server_error", code="not_ready")
        prompt_ids = self.tokenizer.encode(req.prompt)
        limit = self.engine.max_model_len
        if len(prompt_ids) + req.max_tokens > limit:
            raise ApiError(
                f"This model's maximum context length is {limit} tokens. However, you requested "
                f"{len(prompt_ids) + req.max_tokens} tokens ({len(prompt_ids)} in the prompt, "
                f"{req.max_tokens} for the completion).",
                param="max_tokens",
                code="context_length_exceeded",
            )
        pieces = self._generate(prompt_ids, req.max_tokens)
        return await api_text.respond(request, req, self.state.model_name, len(prompt_ids), pieces)

    async def _generate(self, prompt_ids: list[int], max_tokens: int) -> AsyncGenerator[str, None]:
        """Submit to the engine and yield one detokenized piece per generated token."""
        loop = asyncio.get_running_loop()
        if self._relay is None or self._relay.loop is not loop:
            self._relay = LoopRelay(loop)
        relay = self._relay
        queue: asyncio.Queue[object] = asyncio.Queue()

        def put(item: object) -> None:  # called on the engine thread
            relay.call(queue.put_nowait, item)

        gen = GenerationRequest(
            prompt_ids, max_tokens, on_token=put, on_finish=lambda exc: put(_FINISHED if exc is None else exc)
        )
        try:
            self.engine.submit(gen)
        except RuntimeError as exc:
            raise ApiError(str(exc), status=503, err_type="server_error") from None
        try:
            first = True
            while True:
                item = await queue.get()
                if item is _FINISHED:
                    return
                if isinstance(item, BaseException):
                    raise ApiError(f"generation failed: {item!r}", status=500, err_type="server_error")
                assert isinstance(item, int)
                yield self.tokenizer.decode_token(item, first)
                first = False
        finally:
            # Client gone or error: let the engine free the slot (no-op once finished).
            gen.cancelled = True


def _config(args: argparse.Namespace) -> LlmConfig:
    return LLM_PRESETS[args.size]


def run(args: argparse.Namespace) -> int:
    """Entry point for ``python -m bench_plugin.servers llm``."""
    device = resolve_device(args.device)
    configure_torch(args.threads, device, args.memory_limit_mib, args.stream_priority)
    dtype = resolve_dtype(args.dtype, device)
    cfg = _config(args)
    max_model_len = args.max_model_len or cfg.default_max_model_len
    metrics = ServerMetrics()
    state = ServerState("llm", args.model_name, str(device), metrics)
    engine = LlmEngine(
        lambda: build_model(lambda: DecoderLM(cfg), device, dtype, args.seed),
        max_batch_size=args.max_batch_size,
        max_model_len=max_model_len,
        metrics=metrics,
        cuda_graphs=args.cuda_graphs,
    )
    routes = LlmRoutes(state, engine, WordTokenizer(cfg.vocab_size))
    app = create_app(state)
    app.router.add_post("/v1/completions", routes.completions)
    app.router.add_post("/v1/chat/completions", routes.chat)
    return serve(app, state, engine, args.host, args.port)
