"""Benchmark: how close each reference server comes to the GPU's limits at saturation.

    python benchmarks/server_efficiency.py --out DIR [--llm 8b,1b] [--embedding large] [--asr large]

On a CUDA machine, in one process: measures the two ceilings first (device-to-device copy
bandwidth, counting bytes read plus written, and a bf16 8192^3 matrix product), then for each
server class and size starts the real server (``python -m bench_plugin.servers``) on the GPU,
drives it over HTTP with a closed loop of concurrent requests (benchmarks/efficiency_load.py)
and reports, from the measured window only:

- llm, at each concurrency B (1/8/32/64, 32-token prompts, 96 tokens out), then at B=32 with
  768-token prompts: the median gap between streamed tokens (= one decode step at batch B),
  tokens/s, and the step's floor: bytes a step must read (every weight but the embedding table,
  plus the KV window the step attends over) / copy bandwidth;
- embedding: inputs/s and useful TFLOP/s (real tokens only) against the matmul rate;
- asr: audio seconds per second and useful TFLOP/s;
- for every phase: NVML GPU and memory-controller utilisation, and the server's mean batch size.

Writes efficiency.json (updated after every phase, so a run cut short keeps what it measured)
and efficiency.md under --out, and prints the table last.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import torch
from efficiency_load import NvmlSampler, Phase, asr_request, closed_loop, embedding_request, llm_request

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench_plugin.servers.api_audio import tokens_for_duration  # noqa: E402
from bench_plugin.servers.asr_model import asr_flops  # noqa: E402
from bench_plugin.servers.audio import load_audio  # noqa: E402
from bench_plugin.servers.embedding_model import encoder_flops  # noqa: E402
from bench_plugin.servers.mel import n_frames  # noqa: E402
from bench_plugin.servers.presets import ASR_PRESETS, EMBEDDING_PRESETS, LLM_PRESETS, LlmConfig  # noqa: E402

PORT = 18431
LLM_PROMPT_WORDS = 32
LLM_MAX_TOKENS = 96  # positions stay under 128: every step reads a 128-position KV window
EMBEDDING_INPUTS = 16  # inputs per request, as in scenarios/day19-h200.yaml
EMBEDDING_WORDS = (64, 256)


def ceilings(device: torch.device) -> dict[str, float]:
    """Copy bandwidth (GB/s, read + write) and bf16 matmul rate (TFLOP/s), medians of timed repeats.

    Random data (zeros run faster), 4 GiB copied (far past the 60 MB L2), 8192^3 products.
    A CPU run (a smoke test of this script) uses small sizes and wall-clock timing.
    """
    cuda = device.type == "cuda"

    def timed(fn: Any, repeats: int) -> float:
        for _ in range(3):
            fn()
        times = []
        for _ in range(repeats):
            if cuda:
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                fn()
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end) / 1e3)
            else:
                began = time.perf_counter()
                fn()
                times.append(time.perf_counter() - began)
        return sorted(times)[len(times) // 2]

    def copy_gb_s(elements: int) -> float:
        src = torch.randn(elements, device=device, dtype=torch.float32)
        dst = torch.empty_like(src)
        return 2 * 4 * elements / timed(lambda: dst.copy_(src), 20) / 1e9

    def matmul_tflops(n: int) -> float:
        a, b = (torch.randn(n, n, device=device, dtype=torch.bfloat16) for _ in range(2))
        return 2 * n**3 / timed(lambda: a @ b, 20) / 1e12

    result = {"copy_gb_s": round(copy_gb_s((1 << 30) if cuda else (1 << 24)), 1),
              "matmul_tflops": round(matmul_tflops(8192 if cuda else 512), 3)}
    if cuda:
        torch.cuda.empty_cache()
    return result


class Server:
    """One reference server process on the GPU; its output goes to a log file."""

    device = "cuda"

    def __init__(self, kind: str, args: list[str], log: Path) -> None:
        self.url = f"http://127.0.0.1:{PORT}"
        self.log = log
        env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
        cmd = [sys.executable, "-m", "bench_plugin.servers", kind, "--port", str(PORT), "--device", self.device, *args]
        with open(log, "wb") as out:
            self.proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
        self.started = time.perf_counter()

    def wait_ready(self, timeout: float = 240.0) -> float:
        """Seconds until /health answered 200; raises with the log if it exited or timed out."""
        while time.perf_counter() - self.started < timeout:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited: {self.log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=2) as resp:
                    if resp.status == 200:
                        return time.perf_counter() - self.started
            except OSError:
                pass  # not listening yet, or 503 while loading
            time.sleep(0.2)
        raise TimeoutError(f"server not ready: {self.log.read_text()[-3000:]}")

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 20 s."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def log_line(self, marker: str) -> str | None:
        """The server's last log line containing ``marker``, if any."""
        lines = [ln for ln in self.log.read_text().splitlines() if marker in ln]
        return lines[-1] if lines else None

    def decode_line(self) -> str | None:
        """The server's line about CUDA graph capture, if it printed one."""
        return self.log_line("decode: cuda graphs")


