"""CUDA-only checks of the captured paths: graph replays equal eager runs, servers serve with graphs on.

Skipped without a GPU (the CPU suite checks the same step functions eagerly). On a GPU host run
them without the project's root conftest (it imports Locust, which the GPU image lacks):

    python3 -m pytest -q --confcutdir=tests/servers tests/servers/test_servers_cuda.py
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import aiohttp
import numpy as np
import pytest
import torch
from servers_testlib import ServerProcess, stream_sse_async

from bench_plugin.servers.asr_decode import AsrRunner
from bench_plugin.servers.asr_model import SpeechRecognizer
from bench_plugin.servers.embedding_model import TextEncoder, pack_batch
from bench_plugin.servers.llm_decode import DecodeRunner
from bench_plugin.servers.llm_model import DecoderLM
from bench_plugin.servers.mel import LogMel
from bench_plugin.servers.presets import ASR_PRESETS, EMBEDDING_PRESETS, LLM_PRESETS, RESERVED_TOKENS
from bench_plugin.servers.torch_common import build_model

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
CUDA = torch.device("cuda")


def _rel_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    return float((out.double() - ref.double()).norm() / ref.double().norm())


@torch.inference_mode()
def test_llm_graph_steps_equal_eager_steps_and_reference() -> None:
    cfg = LLM_PRESETS["small"]
    model = build_model(lambda: DecoderLM(cfg), CUDA, torch.bfloat16, seed=0)
    model.allocate_cache(slots=8, max_len=256)
    runner = DecodeRunner(model, use_graphs=True)
    runner.capture()
    assert runner.graph_count == 4 * 3  # batches 1, 2, 4, 8 x windows 64, 128, 256
    g = torch.Generator().manual_seed(0)
    lengths = {0: 40, 1: 7, 3: 90}
    seqs: dict[int, list[int]] = {}
    for slot, n in lengths.items():
        prompt = torch.randint(RESERVED_TOKENS, cfg.vocab_size, (n,), generator=g)
        first = model.prefill(prompt.view(1, -1).to(CUDA), torch.tensor([slot], device=CUDA),
                              torch.tensor([n - 1], device=CUDA)).argmax(-1)
        runner.set_first_tokens(torch.tensor([slot], device=CUDA), first)
        seqs[slot] = [*prompt.tolist(), int(first)]
    for _ in range(6):
        positions = [0] * 4
        for slot, seq in seqs.items():
            positions[slot] = len(seq) - 1
        # The eager step writes the same cache cells with the same values the replay writes next.
        eager = model.decode(runner.tokens[:4].clone(), torch.tensor(positions, device=CUDA), 128)
        replayed = runner.step(positions).tolist()
        for slot, seq in seqs.items():
            assert replayed[slot] == int(eager[slot].argmax()), f"slot {slot}"
            seq.append(replayed[slot])
    # The eager decode agrees with the reference forward within bf16 rounding.
    seq = torch.tensor(seqs[3][:-1], device=CUDA)
    ref = model(seq.view(1, -1), torch.arange(len(seq), device=CUDA).view(1, -1), torch.tensor([7], device=CUDA),
                kv_len=len(seq))[0, -1]
    assert _rel_error(eager[3].float(), ref) < 3e-2


@torch.inference_mode()
def test_asr_graph_replay_equals_eager_runner() -> None:
    cfg = ASR_PRESETS["base"]
    model = build_model(lambda: SpeechRecognizer(cfg), CUDA, torch.bfloat16, seed=0)
    graphs = AsrRunner(model, max_batch=4, max_positions=40, use_graphs=True)
    graphs.capture()
    eager = AsrRunner(model, max_batch=4, max_positions=40, use_graphs=False)
    log_mel = LogMel(cfg.n_mels, CUDA)
    rng = np.random.default_rng(0)
    mels = [log_mel(torch.from_numpy(rng.standard_normal(n).astype(np.float32) * 0.1).to(CUDA))
            for n in (16000, 70000, 30000)]
    frames = torch.tensor([m.shape[-1] for m in mels], device=CUDA)
    padded = torch.stack([torch.nn.functional.pad(m, (0, int(frames.max()) - m.shape[-1])) for m in mels])
    counts = [12, 30, 5]
    out = graphs.transcribe(padded.to(torch.bfloat16), frames, counts)
    assert [len(t) for t in out] == counts
    assert out == eager.transcribe(padded.to(torch.bfloat16), frames, counts)


@torch.inference_mode()
@pytest.mark.parametrize("varlen", [False, True])
def test_embedding_batch_equals_single_and_paths_agree(varlen: bool) -> None:
    cfg = EMBEDDING_PRESETS["base"]
    model = build_model(lambda: TextEncoder(cfg), CUDA, torch.bfloat16, seed=0)
    if model.use_varlen(varlen) != varlen:
        pytest.skip("no variable-length flash attention in this torch")
    lists = [list(range(10, 10 + n)) for n in (5, 200, 77, 512)]
    batched = model.embed(pack_batch(lists, CUDA))
    for i, tokens in enumerate(lists):
        alone = model.embed(pack_batch([tokens], CUDA))[0]
        assert float(torch.dot(alone, batched[i])) > 0.999
    model.use_varlen(not varlen)
    other = model.embed(pack_batch(lists, CUDA))
    assert float((other * batched).sum(dim=1).min()) > 0.999


def test_llm_server_serves_with_graphs(tmp_path: Path) -> None:
    server = ServerProcess("llm", ["--size", "small", "--device", "cuda", "--max-batch-size", "8"], tmp_path)
    try:
        server.wait_ready(timeout=180)
        assert re.search(r"cuda graphs on, \d+ captured", server.output()), server.output()

        async def run_all() -> list[int]:
            async with aiohttp.ClientSession() as session:
                jobs = [stream_sse_async(session, server.url + "/v1/completions",
                                         {"prompt": f"word {i} " * (i + 1), "max_tokens": 20 + i, "stream": True})
                        for i in range(12)]  # fmt: skip
                results = await asyncio.gather(*jobs)
            return [len(r.json_events()) - 1 for r in results]  # minus the finish chunk

        assert asyncio.run(run_all()) == [20 + i for i in range(12)]
    finally:
        server.stop()


@pytest.mark.parametrize("size", ["tiny", "base"])
def test_every_embedding_size_starts_on_cuda(tmp_path: Path, size: str) -> None:
    """The start-up probe of the attention path stays within the model's positions (tiny has 128)."""
    server = ServerProcess("embedding", ["--size", size, "--device", "cuda"], tmp_path)
    try:
        server.wait_ready(timeout=180)
        assert "bench-server embedding attention:" in server.output()
        assert "failed" not in server.output().split("attention:", 1)[1].splitlines()[0], server.output()
    finally:
        server.stop()


