"""BERT-style bidirectional encoder producing mean-pooled, L2-normalised embeddings.

Learned token and position embeddings, post-LayerNorm blocks with GELU MLPs (the BERT
layout), in plain PyTorch. A batch runs *packed*: every per-token operation (the
projections, MLP, norms: ~95% of the FLOPs) sees only the real tokens of all inputs,
concatenated, so inputs of mixed lengths waste nothing on padding. Attention is the one
step that needs sequence boundaries; it runs one of two ways:

- ``varlen`` (CUDA): flash attention over the packed tokens with per-input offsets
  (``torch.nn.attention.varlen``), no padding at all;
- ``padded`` (everywhere): each layer scatters the packed Q/K/V into a zeroed
  ``[inputs, width]`` layout, attends with padded keys masked out, and gathers the real
  rows back. On an H200 that scatter/gather and the masked kernel were ~40% of a BERT-large
  batch's GPU time, hence the varlen path wherever it works (:meth:`TextEncoder.use_varlen`).

Either way an input's vector does not depend on what it was batched with (up to float
rounding). The MLP's bias and GELU run in the up-projection's GEMM epilogue
(``torch._addmm_activation``; cuBLAS's GELU is the tanh approximation, CPU's the exact one).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .presets import EncoderConfig

WIDTH_ALIGN = 16  # padded attention width: a multiple of this keeps the mask kernel-aligned


@dataclass(frozen=True)
class PackedBatch:
    """Token lists flattened for :meth:`TextEncoder.embed`; every tensor is on the model's device."""

    tokens: Tensor  # [N] all real tokens, input after input
    positions: Tensor  # [N] position of each token in its input
    pad_index: Tensor  # [N] row of each token in the padded [inputs * width] layout
    seq_index: Tensor  # [N] input each token belongs to
    lengths: Tensor  # [inputs]
    cu_seqlens: Tensor  # [inputs + 1] int32 offset of each input in the packed tokens
    width: int  # padded attention width
    longest: int  # tokens in the longest input

    @property
    def size(self) -> int:
        """Number of inputs."""
        return int(self.lengths.shape[0])


