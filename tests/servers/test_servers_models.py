"""In-process unit tests of the server models, audio front-end and tokenizer (CPU, tiny)."""

from __future__ import annotations

import io
import wave

import numpy as np
import pytest
import torch

from bench_plugin.servers.asr_decode import AsrRunner, audio_buckets
from bench_plugin.servers.asr_model import SpeechRecognizer, greedy_decode
from bench_plugin.servers.audio import AudioError, decode_wav, load_audio, resample
from bench_plugin.servers.embedding_model import TextEncoder, encoder_flops, pack_batch, pad_batch
from bench_plugin.servers.llm_model import DecoderLM
from bench_plugin.servers.mel import LogMel, mel_filterbank, n_frames
from bench_plugin.servers.presets import ASR_PRESETS, EMBEDDING_PRESETS, LLM_PRESETS, RESERVED_TOKENS
from bench_plugin.servers.tokenizer import WordTokenizer, pseudo_word
from bench_plugin.servers.torch_common import build_model

CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def lm() -> DecoderLM:
    model = build_model(lambda: DecoderLM(LLM_PRESETS["tiny"]), CPU, torch.float32, seed=0)
    model.allocate_cache(slots=4, max_len=64)
    return model


def _tokens(n: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(RESERVED_TOKENS, LLM_PRESETS["tiny"].vocab_size, (n,), generator=g)


@torch.inference_mode()
def test_kv_cached_decode_matches_full_forward(lm: DecoderLM) -> None:
    tokens = _tokens(12, seed=1)
    full = lm(tokens.view(1, -1), torch.arange(12).view(1, -1), torch.tensor([0]), kv_len=12)[0]
    lm(tokens[:5].view(1, -1), torch.arange(5).view(1, -1), torch.tensor([1]), kv_len=5)
    steps = []
    for pos in range(5, 12):
        logits = lm(tokens[pos].view(1, 1), torch.tensor([[pos]]), torch.tensor([1]), kv_len=pos + 1)
        steps.append(logits[0, 0])
    torch.testing.assert_close(torch.stack(steps), full[5:], atol=1e-4, rtol=1e-4)


@torch.inference_mode()
def test_batched_decode_respects_positions(lm: DecoderLM) -> None:
    """Two sequences of different lengths, prefilled padded and decoded together, match solo runs."""
    a, b = _tokens(9, seed=2), _tokens(4, seed=3)
    solo = []
    for seq in (a, b):
        n = len(seq)
        solo.append(lm(seq.view(1, -1), torch.arange(n).view(1, -1), torch.tensor([3]), kv_len=n)[0, -1])
    padded = torch.stack([a, torch.cat([b, torch.zeros(5, dtype=torch.long)])])
    last = lm(padded, torch.arange(9).expand(2, -1), torch.tensor([0, 2]), kv_len=9, last_index=torch.tensor([8, 3]))
    torch.testing.assert_close(last, torch.stack(solo), atol=1e-4, rtol=1e-4)
    # One decode step for both at their own positions (9 and 4) equals solo full passes.
    nxt = torch.tensor([[11], [12]])
    step = lm(nxt, torch.tensor([[9], [4]]), torch.tensor([0, 2]), kv_len=10, last_index=torch.tensor([0, 0]))
    for i, seq in enumerate((a, b)):
        ext = torch.cat([seq, nxt[i]])
        ref = lm(ext.view(1, -1), torch.arange(len(ext)).view(1, -1), torch.tensor([3]), kv_len=len(ext))[0, -1]
        torch.testing.assert_close(step[i], ref, atol=1e-4, rtol=1e-4)


def test_weights_are_seeded() -> None:
    cfg = LLM_PRESETS["tiny"]
    one, two = (build_model(lambda: DecoderLM(cfg), CPU, torch.float32, seed=5) for _ in range(2))
    other = build_model(lambda: DecoderLM(cfg), CPU, torch.float32, seed=6)
    assert torch.equal(one.lm_head.weight, two.lm_head.weight)
    assert not torch.equal(one.lm_head.weight, other.lm_head.weight)
    half = build_model(lambda: DecoderLM(cfg), CPU, torch.bfloat16, seed=5)
    assert half.lm_head.weight.dtype == torch.bfloat16 and torch.get_default_dtype() == torch.float32


@torch.inference_mode()
def test_embedding_padding_does_not_change_vectors() -> None:
    model = build_model(lambda: TextEncoder(EMBEDDING_PRESETS["tiny"]), CPU, torch.float32, seed=0)
    short, long = [10, 11, 12], list(range(20, 40))
    alone = model(*pad_batch([short], CPU))
    batched = model(*pad_batch([short, long], CPU))
    torch.testing.assert_close(batched[0], alone[0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(batched.norm(dim=-1), torch.ones(2), atol=1e-5, rtol=0)


@torch.inference_mode()
def test_asr_batch_matches_single_and_token_counts() -> None:
    model = build_model(lambda: SpeechRecognizer(ASR_PRESETS["tiny"]), CPU, torch.float32, seed=0)
    log_mel = LogMel(80, CPU)
    rng = np.random.default_rng(0)
    clips = [torch.from_numpy(rng.standard_normal(n).astype(np.float32) * 0.1) for n in (16000, 7000)]
    mels = [log_mel(c) for c in clips]
    assert [m.shape for m in mels] == [(80, 100), (80, n_frames(7000))]
    frames = torch.tensor([m.shape[-1] for m in mels])
    padded = torch.stack([torch.nn.functional.pad(m, (0, 100 - m.shape[-1])) for m in mels])
    together = greedy_decode(model, padded, frames, [5, 2])
    assert [len(t) for t in together] == [5, 2]
    alone = greedy_decode(model, mels[1].unsqueeze(0), frames[1:], [2])
    assert together[1] == alone[0]


def test_mel_filterbank_shape_and_coverage() -> None:
    for n_mels in (80, 128):
        filters = mel_filterbank(n_mels)
        assert filters.shape == (n_mels, 201)
        assert (filters >= 0).all() and (filters.sum(dim=1) > 0).all()
    # A 1 kHz tone peaks in the filter centred near 1 kHz.
    t = torch.arange(16000) / 16000
    spec = LogMel(80, CPU)(torch.sin(2 * torch.pi * 1000 * t))
    # 1 kHz is mel 15 of 45.25 at 8 kHz: filter ~ 15 / 45.25 * 81 - 1 = 26.
    assert 24 <= int(spec.mean(dim=1).argmax()) <= 28


def _wav(samples: np.ndarray, rate: int, channels: int, width: int) -> bytes:
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(width)
        w.setframerate(rate)
        w.writeframes(samples.tobytes())
    return buf.getvalue()


def test_wav_decoding_mixes_and_resamples() -> None:
    left = np.full(800, 16384, dtype="<i2")
    right = np.zeros(800, dtype="<i2")
    stereo = np.stack([left, right], axis=1)
    samples, rate = decode_wav(_wav(stereo, 8000, 2, 2))
    assert rate == 8000 and samples.shape == (800,)
    np.testing.assert_allclose(samples, 0.25)
    audio = load_audio(_wav(stereo, 8000, 2, 2))
    assert audio.samples.shape == (1600,) and audio.duration_s == pytest.approx(0.1)
    assert resample(np.ones(441, dtype=np.float32), 44100).shape == (160,)
    eight_bit = decode_wav(_wav(np.full(10, 255, dtype=np.uint8), 16000, 1, 1))[0]
    assert eight_bit.max() == pytest.approx(127 / 128)
    for bad in (b"", b"OggS....", b"RIFF\x00\x00\x00\x00WAVE"):
        with pytest.raises(AudioError):
            decode_wav(bad)


def test_tokenizer_is_stable_and_word_level() -> None:
    tok = WordTokenizer(4096)
    ids = tok.encode("hello  world\nhello")
    assert len(ids) == 3 and ids[0] == ids[2] and all(RESERVED_TOKENS <= i < 4096 for i in ids)
    assert ids == WordTokenizer(4096).encode("hello world hello")
    text = tok.decode([0, 1, 5000, 123456])
    assert len(text.split()) == 4
    assert all(pseudo_word(i).isalpha() for i in range(200))
    assert tok.decode_token(9, first=True) == pseudo_word(9)
    assert tok.decode_token(9, first=False) == " " + pseudo_word(9)


@torch.inference_mode()
def test_asr_runner_matches_reference_decode() -> None:
    """The static-buffer decoder (what CUDA graphs capture) gives the reference's tokens, batched or not."""
    model = build_model(lambda: SpeechRecognizer(ASR_PRESETS["tiny"]), CPU, torch.float32, seed=0)
    runner = AsrRunner(model, max_batch=4, max_positions=20, use_graphs=False)
    runner.capture()
    log_mel = LogMel(80, CPU)
    rng = np.random.default_rng(1)
    mels = [log_mel(torch.from_numpy(rng.standard_normal(n).astype(np.float32) * 0.1)) for n in (16000, 9000, 60000)]
    frames = torch.tensor([m.shape[-1] for m in mels])
    width = int(frames.max())
    padded = torch.stack([torch.nn.functional.pad(m, (0, width - m.shape[-1])) for m in mels])
    counts = [6, 3, 12]
    reference = greedy_decode(model, padded, frames, counts)
    assert runner.transcribe(padded, frames, counts) == reference
    assert runner.transcribe(mels[1].unsqueeze(0), frames[1:2], [3]) == reference[1:2]
    assert audio_buckets(1500) == [256, 512, 768, 1024, 1280, 1504]
    with pytest.raises(ValueError):  # 20 positions round up to 32: 29 tokens + the 4-token prompt do not fit
        runner.transcribe(padded, frames, [29, 1, 1])


@torch.inference_mode()
def test_embedding_packing_matches_padded_reference() -> None:
    """Packed per-token work plus padded attention equals a plain padded forward pass."""
    cfg = EMBEDDING_PRESETS["tiny"]
    model = build_model(lambda: TextEncoder(cfg), CPU, torch.float32, seed=0)
    lists = [[10, 11, 12], list(range(20, 57)), [99]]
    tokens, lengths = pad_batch(lists, CPU)
    valid = torch.arange(tokens.shape[1]).view(1, -1) < lengths.view(-1, 1)
    x = model.embed_norm(model.tok_embed(tokens) + model.pos_embed(torch.arange(tokens.shape[1])))
    for layer in model.layers:
        b, t, d = x.shape
        q, k, v = layer.qkv(x).view(b, t, 3, cfg.n_heads, -1).permute(2, 0, 3, 1, 4)
        attn = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=valid.view(b, 1, 1, t))
        x = layer.attn_norm(x + layer.out(attn.transpose(1, 2).reshape(b, t, d)))
        x = layer.ffn_norm(x + layer.down(torch.nn.functional.gelu(layer.up(x))))
    pooled = (x * valid.unsqueeze(-1)).sum(1) / lengths.view(-1, 1)
    reference = torch.nn.functional.normalize(pooled, dim=-1)
    torch.testing.assert_close(model.embed(pack_batch(lists, CPU)), reference, atol=1e-5, rtol=1e-5)
    assert encoder_flops(cfg, [3]) > 0