def test_embedding_server_pipelined_answers_match_one_request_at_a_time(tmp_path: Path) -> None:
    """Concurrent requests through the pipelined CUDA server (text formatted on the GPU) get the answers each
    request gets alone from a server that finishes every batch first: pipelining reorders nothing."""
    texts = [" ".join(f"w{(i * 7 + j) % 300}" for j in range(5 + 13 * i)) for i in range(24)]

    async def ask(url: str, together: bool) -> list[list[float]]:
        async with aiohttp.ClientSession() as session:
            async def one(text: str) -> list[float]:
                async with session.post(url + "/v1/embeddings", json={"input": [text, text[::-1]]}) as reply:
                    assert reply.status == 200, await reply.text()
                    body = await reply.json()
                return [x for item in body["data"] for x in item["embedding"]]

            if together:
                return list(await asyncio.gather(*(one(t) for t in texts)))
            return [await one(t) for t in texts]

    answers = {}
    for flags, together in (([], True), (["--no-pipelining"], False)):
        server = ServerProcess("embedding", ["--size", "base", "--device", "cuda", *flags], tmp_path)
        try:
            server.wait_ready(timeout=180)
            answers[together] = np.array(asyncio.run(ask(server.url, together)))
        finally:
            server.stop()
    # batched with others or alone, an input's vector is the same up to bf16 rounding
    assert np.abs(answers[True] - answers[False]).max() < 2e-2
    cosines = [float(np.dot(a, b) / np.linalg.norm(a) / np.linalg.norm(b))
               for a, b in zip(answers[True], answers[False], strict=True)]
    assert min(cosines) > 0.999
