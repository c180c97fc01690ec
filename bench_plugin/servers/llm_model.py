"""Llama-style decoder-only transformer with a preallocated, slot-addressed KV cache.

RMSNorm, rotary position embeddings, grouped-query attention and a SwiGLU MLP, in
plain PyTorch. The KV cache is one static tensor per layer of shape
``[slots, max_len, kv_heads, head_dim]``; a sequence owns one slot for its lifetime,
and one :meth:`DecoderLM.forward` serves both prefill (T prompt tokens) and batched
decode (T = 1) for any set of slots at arbitrary positions. Static shapes keep the
door open for CUDA graphs and fused attention kernels later.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .presets import LlmConfig


def rope_tables(head_dim: int, max_len: int, theta: float, device: torch.device) -> tuple[Tensor, Tensor]:
    """Float32 cos/sin tables of shape ``[max_len, head_dim // 2]``."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, device=device, dtype=torch.float32) / head_dim))
    angles = torch.outer(torch.arange(max_len, device=device, dtype=torch.float32), inv_freq)
    return angles.cos(), angles.sin()


def apply_rope(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotate ``x`` ([B, T, heads, hd]) by per-token angles (cos/sin: [B, T, hd/2])."""
    x1, x2 = x.float().chunk(2, dim=-1)
    c, s = cos.unsqueeze(2), sin.unsqueeze(2)
    return torch.cat((x1 * c - x2 * s, x1 * s + x2 * c), dim=-1).to(x.dtype)


class KVCache:
    """Per-layer key/value tensors of shape ``[slots, max_len, kv_heads, head_dim]``."""

    def __init__(self, cfg: LlmConfig, slots: int, max_len: int, device: torch.device, dtype: torch.dtype):
        shape = (slots, max_len, cfg.n_kv_heads, cfg.head_dim)
        self.keys = [torch.zeros(shape, device=device, dtype=dtype) for _ in range(cfg.n_layers)]
        self.values = [torch.zeros(shape, device=device, dtype=dtype) for _ in range(cfg.n_layers)]
        self.slots = slots
        self.max_len = max_len


class Attention(nn.Module):
    """Grouped-query self-attention reading and writing the slot KV cache."""

    def __init__(self, cfg: LlmConfig) -> None:
        super().__init__()
        self.n_heads, self.n_kv_heads, self.head_dim = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
        self.wq = nn.Linear(cfg.d_model, cfg.n_heads * cfg.head_dim, bias=False)
        self.wk = nn.Linear(cfg.d_model, cfg.n_kv_heads * cfg.head_dim, bias=False)
        self.wv = nn.Linear(cfg.d_model, cfg.n_kv_heads * cfg.head_dim, bias=False)
        self.wo = nn.Linear(cfg.n_heads * cfg.head_dim, cfg.d_model, bias=False)

    def forward(
        self,
        x: Tensor,
        rope: tuple[Tensor, Tensor],
        cache: tuple[Tensor, Tensor],
        index: tuple[Tensor, Tensor],
        kv_len: int,
        mask: Tensor,
    ) -> Tensor:
        """x: [B, T, D]; index: (slots [B, 1], positions [B, T]); mask: [B, 1, T, kv_len]."""
        b, t, _ = x.shape
        q = apply_rope(self.wq(x).view(b, t, self.n_heads, self.head_dim), *rope)
        k = apply_rope(self.wk(x).view(b, t, self.n_kv_heads, self.head_dim), *rope)
        v = self.wv(x).view(b, t, self.n_kv_heads, self.head_dim)
        cache_k, cache_v = cache
        slots, positions = index
        cache_k[slots, positions] = k
        cache_v[slots, positions] = v
        keys = self._gather_heads(cache_k, slots[:, 0], kv_len)
        values = self._gather_heads(cache_v, slots[:, 0], kv_len)
        out = F.scaled_dot_product_attention(q.transpose(1, 2), keys, values, attn_mask=mask)
        return self.wo(out.transpose(1, 2).reshape(b, t, -1))

    def _gather_heads(self, cache: Tensor, slots: Tensor, kv_len: int) -> Tensor:
        """Each sequence's cached prefix with KV heads repeated per query group: [B, H, kv_len, hd].

        Explicit repetition (one copy) rather than SDPA's ``enable_gqa``: with an
        attention mask, GQA falls back to the slow math kernel on CUDA.
        """
        prefix = cache[slots, :kv_len].transpose(1, 2)  # [B, kv_heads, kv_len, hd]
        b, kv_heads, length, hd = prefix.shape
        groups = self.n_heads // kv_heads
        return prefix.unsqueeze(2).expand(b, kv_heads, groups, length, hd).reshape(b, self.n_heads, length, hd)


class FeedForward(nn.Module):
    """SwiGLU MLP."""

    def __init__(self, cfg: LlmConfig) -> None:
        super().__init__()
        self.w_gate = nn.Linear(cfg.d_model, cfg.ffn_dim, bias=False)
        self.w_up = nn.Linear(cfg.d_model, cfg.ffn_dim, bias=False)
        self.w_down = nn.Linear(cfg.ffn_dim, cfg.d_model, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        """SiLU-gated projection up and back down."""
        return self.w_down(F.silu(self.w_gate(x)) * self.w_up(x))


class Block(nn.Module):
    """Pre-norm transformer block."""

    def __init__(self, cfg: LlmConfig) -> None:
        super().__init__()
        self.attn_norm = nn.RMSNorm(cfg.d_model, eps=cfg.norm_eps)
        self.attn = Attention(cfg)
        self.ffn_norm = nn.RMSNorm(cfg.d_model, eps=cfg.norm_eps)
        self.ffn = FeedForward(cfg)

    def forward(
        self,
        x: Tensor,
        rope: tuple[Tensor, Tensor],
        cache: tuple[Tensor, Tensor],
        index: tuple[Tensor, Tensor],
        kv_len: int,
        mask: Tensor,
    ) -> Tensor:
        """Residual attention then residual MLP."""
        x = x + self.attn(self.attn_norm(x), rope, cache, index, kv_len, mask)
        return x + self.ffn(self.ffn_norm(x))


class DecoderLM(nn.Module):
    """The full decoder; call :meth:`allocate_cache` once after building."""

    def __init__(self, cfg: LlmConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.layers = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.norm = nn.RMSNorm(cfg.d_model, eps=cfg.norm_eps)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self.cache: KVCache | None = None
        self._rope: tuple[Tensor, Tensor] | None = None

    def allocate_cache(self, slots: int, max_len: int) -> None:
        """Preallocate the KV cache (``slots`` sequences of up to ``max_len`` tokens)."""
        param = self.embed.weight
        self.cache = KVCache(self.cfg, slots, max_len, param.device, param.dtype)
        self._rope = rope_tables(self.cfg.head_dim, max_len, self.cfg.rope_theta, param.device)

    def forward(
        self, tokens: Tensor, positions: Tensor, slots: Tensor, kv_len: int, last_index: Tensor | None = None
    ) -> Tensor:
        """Run ``tokens`` [B, T] at ``positions`` [B, T] for cache ``slots`` [B].

        Writes their keys/values into the cache, attends over each slot's first
        ``kv_len`` cached positions (causally: key position <= query position), and
        returns logits: [B, vocab] at ``last_index`` [B] if given, else [B, T, vocab].
        Positions beyond a sequence's real length (padding) may hold garbage: they are
        overwritten before any later query can attend to them.
        """
        if self.cache is None or self._rope is None:
            raise RuntimeError("allocate_cache() must be called before forward()")
        cos, sin = self._rope[0][positions], self._rope[1][positions]
        key_pos = torch.arange(kv_len, device=tokens.device)
        mask = key_pos.view(1, 1, 1, -1) <= positions.view(positions.shape[0], 1, -1, 1)
        index = (slots.view(-1, 1), positions)
        x = self.embed(tokens)
        for i, layer in enumerate(self.layers):
            x = layer(x, (cos, sin), (self.cache.keys[i], self.cache.values[i]), index, kv_len, mask)
        if last_index is not None:
            x = x[torch.arange(x.shape[0], device=x.device), last_index]
        return self.lm_head(self.norm(x)).float()
