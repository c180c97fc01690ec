"""Helpers for the reference-server tests: real server processes, SSE reading, WAV writing."""

from __future__ import annotations

import asyncio
import io
import json
import os
import signal
import socket
import subprocess
import sys
import time
import wave
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np
import requests

TORCH_FLAGS = ["--size", "tiny", "--threads", "1", "--device", "cpu"]
SYNTHETIC_TTFT_MS = 80.0
SYNTHETIC_ITL_MS = 20.0
SYNTHETIC_LATENCY_MS = 40.0
"""The session synthetic server's configured latencies (conftest.synthetic_server)."""


ROOT = Path(__file__).resolve().parents[2]
READY_TIMEOUT_S = 60.0


def free_port() -> int:
    """A TCP port that was free a moment ago on loopback."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class ServerProcess:
    """One ``python -m bench_plugin.servers`` process on a free loopback port."""

    def __init__(self, kind: str, args: list[str], log_dir: Path) -> None:
        self.kind = kind
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.stdout_path = log_dir / f"{kind}-{self.port}.out"
        cmd = [sys.executable, "-m", "bench_plugin.servers", kind, "--port", str(self.port), *args]
        env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
        with open(self.stdout_path, "wb") as out:
            self.proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)

    def output(self) -> str:
        """Everything the server printed so far."""
        return self.stdout_path.read_text(errors="replace")

    def health(self) -> int | None:
        """Status of GET /health, or None while nothing listens."""
        try:
            return requests.get(self.url + "/health", timeout=2).status_code
        except requests.ConnectionError:
            return None

    def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> float:
        """Block until /health is 200; returns the seconds it took."""
        start = time.monotonic()
        while time.monotonic() - start < timeout:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.kind} server exited early:\n{self.output()}")
            if self.health() == 200:
                return time.monotonic() - start
            time.sleep(0.05)
        raise TimeoutError(f"{self.kind} server not ready after {timeout} s:\n{self.output()}")

    def stop(self, timeout: float = 5.0) -> int:
        """SIGTERM, wait, SIGKILL if needed; returns the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode



StartServer = Callable[..., ServerProcess]
"""The start_server fixture: starts a per-test server of a kind with flags (stopped at test end)."""

def post(server: ServerProcess, path: str, body: Any = None, **kwargs: Any) -> requests.Response:
    """POST JSON (or raw ``data=``) to the server."""
    if body is not None:
        kwargs["json"] = body
    return requests.post(server.url + path, timeout=30, **kwargs)


def assert_openai_error(resp: requests.Response, status: int, param: str | None = None) -> dict[str, Any]:
    """Check an OpenAI-style error reply and return its ``error`` object."""
    assert resp.status_code == status, resp.text
    assert resp.headers["Content-Type"].startswith("application/json")
    err = resp.json()["error"]
    assert set(err) == {"message", "type", "param", "code"}
    assert isinstance(err["message"], str) and err["message"]
    assert err["type"] == ("server_error" if status >= 500 else "invalid_request_error")
    if param is not None:
        assert err["param"] == param, err
    return dict(err)


@dataclass
class SseResult:
    """A streamed reply: raw body, data payloads with client arrival times, timings."""

    status: int
    content_type: str
    raw: bytes
    events: list[tuple[float, str]] = field(default_factory=list)  # (seconds since send, data)
    sent_at: float = 0.0

    def json_events(self) -> list[dict[str, Any]]:
        """Decoded JSON payloads (everything but ``[DONE]``)."""
        return [json.loads(d) for _, d in self.events if d != "[DONE]"]


async def stream_sse_async(session: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> SseResult:
    """POST ``body`` and read the SSE reply line by line, timing each data line."""
    sent = time.perf_counter()
    async with session.post(url, json=body) as resp:
        result = SseResult(resp.status, resp.headers.get("Content-Type", ""), b"", sent_at=time.time())
        chunks = []
        while line := await resp.content.readline():
            chunks.append(line)
            if line.startswith(b"data: "):
                result.events.append((time.perf_counter() - sent, line[6:].rstrip(b"\n").decode()))
        result.raw = b"".join(chunks)
    return result


def stream_sse(url: str, body: dict[str, Any]) -> SseResult:
    """Synchronous wrapper of :func:`stream_sse_async` for one request."""

    async def one() -> SseResult:
        async with aiohttp.ClientSession() as session:
            return await stream_sse_async(session, url, body)

    return asyncio.run(one())


def make_wav(seconds: float, rate: int = 8000, channels: int = 2, width: int = 2) -> bytes:
    """A sine-plus-noise PCM WAV file of the given length and format."""
    n = round(seconds * rate)
    t = np.arange(n) / rate
    rng = np.random.default_rng(0)
    signal_ = 0.3 * np.sin(2 * np.pi * 440 * t) + 0.05 * rng.standard_normal(n)
    pcm = (np.clip(signal_, -1, 1) * 32767).astype("<i2")
    frames = np.repeat(pcm[:, None], channels, axis=1)
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(width)
        w.setframerate(rate)
        w.writeframes(frames.tobytes())
    return buf.getvalue()


def metric_samples(text: str, name: str) -> dict[str, float]:
    """Samples of one metric family from Prometheus text: 'name{labels}' -> value."""
    out = {}
    for line in text.splitlines():
        if line.startswith(name):
            key, value = line.rsplit(" ", 1)
            out[key] = float(value)
    return out