def llm_step_bytes(cfg: LlmConfig, batch: int, window: int) -> int:
    """bf16 bytes one decode step reads: weights except the embedding table, plus the KV window."""
    hd, kv = cfg.head_dim, cfg.n_kv_heads
    per_layer = cfg.d_model * (cfg.n_heads + 2 * kv) * hd + cfg.n_heads * hd * cfg.d_model
    per_layer += 3 * cfg.d_model * cfg.ffn_dim + 2 * cfg.d_model
    weights = cfg.n_layers * per_layer + cfg.d_model + cfg.vocab_size * cfg.d_model
    return 2 * weights + batch * window * 2 * cfg.n_layers * kv * hd * 2


def bucket(n: int) -> int:
    """The decode batch bucket the engine pads ``n`` active sequences to (powers of two)."""
    return 1 << max(0, (n - 1).bit_length())


# Words drawn from a fixed vocabulary, as the load generator's are (bench_plugin.scenario.request_sets): the
# servers' tokenizer caches word ids, so a million distinct words would measure hashing instead.
VOCABULARY = [f"w{i}" for i in range(4096)]


def _words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(VOCABULARY) for _ in range(n))


def run_phase(server: Server, concurrency: int, request: Any, args: argparse.Namespace, nvml: Any) -> Phase:
    return asyncio.run(closed_loop(server.url, concurrency, args.warm_s, args.measure_s, request, nvml))


def bench_llm(size: str, args: argparse.Namespace, ceil: dict[str, float], nvml: Any, out: Path) -> dict[str, Any]:
    cfg = LLM_PRESETS[size]
    max_batch = max(args.llm_batches)
    server = Server("llm", ["--size", size, "--max-batch-size", str(max_batch), "--max-model-len", "1024"],
                    out / f"server-llm-{size}.log")
    result: dict[str, Any] = {"class": "llm", "size": size, "phases": []}
    try:
        result["ready_s"] = round(server.wait_ready(), 1)
        result["capture"] = server.decode_line()
        rng = random.Random(1)
        phases = [(batch, LLM_PROMPT_WORDS, LLM_MAX_TOKENS) for batch in args.llm_batches]
        if args.llm_long_prompt:  # the day19-h200 kind of context: the KV window read grows to 1024
            phases.append((32, args.llm_long_prompt, 128))
        for batch, prompt_words, max_tokens in phases:
            prompts = [_words(rng, prompt_words) for _ in range(256)]
            phase = run_phase(server, batch, llm_request(server.url, prompts, max_tokens), args, nvml)
            row = phase.summary()
            window = max(64, 1 << (prompt_words + max_tokens - 1).bit_length())  # the engine's window bucket
            step_bytes = llm_step_bytes(cfg, bucket(min(batch, max_batch)), window)
            bound_ms = step_bytes / (ceil["copy_gb_s"] * 1e9) * 1e3
            weights_ms = llm_step_bytes(cfg, 0, 0) / (ceil["copy_gb_s"] * 1e9) * 1e3
            row.update(concurrency=batch, prompt_tokens=prompt_words, max_tokens=max_tokens, window=window,
                       step_gb=round(step_bytes / 1e9, 3), bound_ms=round(bound_ms, 3),
                       weights_only_bound_ms=round(weights_ms, 3))
            if "itl_p50_ms" in row:
                row["share_of_bound"] = round(bound_ms / row["itl_p50_ms"], 3)
                row["achieved_gb_s"] = round(step_bytes / (row["itl_p50_ms"] / 1e3) / 1e9, 1)
            result["phases"].append(row)
            print(f"llm {size} B={batch} prompt={prompt_words}: {json.dumps(row)}", flush=True)
    finally:
        server.stop()
    return result


