"""The LLM's fast paths (prefill, graph-shaped decode, the decode runner) against the reference forward.

CPU, tiny preset, float32: the decode runner runs the very function it captures on CUDA, so these
check the captured code's arithmetic; tests/servers/test_servers_cuda.py checks the capture itself.
"""

from __future__ import annotations

import pytest
import torch

from bench_plugin.servers.llm_decode import DecodeRunner, batch_buckets, bucket_for
from bench_plugin.servers.llm_model import DecoderLM, window_buckets
from bench_plugin.servers.presets import LLM_PRESETS, RESERVED_TOKENS
from bench_plugin.servers.torch_common import build_model

CPU = torch.device("cpu")
TOL = {"atol": 1e-4, "rtol": 1e-4}


def _model(slots: int, max_len: int) -> DecoderLM:
    model = build_model(lambda: DecoderLM(LLM_PRESETS["tiny"]), CPU, torch.float32, seed=0)
    model.allocate_cache(slots=slots, max_len=max_len)
    return model


def _tokens(n: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(RESERVED_TOKENS, LLM_PRESETS["tiny"].vocab_size, (n,), generator=g)


def _reference_last(model: DecoderLM, seq: torch.Tensor, slot: int) -> torch.Tensor:
    """Logits after ``seq`` from one full reference pass in a scratch slot."""
    n = len(seq)
    return model(seq.view(1, -1), torch.arange(n).view(1, -1), torch.tensor([slot]), kv_len=n)[0, -1]


def test_buckets() -> None:
    assert batch_buckets(1) == [1]
    assert batch_buckets(48) == [1, 2, 4, 8, 16, 32, 48]
    assert batch_buckets(64) == [1, 2, 4, 8, 16, 32, 64]
    assert window_buckets(16) == [64]
    assert window_buckets(512) == [64, 128, 256, 512]
    assert window_buckets(600) == [64, 128, 256, 512, 640]
    assert bucket_for([1, 2, 4], 3) == 4
    with pytest.raises(ValueError):
        bucket_for([1, 2, 4], 5)


@torch.inference_mode()
def test_prefill_matches_reference() -> None:
    model = _model(slots=4, max_len=64)
    a, b = _tokens(11, seed=1), _tokens(6, seed=2)
    padded = torch.stack([a, torch.cat([b, torch.zeros(5, dtype=torch.long)])])
    logits = model.prefill(padded, torch.tensor([1, 2]), torch.tensor([10, 5])).float()
    torch.testing.assert_close(logits[0], _reference_last(model, a, 3), **TOL)
    torch.testing.assert_close(logits[1], _reference_last(model, b, 3), **TOL)


@torch.inference_mode()
def test_decode_runner_matches_reference_and_keeps_slots_apart() -> None:
    """Three sequences of different lengths in slots 0, 1 and 3 (slot 2 free), decoded together."""
    model = _model(slots=5, max_len=128)
    runner = DecodeRunner(model, use_graphs=False)
    prompts = {0: _tokens(9, seed=3), 1: _tokens(3, seed=4), 3: _tokens(70, seed=5)}  # 70: past one window
    seqs: dict[int, list[int]] = {}
    for slot, prompt in prompts.items():
        n = len(prompt)
        first = model.prefill(prompt.view(1, -1), torch.tensor([slot]), torch.tensor([n - 1])).argmax(-1)
        runner.set_first_tokens(torch.tensor([slot]), first)
        seqs[slot] = [*prompt.tolist(), int(first)]
    for _ in range(4):
        positions = [0] * 4
        for slot, seq in seqs.items():
            positions[slot] = len(seq) - 1
        out = runner.step(positions).tolist()
        assert len(out) == 4  # batch bucket for 4 rows
        for slot, seq in seqs.items():
            expected = int(_reference_last(model, torch.tensor(seq), 4).argmax())
            assert out[slot] == expected
            seq.append(out[slot])


@torch.inference_mode()
def test_decode_logits_match_reference() -> None:
    model = _model(slots=2, max_len=64)
    seq = _tokens(8, seed=6)
    model.prefill(seq[:7].view(1, -1), torch.tensor([1]), torch.tensor([6]))
    tokens, positions = torch.tensor([0, int(seq[7])]), torch.tensor([0, 7])
    logits = model.decode(tokens, positions, window=64)
    torch.testing.assert_close(logits[1].float(), _reference_last(model, seq, 0), **TOL)
    assert model.decode_bytes(2, 64) > sum(p.numel() * 4 for p in model.layers.parameters())
