"""BERT-style bidirectional encoder producing mean-pooled, L2-normalised embeddings.

Learned token and position embeddings, post-LayerNorm blocks with GELU MLPs (the
BERT layout), in plain PyTorch. Padding is masked out of both attention and
pooling, so an input's vector does not depend on what it was batched with (up to
float rounding).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .presets import EncoderConfig


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

    def forward(self, x: Tensor, key_mask: Tensor) -> Tensor:
        """x: [B, T, D]; key_mask: [B, 1, 1, T] (True = real token)."""
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.n_heads, d // self.n_heads).permute(2, 0, 3, 1, 4)
        attn = F.scaled_dot_product_attention(q, k, v, attn_mask=key_mask)
        x = self.attn_norm(x + self.out(attn.transpose(1, 2).reshape(b, t, d)))
        return self.ffn_norm(x + self.down(F.gelu(self.up(x))))


class TextEncoder(nn.Module):
    """The embedding model: token ids in, unit-norm vectors out."""

    def __init__(self, cfg: EncoderConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.tok_embed = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.pos_embed = nn.Embedding(cfg.max_len, cfg.d_model)
        self.embed_norm = nn.LayerNorm(cfg.d_model, eps=cfg.norm_eps)
        self.layers = nn.ModuleList(EncoderBlock(cfg) for _ in range(cfg.n_layers))

    def forward(self, tokens: Tensor, lengths: Tensor) -> Tensor:
        """tokens: [B, T] right-padded; lengths: [B]. Returns float32 [B, D], unit L2 norm."""
        t = tokens.shape[1]
        positions = torch.arange(t, device=tokens.device)
        valid = positions.view(1, -1) < lengths.view(-1, 1)  # [B, T]
        x = self.embed_norm(self.tok_embed(tokens) + self.pos_embed(positions))
        key_mask = valid.view(valid.shape[0], 1, 1, t)
        for layer in self.layers:
            x = layer(x, key_mask)
        weights = valid.unsqueeze(-1).to(torch.float32)
        pooled = (x.float() * weights).sum(dim=1) / lengths.view(-1, 1).to(torch.float32)
        return F.normalize(pooled, dim=-1)


def pad_batch(token_lists: list[list[int]], device: torch.device) -> tuple[Tensor, Tensor]:
    """Right-pad token lists with 0 into [B, T] plus a lengths tensor [B]."""
    width = max(len(t) for t in token_lists)
    padded = [t + [0] * (width - len(t)) for t in token_lists]
    tokens = torch.tensor(padded, dtype=torch.long, device=device)
    lengths = torch.tensor([len(t) for t in token_lists], dtype=torch.long, device=device)
    return tokens, lengths
