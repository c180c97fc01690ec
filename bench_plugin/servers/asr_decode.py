"""Batched greedy decoding for the ASR model on static buffers, replayed from CUDA graphs.

A Whisper-large decoder step is ~650 small kernels (32 layers of self-attention,
cross-attention and MLP for one token): launched from Python that is ~8 ms a step while
the GPU needs well under 1 ms, so a batch of 30-token transcripts spent most of its time
launching. Here each decoder step is one function of static buffers, captured once per
(batch bucket, audio bucket) into a CUDA graph at warm-up:

- the batch is padded to a bucket (1, 2, 4, ... up to ``--max-batch-size``), the encoder
  output (the cross-attention keys) to an audio bucket of :data:`AUDIO_ALIGN` positions;
  padded rows and positions are masked (padded rows attend to one stale, finite position);
- the token, position and output history live on the device and each step updates them
  itself (greedy token -> next input, position + 1), so a whole transcript is a run of
  graph replays with a single copy to the host at the end;
- the 4-token start-of-transcript prompt is fed one token a step (the input token is
  overwritten before each of the first steps), so one graph serves prompt and generation.

The encoder (one pass over variable-length audio, compute-bound) stays eager. Without CUDA
the same step function runs eagerly on the same buffers, which is what the CPU tests check
against :func:`~.asr_model.greedy_decode`.
"""

from __future__ import annotations

import time
from functools import partial

import torch
import torch.nn.functional as F
from torch import Tensor

from .asr_model import DecoderBlock, SpeechRecognizer
from .llm_decode import batch_buckets, bucket_for
from .presets import SOT_SEQUENCE
from .torch_common import capture_cuda_graph

AUDIO_ALIGN = 256  # cross-attention length buckets: multiples of this many encoder positions
_POSITION_ALIGN = 16


