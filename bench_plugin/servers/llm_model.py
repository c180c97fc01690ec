"""Llama-style decoder-only transformer with a preallocated, slot-addressed KV cache.

RMSNorm, rotary position embeddings, grouped-query attention and a SwiGLU MLP, in plain
PyTorch, with the query/key/value and gate/up projections each fused into one matrix (one
GEMM instead of three or two: on an H200 a decode step is a chain of small kernels, and
every kernel saved is ~2-3 us of a ~4 ms step). The KV cache is one static tensor per layer
of shape ``[slots, kv_heads, max_len, head_dim]``; a sequence owns one slot for its
lifetime. Three entry points share the layers:

- :meth:`DecoderLM.forward`: any tokens at any positions of any slots (the reference path
  the tests compare the fast paths against);
- :meth:`DecoderLM.prefill`: new sequences from position 0 (causal, no cache reads: the
  flash kernel on CUDA);
- :meth:`DecoderLM.decode`: one token for each of the slots ``0..B-1`` with static shapes
  only, so that :mod:`.llm_decode` can capture it in a CUDA graph. Its attention reads a
  fixed window of the cache (``window`` positions) and masks each slot past its own length;
  the window is picked per step from a few power-of-two buckets, so a step reads about
  what is filled rather than the whole ``max_len``.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .presets import LlmConfig

WINDOW_ALIGN = 64  # smallest decode window; cache length is a multiple of it (kernel-friendly)

AttendFn = Callable[[int, Tensor, Tensor, Tensor], Tensor]


def rope_table(head_dim: int, max_len: int, theta: float, device: torch.device) -> Tensor:
    """Complex64 rotations ``[max_len, head_dim // 2]`` (e^{i * position * freq})."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, device=device, dtype=torch.float32) / head_dim))
    angles = torch.outer(torch.arange(max_len, device=device, dtype=torch.float32), inv_freq)
    return torch.polar(torch.ones_like(angles), angles)


def apply_rope(x: Tensor, rot: Tensor) -> Tensor:
    """Rotate adjacent channel pairs of ``x`` ([..., heads, hd]) by ``rot`` ([..., 1, hd/2] complex).

    Pairs are interleaved (GPT-J layout) rather than split in halves (NeoX): with random
    weights the two are equivalent, and the complex form is 3 kernels instead of ~8.
    """
    pairs = torch.view_as_complex(x.float().unflatten(-1, (-1, 2)))
    return torch.view_as_real(pairs * rot).flatten(-2).to(x.dtype)


def window_buckets(max_len: int) -> list[int]:
    """Decode attention windows: powers of two from WINDOW_ALIGN, the last one ``max_len`` (aligned)."""
    top = -(-max_len // WINDOW_ALIGN) * WINDOW_ALIGN
    sizes, size = [], WINDOW_ALIGN
    while size < top:
        sizes.append(size)
        size *= 2
    return [*sizes, top]


class KVCache:
    """Per-layer key/value tensors of shape ``[slots, kv_heads, max_len, head_dim]``.

    Head-major, so a head's keys for one slot are one contiguous run that attention streams.
    """

    def __init__(self, cfg: LlmConfig, slots: int, max_len: int, device: torch.device, dtype: torch.dtype):
        length = window_buckets(max_len)[-1]
        shape = (slots, cfg.n_kv_heads, length, cfg.head_dim)
        self.keys = [torch.zeros(shape, device=device, dtype=dtype) for _ in range(cfg.n_layers)]
        self.values = [torch.zeros(shape, device=device, dtype=dtype) for _ in range(cfg.n_layers)]
        self.slots = slots
        self.max_len = length

    def nbytes_per_position(self) -> int:
        """Bytes of keys and values one cached token holds over all layers."""
        k = self.keys[0]
        return 2 * len(self.keys) * k.shape[1] * k.shape[3] * k.element_size()


class Attention(nn.Module):
    """Grouped-query attention projections; the attention itself is supplied per entry point.

    Query head h shares KV head ``h % n_kv_heads`` (groups interleaved rather than
    contiguous: equivalent with random weights, and it lets decode attention run on views).
    """

    def __init__(self, cfg: LlmConfig) -> None:
        super().__init__()
        self.n_heads, self.n_kv_heads, self.head_dim = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
        self.wqkv = nn.Linear(cfg.d_model, (cfg.n_heads + 2 * cfg.n_kv_heads) * cfg.head_dim, bias=False)
        self.wo = nn.Linear(cfg.n_heads * cfg.head_dim, cfg.d_model, bias=False)

    def project(self, x: Tensor, rot: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Queries [..., H, hd], keys and values [..., KV, hd] of ``x`` [..., D], rotated by ``rot``."""
        qkv = self.wqkv(x)
        split = (self.n_heads + self.n_kv_heads) * self.head_dim
        # q and k are rotated together: one pass over both.
        qk = apply_rope(qkv[..., :split].unflatten(-1, (-1, self.head_dim)), rot)
        q, k = qk.split([self.n_heads, self.n_kv_heads], dim=-2)
        v = qkv[..., split:].unflatten(-1, (self.n_kv_heads, self.head_dim))
        return q, k, v


class FeedForward(nn.Module):
    """SwiGLU MLP with the gate and up projections in one matrix."""

    def __init__(self, cfg: LlmConfig) -> None:
        super().__init__()
        self.ffn_dim = cfg.ffn_dim
        self.w_gate_up = nn.Linear(cfg.d_model, 2 * cfg.ffn_dim, bias=False)
        self.w_down = nn.Linear(cfg.ffn_dim, cfg.d_model, bias=False)

    def hidden(self, x: Tensor) -> Tensor:
        """SiLU(gate) * up, the input of ``w_down``."""
        gate_up = self.w_gate_up(x)
        return F.silu(gate_up[..., : self.ffn_dim]).mul_(gate_up[..., self.ffn_dim :])


class Block(nn.Module):
    """Pre-norm transformer block."""

    def __init__(self, cfg: LlmConfig) -> None:
        super().__init__()
        self.attn_norm = nn.RMSNorm(cfg.d_model, eps=cfg.norm_eps)
        self.attn = Attention(cfg)
        self.ffn_norm = nn.RMSNorm(cfg.d_model, eps=cfg.norm_eps)
        self.ffn = FeedForward(cfg)


def _add_matmul_(x: Tensor, h: Tensor, weight: Tensor) -> Tensor:
    """``x += h @ weight.T`` in place: the residual add rides in the GEMM (beta = 1), one kernel fewer."""
    x.view(-1, x.shape[-1]).addmm_(h.reshape(-1, h.shape[-1]), weight.t())
    return x


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
        self._rope: Tensor | None = None

    def allocate_cache(self, slots: int, max_len: int) -> None:
        """Preallocate the KV cache (``slots`` sequences of up to ``max_len`` tokens)."""
        param = self.embed.weight
        self.cache = KVCache(self.cfg, slots, max_len, param.device, param.dtype)
        self._rope = rope_table(self.cfg.head_dim, self.cache.max_len, self.cfg.rope_theta, param.device)

    def _state(self) -> tuple[KVCache, Tensor]:
        if self.cache is None or self._rope is None:
            raise RuntimeError("allocate_cache() must be called before running the model")
        return self.cache, self._rope

    def _run_layers(self, x: Tensor, rot: Tensor, attend: AttendFn) -> Tensor:
        """All blocks over hidden states ``x`` [..., D]; ``attend(layer, q, k, v)`` returns [..., H*hd]."""
        for i, layer in enumerate(self.layers):
            assert isinstance(layer, Block)
            q, k, v = layer.attn.project(layer.attn_norm(x), rot)
            x = _add_matmul_(x, attend(i, q, k, v), layer.attn.wo.weight)
            x = _add_matmul_(x, layer.ffn.hidden(layer.ffn_norm(x)), layer.ffn.w_down.weight)
        return x

    def _logits(self, x: Tensor) -> Tensor:
        return self.lm_head(self.norm(x))

    def forward(
        self, tokens: Tensor, positions: Tensor, slots: Tensor, kv_len: int, last_index: Tensor | None = None
    ) -> Tensor:
        """Run ``tokens`` [B, T] at ``positions`` [B, T] for cache ``slots`` [B] (the reference path).

        Writes their keys/values into the cache, attends over each slot's first
        ``kv_len`` cached positions (causally: key position <= query position), and
        returns float32 logits: [B, vocab] at ``last_index`` [B] if given, else [B, T, vocab].
        Positions beyond a sequence's real length (padding) may hold garbage: they are
        overwritten before any later query can attend to them.
        """
        cache, rope = self._state()
        groups = self.cfg.n_heads // self.cfg.n_kv_heads
        key_pos = torch.arange(kv_len, device=tokens.device)
        mask = (key_pos.view(1, 1, 1, -1) <= positions.unsqueeze(1).unsqueeze(-1))  # [B, 1, T, kv_len]
        rows = slots.view(-1, 1)

        def attend(i: int, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
            cache.keys[i][rows, :, positions] = k
            cache.values[i][rows, :, positions] = v
            keys = cache.keys[i][slots, :, :kv_len].repeat(1, groups, 1, 1)
            values = cache.values[i][slots, :, :kv_len].repeat(1, groups, 1, 1)
            out = F.scaled_dot_product_attention(q.transpose(1, 2), keys, values, attn_mask=mask)
            return out.transpose(1, 2).flatten(2)

        x = self._run_layers(self.embed(tokens), rope[positions].unsqueeze(-2), attend)
        if last_index is not None:
            x = x[torch.arange(x.shape[0], device=x.device), last_index]
        return self._logits(x).float()

    def prefill(self, tokens: Tensor, slots: Tensor, last_index: Tensor) -> Tensor:
        """New sequences: ``tokens`` [B, W] (right-padded) at positions 0..W-1 into ``slots`` [B].

        Returns the logits [B, vocab] at ``last_index`` [B] (each prompt's last real token).
        Causal attention over the prompt itself needs no cache reads; padding sits after
        every real token, so no real token attends to it.
        """
        cache, rope = self._state()
        width = tokens.shape[1]
        groups = self.cfg.n_heads // self.cfg.n_kv_heads

        def attend(i: int, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
            k, v = k.transpose(1, 2), v.transpose(1, 2)  # [B, KV, W, hd]
            cache.keys[i][slots, :, :width] = k
            cache.values[i][slots, :, :width] = v
            # Explicit head repetition keeps SDPA on the flash kernel (GQA support varies by kernel).
            k, v = k.repeat(1, groups, 1, 1), v.repeat(1, groups, 1, 1)
            out = F.scaled_dot_product_attention(q.transpose(1, 2), k, v, is_causal=True)
            return out.transpose(1, 2).flatten(2)

        x = self._run_layers(self.embed(tokens), rope[:width].view(1, width, 1, -1), attend)
        x = x[torch.arange(x.shape[0], device=x.device), last_index]
        return self._logits(x)

    def decode(self, tokens: Tensor, positions: Tensor, window: int) -> Tensor:
        """One token for each of the slots ``0..B-1``: ``tokens`` and ``positions`` are [B].

        Static shapes and no host synchronisation, so it can be captured in a CUDA graph.
        Attention reads the first ``window`` cached positions of each slot and masks those
        past the slot's own position; ``window`` must exceed every position. Returns logits
        [B, vocab] in the model's dtype.
        """
        cache, rope = self._state()
        batch = tokens.shape[0]
        kv_heads, groups = self.cfg.n_kv_heads, self.cfg.n_heads // self.cfg.n_kv_heads
        rows = torch.arange(batch, device=tokens.device)
        key_pos = torch.arange(window, device=tokens.device)
        dtype = self.embed.weight.dtype
        # Additive mask [B, 1, 1, window], built once per step (a float mask: no per-layer conversion).
        mask = torch.zeros((batch, 1, 1, window), device=tokens.device, dtype=dtype)
        mask.masked_fill_(key_pos.view(1, 1, 1, -1) > positions.view(-1, 1, 1, 1), float("-inf"))

        def attend(i: int, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
            cache.keys[i][rows, :, positions] = k
            cache.values[i][rows, :, positions] = v
            # The query heads of one KV group become that group's "query positions": SDPA then
            # reads each cached key once per group, with no repeated copy of the cache. Head h
            # uses KV head h % kv_heads, so this is a view, and so is the output's flattening
            # (SDPA's kernels write [batch, positions, heads, hd]).
            queries = q.view(batch, groups, kv_heads, -1).transpose(1, 2)
            keys, values = cache.keys[i][:batch, :, :window], cache.values[i][:batch, :, :window]
            out = F.scaled_dot_product_attention(queries, keys, values, attn_mask=mask)
            return out.transpose(1, 2).reshape(batch, -1)

        x = self._run_layers(self.embed(tokens), rope[positions].unsqueeze(-2), attend)
        return self._logits(x)

    def decode_bytes(self, batch: int, window: int) -> int:
        """Bytes one :meth:`decode` step must read: every weight but the embedding table, plus the KV window."""
        cache, _ = self._state()
        weights = sum(p.numel() * p.element_size() for p in self.parameters())
        weights -= self.embed.weight.numel() * self.embed.weight.element_size()
        return weights + batch * window * cache.nbytes_per_position()
