"""Whisper-style encoder-decoder speech recogniser, and its reference greedy decoder.

Encoder: two 1-D convolutions (the second with stride 2) over log-mel frames, sinusoidal
positions, pre-norm transformer blocks. Decoder: learned positions, blocks with causal
self-attention over a KV cache, cross-attention over the encoder output, and an output
projection tied to the token embedding. Projections that read the same input are fused
(self-attention Q/K/V, cross-attention K/V): one GEMM instead of three or two. Whisper's
key projection has no bias; here the fused bias's key part is a parameter initialised to
zero like every bias, so the arithmetic is the same. Batches are right-padded; padded
frames are masked in the encoder and in cross-attention so a request's result does not
depend on its batch mates. :mod:`.asr_decode` holds the fast batched decoder the server
uses; :func:`greedy_decode` here is the plain reference it is tested against.
"""

from __future__ import annotations

import math
from typing import cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .presets import SOT_SEQUENCE, AsrConfig


def sinusoids(length: int, channels: int) -> Tensor:
    """Whisper's fixed sinusoidal position table ``[length, channels]``."""
    inc = math.log(10000) / (channels // 2 - 1)
    inv = torch.exp(-inc * torch.arange(channels // 2, dtype=torch.float32))
    angles = torch.arange(length, dtype=torch.float32).view(-1, 1) * inv.view(1, -1)
    return torch.cat([angles.sin(), angles.cos()], dim=1)


def _mlp(d_model: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))


def additive_mask(valid: Tensor, dtype: torch.dtype) -> Tensor:
    """``[B, 1, 1, S]`` additive mask (0 where ``valid`` [B, S], -inf elsewhere), built once per batch."""
    mask = torch.zeros((valid.shape[0], 1, 1, valid.shape[1]), device=valid.device, dtype=dtype)
    return mask.masked_fill_(~valid.view(valid.shape[0], 1, 1, -1), float("-inf"))


class SelfAttention(nn.Module):
    """Multi-head self-attention with one fused Q/K/V projection."""

    def __init__(self, d_model: int, n_heads: int) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)

    def project(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Queries, keys and values of ``x`` [B, T, D], each [B, H, T, hd]."""
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.n_heads, d // self.n_heads).permute(2, 0, 3, 1, 4)
        return q, k, v

    def merge(self, attn: Tensor) -> Tensor:
        """Output projection of attention results [B, H, T, hd] -> [B, T, D]."""
        return self.out(attn.transpose(1, 2).flatten(2))


class CrossAttention(nn.Module):
    """Multi-head attention from the text onto the audio, keys and values projected together."""

    def __init__(self, d_model: int, n_heads: int) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.query = nn.Linear(d_model, d_model)
        self.kv = nn.Linear(d_model, 2 * d_model)
        self.out = nn.Linear(d_model, d_model)

    def project_kv(self, audio: Tensor) -> tuple[Tensor, Tensor]:
        """Keys and values of the encoder output [B, S, D], each [B, H, S, hd]."""
        b, s, d = audio.shape
        k, v = self.kv(audio).view(b, s, 2, self.n_heads, d // self.n_heads).permute(2, 0, 3, 1, 4)
        return k, v

    def attend(self, x: Tensor, k: Tensor, v: Tensor, mask: Tensor) -> Tensor:
        """Queries from ``x`` [B, T, D] over the audio keys/values; returns [B, T, D]."""
        b, t, d = x.shape
        q = self.query(x).view(b, t, self.n_heads, d // self.n_heads).transpose(1, 2)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.out(out.transpose(1, 2).flatten(2))


class EncoderBlock(nn.Module):
    """Pre-norm self-attention + GELU MLP."""

    def __init__(self, cfg: AsrConfig) -> None:
        super().__init__()
        self.attn_ln = nn.LayerNorm(cfg.d_model, eps=cfg.norm_eps)
        self.attn = SelfAttention(cfg.d_model, cfg.n_heads)
        self.mlp_ln = nn.LayerNorm(cfg.d_model, eps=cfg.norm_eps)
        self.mlp = _mlp(cfg.d_model)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        """x: [B, S, D]; mask: additive [B, 1, 1, S]."""
        q, k, v = self.attn.project(self.attn_ln(x))
        x = x + self.attn.merge(F.scaled_dot_product_attention(q, k, v, attn_mask=mask))
        return x + self.mlp(self.mlp_ln(x))


class AudioEncoder(nn.Module):
    """Log-mel frames -> encoder states at half the frame rate."""

    positions: Tensor

    def __init__(self, cfg: AsrConfig) -> None:
        super().__init__()
        self.conv1 = nn.Conv1d(cfg.n_mels, cfg.d_model, kernel_size=3, padding=1)
        self.conv2 = nn.Conv1d(cfg.d_model, cfg.d_model, kernel_size=3, stride=2, padding=1)
        self.register_buffer("positions", sinusoids(cfg.n_audio_ctx, cfg.d_model), persistent=False)
        self.blocks = nn.ModuleList(EncoderBlock(cfg) for _ in range(cfg.n_encoder_layers))
        self.ln_post = nn.LayerNorm(cfg.d_model, eps=cfg.norm_eps)

    def forward(self, mel: Tensor, frames: Tensor) -> tuple[Tensor, Tensor]:
        """mel: [B, n_mels, F] right-padded; frames: [B] real lengths. Returns (states, valid)."""
        frame_valid = torch.arange(mel.shape[-1], device=mel.device).view(1, -1) < frames.view(-1, 1)
        # Zero padded frames after conv1 so they cannot leak into conv2's last real output.
        x = F.gelu(self.conv1(mel)) * frame_valid.unsqueeze(1).to(mel.dtype)
        x = F.gelu(self.conv2(x)).transpose(1, 2)
        length = x.shape[1]
        valid = torch.arange(length, device=mel.device).view(1, -1) < ((frames + 1) // 2).view(-1, 1)
        x = x + self.positions[:length].to(x.dtype)
        mask = additive_mask(valid, x.dtype)
        for block in self.blocks:
            x = block(x, mask)
        return self.ln_post(x), valid


class DecoderBlock(nn.Module):
    """Pre-norm causal self-attention, cross-attention, GELU MLP."""

    def __init__(self, cfg: AsrConfig) -> None:
        super().__init__()
        self.attn_ln = nn.LayerNorm(cfg.d_model, eps=cfg.norm_eps)
        self.attn = SelfAttention(cfg.d_model, cfg.n_heads)
        self.cross_ln = nn.LayerNorm(cfg.d_model, eps=cfg.norm_eps)
        self.cross = CrossAttention(cfg.d_model, cfg.n_heads)
        self.mlp_ln = nn.LayerNorm(cfg.d_model, eps=cfg.norm_eps)
        self.mlp = _mlp(cfg.d_model)

    def forward(
        self,
        x: Tensor,
        offset: int,
        cache: tuple[Tensor, Tensor],
        cross_kv: tuple[Tensor, Tensor],
        self_mask: Tensor,
        cross_mask: Tensor,
    ) -> Tensor:
        """x: [B, T, D] at positions offset..offset+T-1; cache: [B, H, n_ctx, hd] each."""
        t = x.shape[1]
        q, k, v = self.attn.project(self.attn_ln(x))
        cache[0][:, :, offset : offset + t] = k
        cache[1][:, :, offset : offset + t] = v
        keys, values = cache[0][:, :, : offset + t], cache[1][:, :, : offset + t]
        x = x + self.attn.merge(F.scaled_dot_product_attention(q, keys, values, attn_mask=self_mask))
        x = x + self.cross.attend(self.cross_ln(x), *cross_kv, cross_mask)
        return x + self.mlp(self.mlp_ln(x))


class TextDecoder(nn.Module):
    """Autoregressive text decoder with cross-attention to the audio."""

    def __init__(self, cfg: AsrConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.tok_embed = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.pos_embed = nn.Parameter(torch.empty(cfg.n_text_ctx, cfg.d_model))
        self.blocks = nn.ModuleList(DecoderBlock(cfg) for _ in range(cfg.n_decoder_layers))
        self.ln = nn.LayerNorm(cfg.d_model, eps=cfg.norm_eps)

    def new_cache(self, batch: int) -> list[tuple[Tensor, Tensor]]:
        """Zeroed self-attention KV cache for ``batch`` sequences of up to n_text_ctx tokens."""
        cfg, w = self.cfg, self.tok_embed.weight
        shape = (batch, cfg.n_heads, cfg.n_text_ctx, cfg.d_model // cfg.n_heads)
        return [
            (torch.zeros(shape, device=w.device, dtype=w.dtype), torch.zeros(shape, device=w.device, dtype=w.dtype))
            for _ in self.blocks
        ]

    def cross_kv(self, audio: Tensor) -> list[tuple[Tensor, Tensor]]:
        """Per-layer cross-attention keys/values, computed once per batch."""
        return [cast(DecoderBlock, block).cross.project_kv(audio) for block in self.blocks]

    def logits(self, x: Tensor) -> Tensor:
        """Output projection tied to the token embedding, in the model's dtype."""
        return self.ln(x) @ self.tok_embed.weight.T

    def forward(
        self,
        tokens: Tensor,
        offset: int,
        cache: list[tuple[Tensor, Tensor]],
        cross_kv: list[tuple[Tensor, Tensor]],
        cross_mask: Tensor,
    ) -> Tensor:
        """Logits [B, T, vocab] (float32) for ``tokens`` [B, T] at positions offset.."""
        t = tokens.shape[1]
        x = self.tok_embed(tokens) + self.pos_embed[offset : offset + t]
        query_pos = torch.arange(offset, offset + t, device=tokens.device).view(-1, 1)
        self_mask = torch.arange(offset + t, device=tokens.device).view(1, -1) <= query_pos
        for block, layer_cache, layer_cross in zip(self.blocks, cache, cross_kv, strict=True):
            x = block(x, offset, layer_cache, layer_cross, self_mask, cross_mask)
        return self.logits(x).float()


class SpeechRecognizer(nn.Module):
    """Encoder + decoder, as one module so it is built and seeded in one go."""

    def __init__(self, cfg: AsrConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.encoder = AudioEncoder(cfg)
        self.decoder = TextDecoder(cfg)


def greedy_decode(model: SpeechRecognizer, mel: Tensor, frames: Tensor, n_tokens: list[int]) -> list[list[int]]:
    """Decode exactly ``n_tokens[i]`` tokens for item i of a padded mel batch (the reference).

    The batch runs ``max(n_tokens)`` steps together (shorter items ride along and are
    trimmed): the work is a fixed function of the audio lengths, identical every run.
    """
    audio, valid = model.encoder(mel, frames)
    cross_mask = additive_mask(valid, audio.dtype)
    decoder = model.decoder
    cross = decoder.cross_kv(audio)
    cache = decoder.new_cache(len(n_tokens))
    prompt = torch.tensor([SOT_SEQUENCE] * len(n_tokens), device=mel.device)
    next_token = decoder(prompt, 0, cache, cross, cross_mask)[:, -1].argmax(dim=-1)
    out = [next_token]
    for step in range(1, max(n_tokens)):
        logits = decoder(next_token.view(-1, 1), len(SOT_SEQUENCE) + step - 1, cache, cross, cross_mask)
        next_token = logits[:, -1].argmax(dim=-1)
        out.append(next_token)
    rows: list[list[int]] = torch.stack(out, dim=1).tolist()
    return [row[:n] for row, n in zip(rows, n_tokens, strict=True)]


def asr_flops(cfg: AsrConfig, frames: list[int], n_tokens: list[int]) -> float:
    """Useful FLOPs to transcribe clips of these mel frame counts into these token counts (no padding)."""
    d = cfg.d_model
    total = 0.0
    for f, n in zip(frames, n_tokens, strict=True):
        s = (f + 1) // 2
        total += 2 * f * cfg.n_mels * d * 3 + 2 * s * d * d * 3  # the two convolutions
        total += cfg.n_encoder_layers * (2 * s * 12 * d * d + 4 * s * s * d)
        steps = n + len(SOT_SEQUENCE) - 1
        total += cfg.n_decoder_layers * 2 * s * 2 * d * d  # cross keys/values, once per clip
        per_step = cfg.n_decoder_layers * (2 * 14 * d * d + 4 * s * d) + 2 * d * cfg.vocab_size
        total += steps * per_step + cfg.n_decoder_layers * 2 * d * steps * steps  # + self-attention
    return total