def bench_embedding(size: str, args: argparse.Namespace, ceil: dict[str, float], nvml: Any,
                    out: Path) -> dict[str, Any]:
    cfg = EMBEDDING_PRESETS[size]
    rng = random.Random(2)
    batches = []
    for _ in range(64):
        lengths = [rng.randint(*EMBEDDING_WORDS) for _ in range(EMBEDDING_INPUTS)]
        batches.append(([_words(rng, n) for n in lengths], encoder_flops(cfg, lengths)))
    result: dict[str, Any] = {"class": "embedding", "size": size, "phases": []}
    for max_batch, pipelining in [(b, p) for p in args.embedding_pipelining for b in args.embedding_max_batch]:
        flags = ["--max-batch-size", str(max_batch)] if max_batch else []
        flags += [] if pipelining == "on" else ["--no-pipelining"]
        server = Server("embedding", ["--size", size, *flags],
                        out / f"server-embedding-{size}-{max_batch}-{pipelining}.log")
        try:
            ready = server.wait_ready()
            phase = run_phase(server, args.embedding_concurrency, embedding_request(server.url, batches), args, nvml)
            row = phase.summary()
            row.update(max_batch_size=max_batch or "default", pipelining=pipelining,
                       concurrency=args.embedding_concurrency, ready_s=round(ready, 1),
                       attention=server.log_line("embedding attention"))
            if "achieved_tflops" in row:
                row["share_of_matmul"] = round(row["achieved_tflops"] / ceil["matmul_tflops"], 3)
            result["phases"].append(row)
            print(f"embedding {size} max_batch={max_batch} pipelining={pipelining}: {json.dumps(row)}", flush=True)
        finally:
            server.stop()
    return result


def bench_asr(size: str, args: argparse.Namespace, ceil: dict[str, float], nvml: Any, out: Path) -> dict[str, Any]:
    cfg = ASR_PRESETS[size]
    clips = []
    for path in sorted((ROOT / "bench_plugin/data/asr").glob("*.wav")):
        wav = path.read_bytes()
        audio = load_audio(wav)
        n_tokens = tokens_for_duration(audio.duration_s, 3)
        clips.append((wav, audio.duration_s, asr_flops(cfg, [n_frames(audio.samples.size)], [n_tokens])))
    result: dict[str, Any] = {"class": "asr", "size": size, "phases": []}
    for max_batch in args.asr_max_batch:
        server = Server("asr", ["--size", size, "--max-batch-size", str(max_batch)],
                        out / f"server-asr-{size}-{max_batch}.log")
        try:
            ready = server.wait_ready()
            concurrency = 2 * max_batch
            phase = run_phase(server, concurrency, asr_request(server.url, clips), args, nvml)
            row = phase.summary()
            row.update(max_batch_size=max_batch, concurrency=concurrency, ready_s=round(ready, 1),
                       capture=server.decode_line())
            if "achieved_tflops" in row:
                row["share_of_matmul"] = round(row["achieved_tflops"] / ceil["matmul_tflops"], 3)
            result["phases"].append(row)
            print(f"asr {size} max_batch={max_batch}: {json.dumps(row)}", flush=True)
        finally:
            server.stop()
    return result


