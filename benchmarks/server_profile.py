"""Profile: where the reference models' GPU time goes, in-process (no HTTP), on CUDA.

    python benchmarks/server_profile.py [--out DIR] [--llm 8b] [--embedding large] [--asr large]

The complement of benchmarks/server_efficiency.py: that one measures servers end to end, this
one times the model code alone with CUDA events, so the two together say whether a gap to the
bound is the kernels' or the serving loop's. For each class it prints (and writes profile.txt):

- llm: a decode step's time replayed from its CUDA graph and run eagerly, at batch 1/8/32/64
  and a 128-position window, against the bytes the step must read over the copy bandwidth
  given by --copy-gb-s; then torch.profiler's top kernels of one eager step;
- embedding: one batch of 32 inputs of 64-256 tokens (wall time, sum of kernel times);
- asr: one batch of 8 packaged clips, encoder and whole transcription, and top kernels.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench_plugin.servers.asr_decode import AsrRunner  # noqa: E402
from bench_plugin.servers.asr_model import SpeechRecognizer  # noqa: E402
from bench_plugin.servers.audio import load_audio  # noqa: E402
from bench_plugin.servers.embedding_model import TextEncoder, encoder_flops, pack_batch  # noqa: E402
from bench_plugin.servers.llm_decode import DecodeRunner  # noqa: E402
from bench_plugin.servers.llm_model import DecoderLM  # noqa: E402
from bench_plugin.servers.mel import LogMel  # noqa: E402
from bench_plugin.servers.presets import ASR_PRESETS, EMBEDDING_PRESETS, LLM_PRESETS  # noqa: E402
from bench_plugin.servers.torch_common import build_model, configure_torch  # noqa: E402

CUDA = torch.device("cuda")
LINES: list[str] = []


def say(text: str) -> None:
    print(text, flush=True)
    LINES.append(text)


def cuda_ms(fn: Callable[[], object], repeats: int = 10) -> float:
    """Median milliseconds of ``fn`` between CUDA events, after two warm-up calls."""
    for _ in range(2):
        fn()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def top_kernels(fn: Callable[[], object], title: str, rows: int = 14) -> None:
    """torch.profiler's kernels of one ``fn()`` call, by total device time; plus the device-busy share."""
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        began = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        wall_ms = (time.perf_counter() - began) * 1e3
    events = [e for e in prof.key_averages() if e.device_time_total > 0 and e.device_type.name == "CUDA"]
    busy_ms = sum(e.device_time_total for e in events) / 1e3
    say(f"-- {title}: wall {wall_ms:.2f} ms, kernels {busy_ms:.2f} ms ({busy_ms / wall_ms:.0%} busy), "
        f"{sum(e.count for e in events)} kernel launches")
    for e in sorted(events, key=lambda e: -e.device_time_total)[:rows]:
        say(f"   {e.device_time_total / 1e3:8.3f} ms  x{e.count:<5d} {e.key[:110]}")


@torch.inference_mode()
def profile_llm(size: str, copy_gb_s: float) -> None:
    cfg = LLM_PRESETS[size]
    model = build_model(lambda: DecoderLM(cfg), CUDA, torch.bfloat16, seed=0)
    model.allocate_cache(slots=64, max_len=128)
    runner = DecodeRunner(model, use_graphs=True)
    runner.capture()
    say(f"== llm {size}: {runner.graph_count} graphs captured in {runner.capture_s:.1f} s")
    for batch in (1, 8, 32, 64):
        positions = [100] * batch
        bound = model.decode_bytes(batch, 128) / (copy_gb_s * 1e9) * 1e3
        graph_ms = cuda_ms(partial(runner.step, positions), 20)
        eager_ms = cuda_ms(partial(runner._step, batch, 128), 3)
        say(f"B={batch:3d}: graph {graph_ms:.3f} ms, eager {eager_ms:.3f} ms, bound {bound:.3f} ms "
            f"({bound / graph_ms:.0%} of bound in the graph)")
    top_kernels(partial(runner._step, 64, 128), f"llm {size} eager decode step B=64")


