"""Model size presets for the reference servers.

Every model is built from one of these configs with random (seeded) weights, so the
shapes, not the weights, are what matter: the large presets copy the shapes of the
public models they are named after, so the compute and memory traffic per token is
realistic. This module must not import torch (the synthetic server and the CLI's flag
validation import it).
"""

from __future__ import annotations

from dataclasses import dataclass

# Token ids below this are reserved for special tokens (pad, bos, eos, cls, ...).
# The word-level tokenizer never produces them from text.
RESERVED_TOKENS = 8
PAD_ID = 0
BOS_ID = 1
EOS_ID = 2
CLS_ID = 3
# Whisper-style decoder prompt (start of transcript, language, task, no timestamps).
SOT_SEQUENCE = (4, 5, 6, 7)


@dataclass(frozen=True)
class LlmConfig:
    """Shape of a Llama-style decoder-only model."""

    vocab_size: int
    d_model: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    ffn_dim: int
    max_position: int
    default_max_model_len: int
    rope_theta: float = 500000.0
    norm_eps: float = 1e-5

    @property
    def head_dim(self) -> int:
        """Width of one attention head."""
        return self.d_model // self.n_heads


@dataclass(frozen=True)
class EncoderConfig:
    """Shape of a BERT-style bidirectional encoder used for embeddings."""

    vocab_size: int
    d_model: int
    n_layers: int
    n_heads: int
    ffn_dim: int
    max_len: int
    norm_eps: float = 1e-12


@dataclass(frozen=True)
class AsrConfig:
    """Shape of a Whisper-style encoder-decoder speech recogniser."""

    vocab_size: int
    n_mels: int
    d_model: int
    n_encoder_layers: int
    n_decoder_layers: int
    n_heads: int
    n_audio_ctx: int = 1500  # 30 s of audio after the stride-2 conv
    n_text_ctx: int = 448
    norm_eps: float = 1e-5


LLM_PRESETS: dict[str, LlmConfig] = {
    "tiny": LlmConfig(
        vocab_size=4096,
        d_model=64,
        n_layers=2,
        n_heads=4,
        n_kv_heads=2,
        ffn_dim=192,
        max_position=1024,
        default_max_model_len=512,
    ),
    "small": LlmConfig(
        vocab_size=32000,
        d_model=768,
        n_layers=12,
        n_heads=12,
        n_kv_heads=4,
        ffn_dim=2048,
        max_position=4096,
        default_max_model_len=2048,
    ),
    # Llama-3.2-1B shape.
    "1b": LlmConfig(
        vocab_size=128256,
        d_model=2048,
        n_layers=16,
        n_heads=32,
        n_kv_heads=8,
        ffn_dim=8192,
        max_position=131072,
        default_max_model_len=4096,
    ),
    # Llama-3-8B shape.
    "8b": LlmConfig(
        vocab_size=128256,
        d_model=4096,
        n_layers=32,
        n_heads=32,
        n_kv_heads=8,
        ffn_dim=14336,
        max_position=131072,
        default_max_model_len=4096,
    ),
}

EMBEDDING_PRESETS: dict[str, EncoderConfig] = {
    "tiny": EncoderConfig(vocab_size=4096, d_model=64, n_layers=2, n_heads=4, ffn_dim=128, max_len=128),
    # BERT-base shape.
    "base": EncoderConfig(vocab_size=30522, d_model=768, n_layers=12, n_heads=12, ffn_dim=3072, max_len=512),
    # BERT-large shape.
    "large": EncoderConfig(vocab_size=30522, d_model=1024, n_layers=24, n_heads=16, ffn_dim=4096, max_len=512),
}

ASR_PRESETS: dict[str, AsrConfig] = {
    "tiny": AsrConfig(vocab_size=4096, n_mels=80, d_model=64, n_encoder_layers=2, n_decoder_layers=2, n_heads=4),
    # Whisper-base shape.
    "base": AsrConfig(vocab_size=51865, n_mels=80, d_model=512, n_encoder_layers=6, n_decoder_layers=6, n_heads=8),
    # Whisper-large-v3 shape.
    "large": AsrConfig(
        vocab_size=51866, n_mels=128, d_model=1280, n_encoder_layers=32, n_decoder_layers=32, n_heads=20
    ),
}

DEFAULT_MODEL_NAMES = {
    "llm": "bench-llm-{size}",
    "embedding": "bench-embedding-{size}",
    "asr": "bench-asr-{size}",
    "synthetic": "bench-synthetic",
}
