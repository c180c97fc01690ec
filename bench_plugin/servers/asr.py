"""The ``asr`` server: OpenAI ``/v1/audio/transcriptions`` over a Whisper-style model.

Each request is one batcher item (16 kHz samples plus its fixed token count); the
worker computes log-mels, encodes the whole batch at once and greedy-decodes it with an
:class:`~.asr_decode.AsrRunner` (decoder steps replayed from CUDA graphs on CUDA).
Audio longer than 30 s is rejected with a 400 (Whisper's window).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from aiohttp import web

from . import api_audio
from .api_audio import max_decode_tokens, tokens_for_duration
from .app import ApiError, ServerState, create_app, serve
from .asr_decode import AsrRunner
from .asr_model import SpeechRecognizer
from .batching import DynamicBatcher
from .mel import LogMel
from .metrics import RequestTimer, ServerMetrics
from .presets import ASR_PRESETS, AsrConfig
from .tokenizer import WordTokenizer
from .torch_common import build_model, configure_torch, resolve_device, resolve_dtype


@dataclass(frozen=True)
class AsrItem:
    """One request's work: mono 16 kHz samples and how many tokens to decode."""

    samples: np.ndarray
    n_tokens: int


AsrBatcher = DynamicBatcher[AsrItem, list[int]]


def make_setup(
    cfg: AsrConfig, device: torch.device, dtype: torch.dtype, args: argparse.Namespace, metrics: ServerMetrics
) -> Callable[[], Callable[[list[AsrItem]], list[list[int]]]]:
    """Returns the worker-side setup: build + warm the model, give back the batch function.

    ``args``: the server's flags (seed, max batch size, tokens per second, CUDA graphs).
    """

    def setup() -> Callable[[list[AsrItem]], list[list[int]]]:
        model = build_model(lambda: SpeechRecognizer(cfg), device, dtype, args.seed)
        log_mel = LogMel(cfg.n_mels, device)
        graphs = device.type == "cuda" if args.cuda_graphs is None else bool(args.cuda_graphs)
        runner = AsrRunner(model, args.max_batch_size, max_decode_tokens(args.tokens_per_second), graphs)
        with torch.inference_mode():
            runner.capture()

        @torch.inference_mode()
        def transcribe(batch: list[AsrItem]) -> list[list[int]]:
            mels = [log_mel(torch.from_numpy(item.samples).to(device)) for item in batch]
            frames = torch.tensor([m.shape[-1] for m in mels], device=device)
            width = max(m.shape[-1] for m in mels)
            padded = torch.stack([torch.nn.functional.pad(m, (0, width - m.shape[-1])) for m in mels])
            return runner.transcribe(padded.to(dtype), frames, [item.n_tokens for item in batch])

        def counted(batch: list[AsrItem]) -> list[list[int]]:
            result = transcribe(batch)
            metrics.generated_tokens.inc(sum(item.n_tokens for item in batch))
            return result

        # Warm: one short clip, then a batch of two different lengths.
        silence = np.zeros(16000, dtype=np.float32)
        transcribe([AsrItem(silence, 3)])
        transcribe([AsrItem(silence, 2), AsrItem(silence[:8000], 1)])
        print(f"bench-server asr decode: cuda graphs {'on' if graphs else 'off'}, {runner.graph_count} captured "
              f"in {runner.capture_s:.1f} s (batches {runner.batches}, audio {runner.audio})", flush=True)
        return counted

    return setup


class AsrRoutes:
    """HTTP handler for /v1/audio/transcriptions."""

    def __init__(self, state: ServerState, batcher: AsrBatcher, cfg: AsrConfig, tokens_per_second: int) -> None:
        self.state = state
        self.batcher = batcher
        self.tokenizer = WordTokenizer(cfg.vocab_size)
        self.tokens_per_second = tokens_per_second

    async def transcriptions(self, request: web.Request) -> web.Response:
        """POST /v1/audio/transcriptions."""
        req = await api_audio.parse_form(await api_audio.read_form(request), self.state)
        if not self.state.ready:
            raise ApiError("model is still loading", status=503, err_type="server_error", code="not_ready")
        n_tokens = tokens_for_duration(req.audio.duration_s, self.tokens_per_second)
        timer = RequestTimer()
        try:
            future = self.batcher.submit(AsrItem(req.audio.samples, n_tokens), timer)
        except RuntimeError as exc:
            raise ApiError(str(exc), status=503, err_type="server_error") from None
        try:
            token_ids = await future
        except Exception as exc:
            raise ApiError(f"transcription failed: {exc!r}", status=500, err_type="server_error") from None
        response = api_audio.transcription_response(req, self.tokenizer.decode(token_ids))
        response.headers.update(timer.done(self.state.metrics))
        return response


def run(args: argparse.Namespace) -> int:
    """Entry point for ``python -m bench_plugin.servers asr``."""
    device = resolve_device(args.device)
    configure_torch(args.threads, device, args.memory_limit_mib, args.stream_priority)
    dtype = resolve_dtype(args.dtype, device)
    cfg = ASR_PRESETS[args.size]
    metrics = ServerMetrics()
    state = ServerState("asr", args.model_name, str(device), metrics)
    batcher: AsrBatcher = DynamicBatcher(
        "asr-worker",
        make_setup(cfg, device, dtype, args, metrics),
        max_batch_size=args.max_batch_size,
        max_wait_s=args.max_wait_ms / 1000.0,
        metrics=metrics,
    )
    app = create_app(state)
    routes = AsrRoutes(state, batcher, cfg, args.tokens_per_second)
    app.router.add_post("/v1/audio/transcriptions", routes.transcriptions)
    return serve(app, state, batcher, args.host, args.port)