def markdown(report: dict[str, Any]) -> str:
    """The results as one markdown table per class."""
    env, ceil = report["environment"], report["ceilings"]
    lines = [f"Measured {env['date']} on {env['gpu']} (driver {env['driver']}), torch {env['torch']}, "
             f"Python {env['python']}. Ceilings: copy {ceil['copy_gb_s']} GB/s, bf16 matmul "
             f"{ceil['matmul_tflops']} TFLOP/s.", ""]
    for res in report["results"]:
        lines.append(f"**{res['class']} {res['size']}**" + (f" ({res['capture']})" if res.get("capture") else ""))
        lines.append("")
        if res["class"] == "llm":
            lines += ["| concurrency | prompt + output | KV window | step p50 ms | bound ms | share of bound | tok/s "
                      "| GPU util % | mem util % | server batch |", "|---|---|---|---|---|---|---|---|---|---|"]
            for p in res["phases"]:
                lines.append(f"| {p['concurrency']} | {p['prompt_tokens']} + {p['max_tokens']} | {p['window']} | "
                             f"{p.get('itl_p50_ms')} | {p['bound_ms']} | "
                             f"{p.get('share_of_bound')} | {p.get('tokens_per_s')} | {p['gpu_util_pct']} | "
                             f"{p['mem_util_pct']} | {p['server_batch_mean']} |")
        else:
            rate = "inputs_per_s" if res["class"] == "embedding" else "audio_s_per_s"
            lines += [f"| max batch | concurrency | {rate} | TFLOP/s | share of matmul | GPU util % | mem util % "
                      "| server batch |", "|---|---|---|---|---|---|---|---|"]
            for p in res["phases"]:
                batch = f"{p['max_batch_size']}" + (f", pipelining {p['pipelining']}" if "pipelining" in p else "")
                lines.append(f"| {batch} | {p['concurrency']} | {p.get(rate)} | "
                             f"{p.get('achieved_tflops')} | {p.get('share_of_matmul')} | {p['gpu_util_pct']} | "
                             f"{p['mem_util_pct']} | {p['server_batch_mean']} |")
            notes = {p.get("attention") or p.get("capture") for p in res["phases"]} - {None}
            lines += ["", *sorted(f"- {note}" for note in notes)]
        lines.append("")
    return "\n".join(lines)


def _csv(kind: type) -> Any:
    return lambda text: [kind(x) for x in text.split(",") if x]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("efficiency-results"))
    parser.add_argument("--llm", type=_csv(str), default=["8b", "1b"], help="LLM sizes, comma-separated")
    parser.add_argument("--llm-batches", type=_csv(int), default=[1, 8, 32, 64])
    parser.add_argument("--llm-long-prompt", type=int, default=768, help="prompt words of a last B=32 phase (0: none)")
    parser.add_argument("--embedding", type=_csv(str), default=["large"])
    parser.add_argument("--embedding-max-batch", type=_csv(int), default=[0, 32], help="0: the server default")
    parser.add_argument("--embedding-pipelining", type=_csv(str), default=["on"],
                        help="on, off or on,off (side by side): the server's --no-pipelining")
    parser.add_argument("--embedding-concurrency", type=int, default=64, help="requests of 16 inputs in flight")
    parser.add_argument("--asr", type=_csv(str), default=["large"])
    parser.add_argument("--asr-max-batch", type=_csv(int), default=[8, 32])
    parser.add_argument("--warm-s", type=float, default=1.5)
    parser.add_argument("--measure-s", type=float, default=4.0)
    parser.add_argument("--device", default="cuda", help="cuda; cpu only smoke-tests this script (tiny sizes)")
    args = parser.parse_args()
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("server_efficiency: no CUDA device here (use --device cpu for a smoke test)", file=sys.stderr)
        return 2
    Server.device = args.device
    args.out.mkdir(parents=True, exist_ok=True)
    nvml: NvmlSampler | None = None
    driver = "unknown"
    if device.type == "cuda":
        try:
            nvml = NvmlSampler()
            driver = nvml.driver()
        except Exception as exc:  # no pynvml or no NVML: say so, and report no utilisation
            print(f"server_efficiency: NVML unavailable ({exc!r}): no utilisation figures", flush=True)
    report: dict[str, Any] = {
        "environment": {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                        "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
                        "driver": driver, "torch": torch.__version__,
                        "python": platform.python_version(), "cpus": os.cpu_count()},
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "results": [],
    }  # fmt: skip
    report["ceilings"] = ceilings(device)
    print(f"ceilings: {report['ceilings']}", flush=True)
    plan = ([(bench_llm, s) for s in args.llm] + [(bench_embedding, s) for s in args.embedding]
            + [(bench_asr, s) for s in args.asr])
    for bench, size in plan:
        try:
            report["results"].append(bench(size, args, report["ceilings"], nvml, args.out))
        except Exception as exc:  # one class failing must not lose the others; the report says so
            report["results"].append({"class": bench.__name__, "size": size, "error": repr(exc), "phases": []})
            print(f"{bench.__name__} {size} FAILED: {exc!r}", flush=True)
        (args.out / "efficiency.json").write_text(json.dumps(report, indent=2))
    table = markdown({**report, "results": [r for r in report["results"] if "error" not in r]})
    (args.out / "efficiency.md").write_text(table)
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