def audio_buckets(n_audio_ctx: int) -> list[int]:
    """Multiples of AUDIO_ALIGN up to the context, the last one rounded up to a multiple of 16."""
    top = -(-n_audio_ctx // _POSITION_ALIGN) * _POSITION_ALIGN
    return [*range(AUDIO_ALIGN, top, AUDIO_ALIGN), top]


class AsrRunner:
    """Encodes and greedy-decodes batches of mel spectrograms for one model."""

    def __init__(self, model: SpeechRecognizer, max_batch: int, max_positions: int, use_graphs: bool) -> None:
        """``max_positions``: decoder positions a transcript may use, prompt included."""
        cfg = model.cfg
        weight = model.decoder.tok_embed.weight
        if use_graphs and weight.device.type != "cuda":
            raise ValueError("CUDA graphs need a CUDA device")
        self.model, self.device, self.use_graphs = model, weight.device, use_graphs
        self.batches = batch_buckets(max_batch)
        self.audio = audio_buckets(cfg.n_audio_ctx)
        self.positions = -(-max_positions // _POSITION_ALIGN) * _POSITION_ALIGN
        hd = cfg.d_model // cfg.n_heads
        layers = cfg.n_decoder_layers

        def zeros(*shape: int) -> Tensor:
            return torch.zeros(shape, device=self.device, dtype=weight.dtype)

        self_shape = (max_batch, cfg.n_heads, self.positions, hd)
        cross_shape = (max_batch, cfg.n_heads, self.audio[-1], hd)
        self.self_kv = [(zeros(*self_shape), zeros(*self_shape)) for _ in range(layers)]
        # Zero-filled, then only ever written with finite keys/values: masked stale entries stay finite.
        self.cross_kv = [(zeros(*cross_shape), zeros(*cross_shape)) for _ in range(layers)]
        self.cross_mask = zeros(max_batch, 1, 1, self.audio[-1])
        self.token = torch.zeros(max_batch, dtype=torch.long, device=self.device)
        self.position = torch.zeros(1, dtype=torch.long, device=self.device)
        self.history = torch.zeros(max_batch, self.positions, dtype=torch.long, device=self.device)
        self._graphs: dict[tuple[int, int], torch.cuda.CUDAGraph] = {}
        self.capture_s = 0.0

    @property
    def graph_count(self) -> int:
        """How many step shapes were captured."""
        return len(self._graphs)

    def _block(self, i: int, block: DecoderBlock, x: Tensor, self_mask: Tensor, batch: int, audio: int) -> Tensor:
        keys, values = self.self_kv[i][0][:batch], self.self_kv[i][1][:batch]
        q, k, v = block.attn.project(block.attn_ln(x))
        keys.index_copy_(2, self.position, k)
        values.index_copy_(2, self.position, v)
        x = x + block.attn.merge(F.scaled_dot_product_attention(q, keys, values, attn_mask=self_mask))
        cross_k, cross_v = self.cross_kv[i][0][:batch, :, :audio], self.cross_kv[i][1][:batch, :, :audio]
        x = x + block.cross.attend(block.cross_ln(x), cross_k, cross_v, self.cross_mask[:batch, :, :, :audio])
        return x + block.mlp(block.mlp_ln(x))

    def _step(self, batch: int, audio: int) -> None:
        """One decoder step for rows ``0..batch-1``: static shapes, no host synchronisation."""
        decoder = self.model.decoder
        x = decoder.tok_embed(self.token[:batch]) + decoder.pos_embed.index_select(0, self.position)
        x = x.unsqueeze(1)  # [B, 1, D]
        key_pos = torch.arange(self.positions, device=self.device)
        self_mask = torch.zeros((1, 1, 1, self.positions), device=self.device, dtype=x.dtype)
        self_mask.masked_fill_(key_pos.view(1, 1, 1, -1) > self.position, float("-inf"))
        for i, block in enumerate(decoder.blocks):
            assert isinstance(block, DecoderBlock)
            x = self._block(i, block, x, self_mask, batch, audio)
        next_token = decoder.logits(x[:, 0]).argmax(dim=-1)
        self.token[:batch].copy_(next_token)
        self.history[:batch].index_copy_(1, self.position, next_token.unsqueeze(1))
        self.position.add_(1)

    def capture(self) -> None:
        """Warm up and capture every (batch, audio) step shape; eager warm-up only without graphs."""
        if not self.use_graphs:
            self.position.zero_()
            self._step(self.batches[-1], self.audio[0])
            return
        start = time.perf_counter()
        pool = torch.cuda.graph_pool_handle()
        side = torch.cuda.Stream(self.device)
        for batch in reversed(self.batches):
            for audio in reversed(self.audio):
                self.position.zero_()
                self._graphs[(batch, audio)] = capture_cuda_graph(
                    partial(self._step, batch, audio), self.device, side, pool)
        torch.cuda.synchronize(self.device)
        self.capture_s = time.perf_counter() - start

    def _encode(self, mel: Tensor, frames: Tensor, batch: int) -> int:
        """Encode the audio into the cross-attention buffers; returns the audio bucket used."""
        audio, valid = self.model.encoder(mel, frames)
        n, length = valid.shape
        bucket = bucket_for(self.audio, length)
        for (cross_k, cross_v), block in zip(self.cross_kv, self.model.decoder.blocks, strict=True):
            assert isinstance(block, DecoderBlock)
            k, v = block.cross.project_kv(audio)
            cross_k[:n, :, :length].copy_(k)
            cross_v[:n, :, :length].copy_(v)
        lengths = torch.ones(batch, dtype=torch.long, device=self.device)  # padded rows: one stale position
        lengths[:n] = (frames + 1) // 2
        key_pos = torch.arange(bucket, device=self.device)
        mask = self.cross_mask[:batch, :, :, :bucket]
        mask.zero_()
        mask.masked_fill_(key_pos.view(1, 1, 1, -1) >= lengths.view(-1, 1, 1, 1), float("-inf"))
        return bucket

    def transcribe(self, mel: Tensor, frames: Tensor, n_tokens: list[int]) -> list[list[int]]:
        """Exactly ``n_tokens[i]`` greedy tokens for item i of a right-padded mel batch [B, n_mels, F]."""
        n = len(n_tokens)
        batch = bucket_for(self.batches, n)
        if max(n_tokens) + len(SOT_SEQUENCE) > self.positions:
            raise ValueError(f"{max(n_tokens)} tokens need more than the {self.positions} decoder positions")
        audio = self._encode(mel, frames, batch)
        self.position.zero_()
        graph = self._graphs.get((batch, audio))
        steps = len(SOT_SEQUENCE) - 1 + max(n_tokens)
        for step in range(steps):
            if step < len(SOT_SEQUENCE):
                self.token[:batch].fill_(SOT_SEQUENCE[step])
            if graph is not None:
                graph.replay()
            else:
                self._step(batch, audio)
        first = len(SOT_SEQUENCE) - 1  # the prediction made at the prompt's last token
        rows: list[list[int]] = self.history[:n, first : first + max(n_tokens)].tolist()
        return [row[:k] for row, k in zip(rows, n_tokens, strict=True)]
