"""Closed-loop HTTP load and NVML sampling for benchmarks/server_efficiency.py.

Each phase keeps ``concurrency`` requests in flight on one aiohttp session for a warm-up
then a measured window, and counts only what happened inside the window: streamed tokens
by their arrival time (LLM), finished requests by their completion time (embedding, ASR).
Responses are read as bytes and never parsed as JSON: a 16-input float embedding reply
takes ~4 ms of client CPU to parse, which would make the client the bottleneck.
"""

from __future__ import annotations

import asyncio
import statistics
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp


@dataclass
class Phase:
    """What one measured window saw, client side."""

    window_s: float
    requests: int = 0  # finished inside the window
    errors: list[str] = field(default_factory=list)
    tokens: int = 0  # LLM tokens received inside the window
    gaps_s: list[float] = field(default_factory=list)  # LLM gaps between consecutive tokens of one stream
    inputs: int = 0  # embedding inputs of finished requests
    audio_s: float = 0.0  # ASR audio seconds of finished requests
    flops: float = 0.0  # useful FLOPs of finished requests
    batch_mean: float | None = None  # server-side mean of bench_server_batch_size over the window
    gpu_util_pct: float | None = None
    mem_util_pct: float | None = None

    def summary(self) -> dict[str, Any]:
        """Rates and percentiles of the window, JSON-ready."""
        gaps = sorted(self.gaps_s)
        out: dict[str, Any] = {
            "window_s": round(self.window_s, 3), "requests": self.requests, "errors": len(self.errors),
            "first_errors": self.errors[:3], "server_batch_mean": self.batch_mean,
            "gpu_util_pct": self.gpu_util_pct, "mem_util_pct": self.mem_util_pct,
        }  # fmt: skip
        if self.tokens:
            out["tokens_per_s"] = round(self.tokens / self.window_s, 1)
        if gaps:
            out["itl_p50_ms"] = round(1e3 * statistics.median(gaps), 3)
            out["itl_p90_ms"] = round(1e3 * gaps[int(0.9 * (len(gaps) - 1))], 3)
        if self.inputs:
            out["inputs_per_s"] = round(self.inputs / self.window_s, 1)
        if self.audio_s:
            out["audio_s_per_s"] = round(self.audio_s / self.window_s, 1)
        if self.flops:
            out["achieved_tflops"] = round(self.flops / self.window_s / 1e12, 1)
        return out