@torch.inference_mode()
def profile_embedding(size: str) -> None:
    cfg = EMBEDDING_PRESETS[size]
    model = build_model(lambda: TextEncoder(cfg), CUDA, torch.bfloat16, seed=0)
    say(f"== embedding {size}: varlen flash attention {'on' if model.use_varlen(True) else 'unavailable'}")
    gen = torch.Generator().manual_seed(0)
    lengths = torch.randint(64, 257, (32,), generator=gen).tolist()
    lists = [list(range(10, 10 + n)) for n in lengths]
    flops = encoder_flops(cfg, lengths)
    ms = cuda_ms(lambda: model.embed(pack_batch(lists, CUDA)).cpu())
    say(f"batch 32 ({sum(lengths)} tokens) {ms:.2f} ms = {flops / ms / 1e9:.0f} TFLOP/s "
        "useful")
    top_kernels(lambda: model.embed(pack_batch(lists, CUDA)).cpu(), f"embedding {size} batch 32 ({model.attention})")
    big = lists * 3  # a --max-batch-tokens sized batch: ~16k tokens
    ms = cuda_ms(lambda: model.embed(pack_batch(big, CUDA)).cpu())
    say(f"batch 96 ({3 * sum(lengths)} tokens) {ms:.2f} ms = {3 * flops / ms / 1e9:.0f} TFLOP/s useful")


@torch.inference_mode()
def profile_asr(size: str) -> None:
    cfg = ASR_PRESETS[size]
    model = build_model(lambda: SpeechRecognizer(cfg), CUDA, torch.bfloat16, seed=0)
    runner = AsrRunner(model, max_batch=8, max_positions=94, use_graphs=True)
    runner.capture()
    say(f"== asr {size}: {runner.graph_count} graphs captured in {runner.capture_s:.1f} s")
    log_mel = LogMel(cfg.n_mels, CUDA)
    clips = [load_audio(p.read_bytes()) for p in sorted((ROOT / "bench_plugin/data/asr").glob("*.wav"))][:8]
    mels = [log_mel(torch.from_numpy(c.samples).to(CUDA)) for c in clips]
    frames = torch.tensor([m.shape[-1] for m in mels], device=CUDA)
    mel = torch.stack([torch.nn.functional.pad(m, (0, int(frames.max()) - m.shape[-1])) for m in mels])
    mel = mel.to(torch.bfloat16)
    counts = [max(1, round(3 * c.duration_s)) for c in clips]
    encode_ms = cuda_ms(lambda: model.encoder(mel, frames))
    total_ms = cuda_ms(lambda: runner.transcribe(mel, frames, counts))
    steps = 3 + max(counts)
    say(f"audio {sum(c.duration_s for c in clips):.1f} s in 8 clips: encoder {encode_ms:.2f} ms, transcription "
        f"{total_ms:.2f} ms ({(total_ms - encode_ms) / steps:.3f} ms per decoder step, {steps} steps)")
    top_kernels(lambda: runner.transcribe(mel, frames, counts), f"asr {size} batch 8 (graphs)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("efficiency-results"))
    parser.add_argument("--llm", default="8b")
    parser.add_argument("--embedding", default="large")
    parser.add_argument("--asr", default="large")
    parser.add_argument("--copy-gb-s", type=float, default=4300.0, help="measured copy bandwidth for the bound")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("server_profile: needs a CUDA device", file=sys.stderr)
        return 2
    configure_torch(None, CUDA)
    args.out.mkdir(parents=True, exist_ok=True)
    for name, fn in (("llm", lambda: profile_llm(args.llm, args.copy_gb_s)),
                     ("embedding", lambda: profile_embedding(args.embedding)), ("asr", lambda: profile_asr(args.asr))):
        try:
            fn()
        except Exception as exc:  # keep profiling the other classes; the output says what failed
            say(f"== {name} FAILED: {exc!r}")
        gc.collect()  # the model and its graphs are gone with fn's frame: give their memory back
        torch.cuda.empty_cache()
        (args.out / "profile.txt").write_text("\n".join(LINES) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