def pack_batch(token_lists: list[list[int]], device: torch.device) -> PackedBatch:
    """Flatten token lists (built with numpy on the host, then one copy to ``device``)."""
    lengths = np.array([len(t) for t in token_lists], dtype=np.int64)
    width = -(-int(lengths.max()) // WIDTH_ALIGN) * WIDTH_ALIGN
    starts = np.repeat(np.cumsum(lengths) - lengths, lengths)
    positions = np.arange(int(lengths.sum()), dtype=np.int64) - starts
    seq_index = np.repeat(np.arange(len(token_lists), dtype=np.int64), lengths)
    tokens = np.fromiter((t for seq in token_lists for t in seq), dtype=np.int64, count=int(lengths.sum()))
    packed = torch.from_numpy(np.stack([tokens, positions, seq_index * width + positions, seq_index]))
    packed = packed.to(device, non_blocking=True)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    return PackedBatch(packed[0], packed[1], packed[2], packed[3], torch.from_numpy(lengths).to(device),
                       torch.from_numpy(offsets).to(device), width, int(lengths.max()))


VarlenFn = Callable[..., Tensor]


def _varlen_attention() -> VarlenFn | None:
    """torch's variable-length flash attention, where this torch has it."""
    try:
        from torch.nn.attention.varlen import varlen_attn
    except ImportError:
        return None
    return cast(VarlenFn, varlen_attn)  # returns a plain Tensor unless auxiliary outputs are asked for


class EncoderBlock(nn.Module):
    """Post-norm self-attention + GELU MLP block."""

    def __init__(self, cfg: EncoderConfig) -> None:
        super().__init__()
        self.n_heads = cfg.n_heads
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.out = nn.Linear(cfg.d_model, cfg.d_model)
        self.attn_norm = nn.LayerNorm(cfg.d_model, eps=cfg.norm_eps)
        self.up = nn.Linear(cfg.d_model, cfg.ffn_dim)
        self.down = nn.Linear(cfg.ffn_dim, cfg.d_model)
        self.ffn_norm = nn.LayerNorm(cfg.d_model, eps=cfg.norm_eps)

    def forward(self, x: Tensor, attend: Callable[[Tensor], Tensor]) -> Tensor:
        """x: packed [N, D]; ``attend`` maps packed Q/K/V [N, 3D] to attention outputs [N, D]."""
        x = self.attn_norm(x + self.out(attend(self.qkv(x))))
        hidden = torch._addmm_activation(self.up.bias, x, self.up.weight.t(), use_gelu=True)
        return self.ffn_norm(x + self.down(hidden))


class TextEncoder(nn.Module):
    """The embedding model: token ids in, unit-norm vectors out."""

    def __init__(self, cfg: EncoderConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.tok_embed = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.pos_embed = nn.Embedding(cfg.max_len, cfg.d_model)
        self.embed_norm = nn.LayerNorm(cfg.d_model, eps=cfg.norm_eps)
        self.layers = nn.ModuleList(EncoderBlock(cfg) for _ in range(cfg.n_layers))
        self.attention = "padded"  # or "varlen": see use_varlen()
        self._varlen: VarlenFn | None = None

    def use_varlen(self, enabled: bool) -> bool:
        """Switch attention to packed flash attention (CUDA, where torch has it); True if now on."""
        varlen = _varlen_attention() if enabled and self.tok_embed.weight.is_cuda else None
        self._varlen = varlen
        self.attention = "padded" if varlen is None else "varlen"
        return varlen is not None

    def _padded_attention(self, batch: PackedBatch, dtype: torch.dtype) -> Callable[[Tensor], Tensor]:
        device, d, heads = batch.tokens.device, self.cfg.d_model, self.cfg.n_heads
        key_pos = torch.arange(batch.width, device=device)
        mask = torch.zeros((batch.size, 1, 1, batch.width), device=device, dtype=dtype)
        mask.masked_fill_(key_pos.view(1, 1, 1, -1) >= batch.lengths.view(-1, 1, 1, 1), float("-inf"))
        # Only real rows are ever written, so padded rows stay zero (finite) in every layer.
        scratch = torch.zeros((batch.size * batch.width, 3 * d), device=device, dtype=dtype)

        def attend(qkv: Tensor) -> Tensor:
            scratch.index_copy_(0, batch.pad_index, qkv)
            q, k, v = scratch.view(batch.size, batch.width, 3, heads, d // heads).permute(2, 0, 3, 1, 4)
            attn = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # [inputs, H, width, hd]
            return attn.transpose(1, 2).reshape(-1, d).index_select(0, batch.pad_index)

        return attend

    def _flash_attention(self, batch: PackedBatch) -> Callable[[Tensor], Tensor]:
        assert self._varlen is not None
        varlen, d, heads = self._varlen, self.cfg.d_model, self.cfg.n_heads
        cu, longest = batch.cu_seqlens, batch.longest

        def attend(qkv: Tensor) -> Tensor:
            q, k, v = qkv.view(-1, 3, heads, d // heads).unbind(1)  # each [N, H, hd]
            return varlen(q, k, v, cu, cu, longest, longest).reshape(-1, d)

        return attend

    def embed(self, batch: PackedBatch) -> Tensor:
        """Float32 [inputs, D] unit-norm mean-pooled vectors of a packed batch."""
        x = self.embed_norm(self.tok_embed(batch.tokens) + self.pos_embed(batch.positions))
        varlen = self.attention == "varlen"
        attend = self._flash_attention(batch) if varlen else self._padded_attention(batch, x.dtype)
        for layer in self.layers:
            x = layer(x, attend)
        pooled = torch.zeros((batch.size, x.shape[-1]), device=x.device, dtype=torch.float32)
        pooled.index_add_(0, batch.seq_index, x.float())
        return F.normalize(pooled / batch.lengths.view(-1, 1).to(torch.float32), dim=-1)

    def forward(self, tokens: Tensor, lengths: Tensor) -> Tensor:
        """tokens: [B, T] right-padded; lengths: [B]. Returns float32 [B, D], unit L2 norm."""
        rows = tokens.tolist()
        return self.embed(pack_batch([row[:n] for row, n in zip(rows, lengths.tolist(), strict=True)], tokens.device))


def pad_batch(token_lists: list[list[int]], device: torch.device) -> tuple[Tensor, Tensor]:
    """Right-pad token lists with 0 into [B, T] plus a lengths tensor [B]."""
    width = max(len(t) for t in token_lists)
    padded = [t + [0] * (width - len(t)) for t in token_lists]
    tokens = torch.tensor(padded, dtype=torch.long, device=device)
    lengths = torch.tensor([len(t) for t in token_lists], dtype=torch.long, device=device)
    return tokens, lengths


def encoder_flops(cfg: EncoderConfig, lengths: list[int]) -> float:
    """Useful multiply-add FLOPs (x2) to embed inputs of these lengths (padding excluded)."""
    d, f = cfg.d_model, cfg.ffn_dim
    per_token = 2 * (4 * d * d + 2 * d * f)  # qkv + out, up + down
    total = 0.0
    for n in lengths:
        total += cfg.n_layers * (n * per_token + 4 * n * n * d)  # + QK^T and PV
    return total