class NvmlSampler:
    """Device and memory-controller utilisation from NVML every 100 ms, on a thread.

    NVML's "GPU utilisation" is the share of time at least one kernel ran, not how full
    the SMs were; the memory figure is the share of time device memory was read or written.
    """

    def __init__(self, index: int = 0) -> None:
        import pynvml  # nvidia-ml-py; only on GPU hosts

        self._nvml = pynvml
        pynvml.nvmlInit()
        self._handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        self._samples: list[tuple[int, int]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def driver(self) -> str:
        """The NVIDIA driver version."""
        version = self._nvml.nvmlSystemGetDriverVersion()
        return version.decode() if isinstance(version, bytes) else str(version)

    def start(self) -> None:
        """Begin sampling (forgets earlier samples)."""
        self._samples, self._stop = [], threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(0.1):
            rates = self._nvml.nvmlDeviceGetUtilizationRates(self._handle)
            self._samples.append((rates.gpu, rates.memory))

    def stop(self) -> tuple[float | None, float | None]:
        """Stop; mean GPU and memory utilisation in percent (None without samples)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if not self._samples:
            return None, None
        return (round(statistics.mean(s[0] for s in self._samples), 1),
                round(statistics.mean(s[1] for s in self._samples), 1))


async def _batch_stats(session: aiohttp.ClientSession, url: str) -> tuple[float, float]:
    async with session.get(url + "/metrics") as resp:
        text = await resp.text()
    values = {}
    for line in text.splitlines():
        if line.startswith(("bench_server_batch_size_sum ", "bench_server_batch_size_count ")):
            key, value = line.split()
            values[key] = float(value)
    return values["bench_server_batch_size_sum"], values["bench_server_batch_size_count"]


RequestFn = Callable[[aiohttp.ClientSession, int, Phase, float, float], Awaitable[None]]


async def closed_loop(
    url: str, concurrency: int, warm_s: float, measure_s: float, request: RequestFn, nvml: NvmlSampler | None
) -> Phase:
    """Run ``request(session, i, phase, t0, t1)`` back to back on ``concurrency`` workers; measure [t0, t1)."""
    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=300)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        t0 = time.perf_counter() + warm_s
        t1 = t0 + measure_s
        phase = Phase(measure_s)
        counter = iter(range(1 << 40))

        async def worker() -> None:
            while time.perf_counter() < t1:
                try:
                    await request(session, next(counter), phase, t0, t1)
                except (TimeoutError, aiohttp.ClientError) as exc:
                    phase.errors.append(repr(exc))

        async def observer() -> None:
            await asyncio.sleep(max(0.0, t0 - time.perf_counter()))
            before = await _batch_stats(session, url)
            if nvml is not None:
                nvml.start()
            await asyncio.sleep(max(0.0, t1 - time.perf_counter()))
            if nvml is not None:
                phase.gpu_util_pct, phase.mem_util_pct = nvml.stop()
            after = await _batch_stats(session, url)
            steps = after[1] - before[1]
            phase.batch_mean = round((after[0] - before[0]) / steps, 2) if steps else None

        await asyncio.gather(observer(), *(worker() for _ in range(concurrency)))
        return phase


def llm_request(url: str, prompts: list[str], max_tokens: int) -> RequestFn:
    """A streamed completion; records token arrivals and the gaps between them."""

    async def one(session: aiohttp.ClientSession, i: int, phase: Phase, t0: float, t1: float) -> None:
        body = {"prompt": prompts[i % len(prompts)], "max_tokens": max_tokens, "stream": True}
        last: float | None = None
        async with session.post(url + "/v1/completions", json=body) as resp:
            if resp.status != 200:
                phase.errors.append(f"http {resp.status}: {(await resp.text())[:200]}")
                return
            async for line in resp.content:
                now = time.perf_counter()
                if not line.startswith(b"data: {") or b'"text":""' in line:  # [DONE], the finish chunk
                    continue
                if t0 <= now < t1:
                    phase.tokens += 1
                    if last is not None and last >= t0:
                        phase.gaps_s.append(now - last)
                last = now
        if t0 <= time.perf_counter() < t1:
            phase.requests += 1

    return one


def embedding_request(url: str, batches: list[tuple[list[str], float]]) -> RequestFn:
    """One /v1/embeddings call per item of ``batches`` (texts, their useful FLOPs), float encoding."""

    async def one(session: aiohttp.ClientSession, i: int, phase: Phase, t0: float, t1: float) -> None:
        texts, flops = batches[i % len(batches)]
        async with session.post(url + "/v1/embeddings", json={"input": texts, "encoding_format": "float"}) as resp:
            body = await resp.read()
        if resp.status != 200:
            phase.errors.append(f"http {resp.status}: {body[:200]!r}")
        elif t0 <= time.perf_counter() < t1:
            phase.requests += 1
            phase.inputs += len(texts)
            phase.flops += flops

    return one


def asr_request(url: str, clips: list[tuple[bytes, float, float]]) -> RequestFn:
    """One transcription per item of ``clips`` (WAV bytes, audio seconds, useful FLOPs)."""

    async def one(session: aiohttp.ClientSession, i: int, phase: Phase, t0: float, t1: float) -> None:
        wav, seconds, flops = clips[i % len(clips)]
        form = aiohttp.FormData()
        form.add_field("file", wav, filename="clip.wav", content_type="audio/wav")
        async with session.post(url + "/v1/audio/transcriptions", data=form) as resp:
            body = await resp.read()
        if resp.status != 200:
            phase.errors.append(f"http {resp.status}: {body[:200]!r}")
        elif t0 <= time.perf_counter() < t1:
            phase.requests += 1
            phase.audio_s += seconds
            phase.flops += flops

    return one
