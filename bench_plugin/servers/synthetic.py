"""The ``synthetic`` calibration server: OpenAI routes with known, exact latencies.

No model and no torch: every request is timed from handler entry (after its body was
read) with ``time.time()`` and answered by sleeping to absolute deadlines, so delays
never accumulate scheduling error and a load generator's measurements can be checked
against ground truth. Concurrency is unlimited (no queueing). A seeded RNG keyed by
the request sequence number (or, with ``--slow-by content``, by the request's content,
so the same request is slow in every run whatever else the server was sent) marks a
``--slow-fraction`` of requests slow, adding ``--slow-extra-ms`` to their TTFT (llm
routes) or total latency (others). With
``--timing-log`` each finished request appends one JSON line with its server-side
timings; ``status`` is the HTTP status, or 499 when the client went away mid-stream.
With ``--shared-device PATH`` every request first queues on a simulated device shared with the
other synthetic servers of that PATH (servers/device.py: the contention simulator), and its
latency model starts when the device lets it go. With ``--max-concurrency N`` a request first waits for
one of N slots: the server's own queue. The time before a slot is the request's queue time, the rest
(the device, then the latency model) its compute time; both are exported as the reference servers export
them (``bench_server_queue_time_seconds``, ``bench_server_compute_time_seconds``, and TEI's ``x-queue-time``
and ``x-inference-time`` headers on a reply that is not streamed), so the contention simulator is a server
whose queueing and compute are known.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import itertools
import json
import random
import sys
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np
from aiohttp import web

from . import api_audio, api_embeddings, api_text
from .app import CLIENT_GONE_STATUS, ApiError, ClientDisconnected, ServerState, create_app, read_json_object, serve
from .device import SimulatedDevice
from .metrics import INFERENCE_TIME_HEADER, QUEUE_TIME_HEADER, ServerMetrics
from .presets import RESERVED_TOKENS
from .tokenizer import WordTokenizer, count_words

_VOCAB = 32000


@dataclass
class RequestRecord:
    """Server-side timeline of one request (epoch seconds from ``time.time()``)."""

    seq: int
    endpoint: str
    received_s: float
    slow: bool
    started_s: float = 0.0
    """When service began: received_s, later when --max-concurrency made it queue, or when the shared device
    (--shared-device) let it go."""
    first_token_s: float | None = None
    last_token_s: float | None = None
    end_s: float | None = None
    reply_s: float | None = None
    """When a streamed reply's last token had been written and only its closing chunks were left to write: its
    e2e ends there, since a client may read them and stop its clock before the server, back from the write,
    takes ``end_s`` (4.6 ms later, once, on a busy host). None for a reply written whole, after the handler:
    its record ends before the write, so ``end_s`` is already no later than a client can see the end."""
    output_tokens: int = 0
    status: int = 500
    request_id: str | None = None
    """The client's X-Request-Id header, where it sent one (bench_plugin's users do)."""
    device_s: tuple[float, float] | None = None
    """When the shared device (--shared-device) served it: (start, end); None without one."""
    scheduled_s: float | None = None
    """When it left the server's queue (a --max-concurrency slot freed; at once without one): its queue time
    ends there and its compute time (the shared device's wait and service, then its latency model) begins."""
    timed_s: float | None = None
    """When the server took its queue and compute times (its metrics, and the headers of a reply not streamed):
    its compute time ends there, a moment before the reply is written and the record ends (``end_s``)."""

    def to_json(self) -> dict[str, Any]:
        """The timing-log line for this request."""
        end = self.end_s if self.end_s is not None else time.time()
        first = self.first_token_s
        tpot = None
        if first is not None and self.output_tokens > 1:  # up to the last token, as the clients measure it
            tpot = ((self.last_token_s or end) - first) * 1000.0 / (self.output_tokens - 1)
        return {
            "seq": self.seq,
            "request_id": self.request_id,
            "endpoint": self.endpoint,
            "received_s": self.received_s,
            "first_token_s": first,
            "last_token_s": self.last_token_s,
            "end_s": end,
            "queue_ms": (self.started_s - self.received_s) * 1000.0,
            "ttft_ms": None if first is None else (first - self.received_s) * 1000.0,
            "e2e_ms": ((self.reply_s or end) - self.received_s) * 1000.0,
            "tpot_ms": tpot,
            "output_tokens": self.output_tokens,
            "slow": self.slow,
            "status": self.status,
            "device_start_s": None if self.device_s is None else self.device_s[0],
            "device_end_s": None if self.device_s is None else self.device_s[1],
            "scheduled_s": self.scheduled_s,
            "timed_s": self.timed_s,
            "reply_s": self.reply_s,
        }


async def sleep_until(deadline: float) -> None:
    """Sleep until the epoch time ``deadline`` (returns at once if it has passed)."""
    delay = deadline - time.time()
    if delay > 0:
        await asyncio.sleep(delay)


def fake_embedding(item: api_embeddings.EmbeddingInput, dim: int) -> np.ndarray:
    """A deterministic unit vector derived from the input (same input, same vector)."""
    key = item if isinstance(item, str) else " ".join(map(str, item))
    seed = int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "little")
    vector = np.random.default_rng(seed).standard_normal(dim).astype(np.float32)
    result: np.ndarray = vector / np.linalg.norm(vector)
    return result


class SyntheticServer:
    """Routes, delay model and timing log of the synthetic server."""

    def __init__(self, args: argparse.Namespace, state: ServerState) -> None:
        self.args = args
        self.state = state
        self.metrics = state.metrics
        self.tokenizer = WordTokenizer(_VOCAB)
        self._seq = itertools.count()
        limit = getattr(args, "max_concurrency", 0)
        self._slots = asyncio.Semaphore(limit) if limit > 0 else None
        self._log: IO[str] | None = open(args.timing_log, "a", buffering=1) if args.timing_log else None  # noqa: SIM115
        device = getattr(args, "shared_device", None)
        self._device = SimulatedDevice(Path(device), args.service_s, args.seed) if device else None

    # -- Backend protocol: readiness is just a timer. -------------------------------
    def start(self, on_ready: Callable[[], object], on_error: Callable[[BaseException], object]) -> None:
        """Report ready after ``--ready-after-s`` (called on the event loop); with ``--startup-device-ms``, first take
        the shared device for that long, as a cold start does."""
        hold_ms = getattr(self.args, "startup_device_ms", 0.0)
        if self._device is not None and hold_ms > 0:
            start, end = self._device.hold(hold_ms / 1000.0)
            print(f"synthetic: holding the shared device {start:.3f}-{end:.3f} (startup)", file=sys.stderr, flush=True)
        asyncio.get_running_loop().call_later(self.args.ready_after_s, on_ready)

    def stop(self) -> None:
        """Let go of the simulated device (the timing log is line-buffered: every line is already written)."""
        if self._device is not None:
            self._device.close()

    # -- bookkeeping ----------------------------------------------------------------
    def _begin(self, endpoint: str, content: bytes, request_id: str | None) -> RequestRecord:
        now = time.time()
        seq = next(self._seq)
        if getattr(self.args, "slow_by", "sequence") == "content":
            key = int.from_bytes(hashlib.blake2b(content, digest_size=8).digest(), "little")
        else:
            key = seq
        slow = random.Random(self.args.seed * 1_000_003 + key).random() < self.args.slow_fraction
        return RequestRecord(seq, endpoint, now, slow, request_id=request_id)

    def _finish(self, rec: RequestRecord) -> None:
        rec.end_s = time.time()
        if rec.scheduled_s is not None:
            self.metrics.in_flight.dec()
        if self._log is not None:
            self._log.write(json.dumps(rec.to_json()) + "\n")

    def _timed_parts(self, rec: RequestRecord, response: web.StreamResponse) -> None:
        """Observe a served request's queue and compute time; a reply not yet sent (not streamed) says them in
        its headers, as the reference servers do (servers/metrics.py)."""
        now = rec.timed_s = time.time()
        scheduled = rec.scheduled_s if rec.scheduled_s is not None else rec.received_s
        queued, computing = scheduled - rec.received_s, now - scheduled
        self.metrics.queue_time.observe(queued)
        self.metrics.compute_time.observe(computing)
        if not response.prepared:
            response.headers[QUEUE_TIME_HEADER] = f"{queued * 1000.0:.3f}"
            response.headers[INFERENCE_TIME_HEADER] = f"{computing * 1000.0:.3f}"

    def _extra_s(self, rec: RequestRecord) -> float:
        return self.args.slow_extra_ms / 1000.0 if rec.slow else 0.0

    async def _timed(
        self, request: web.Request, endpoint: str, work: Callable[[RequestRecord], Awaitable[web.StreamResponse]],
        content: bytes,
    ) -> web.StreamResponse:
        """Run ``work`` under a new record; log it with its final status whatever happens."""
        rec = self._begin(endpoint, content, request.headers.get("X-Request-Id"))
        try:
            if self._slots is not None:  # the server's own queue
                self.metrics.queue_depth.inc()
                try:
                    await self._slots.acquire()
                finally:
                    self.metrics.queue_depth.dec()
            try:
                rec.scheduled_s = time.time() if self._slots is not None else rec.received_s
                self.metrics.in_flight.inc()
                rec.started_s = rec.scheduled_s
                if self._device is not None:  # then the shared device; the latency model runs once it lets go
                    rec.device_s = self._device.admit(rec.scheduled_s)
                    await sleep_until(rec.device_s[1])
                    rec.started_s = rec.device_s[1]
                response = await work(rec)
            finally:
                if self._slots is not None:
                    self._slots.release()
            rec.status = response.status
            if response.status == 200:
                self._timed_parts(rec, response)
            return response
        except ApiError as exc:
            rec.status = exc.status
            raise
        except (ClientDisconnected, ConnectionResetError, asyncio.CancelledError):
            rec.status = CLIENT_GONE_STATUS
            raise
        finally:
            self._finish(rec)

    # -- text generation ------------------------------------------------------------
    async def _tokens(self, rec: RequestRecord, n: int, streamed: bool) -> AsyncGenerator[str, None]:
        """Yield ``n`` pieces: the first at received + TTFT, then one every ITL; a stream's ``reply_s`` once the
        last is written (asked for the next, which does not come)."""
        first_at = rec.started_s + self.args.ttft_ms / 1000.0 + self._extra_s(rec)
        span = self.tokenizer.vocab_size - RESERVED_TOKENS
        for i in range(n):
            await sleep_until(first_at + i * self.args.itl_ms / 1000.0)
            now = time.time()
            if i == 0:
                rec.first_token_s = now
            rec.last_token_s = now
            rec.output_tokens += 1
            self.metrics.generated_tokens.inc()
            yield self.tokenizer.decode_token(RESERVED_TOKENS + (rec.seq * 31 + i) % span, i == 0)
        if streamed:
            rec.reply_s = time.time()

    async def _text(self, request: web.Request, endpoint: str, chat: bool) -> web.StreamResponse:
        content = await request.read()  # the clock starts once the body is in

        async def work(rec: RequestRecord) -> web.StreamResponse:
            body = await read_json_object(request)
            self.state.check_model(body)
            req = api_text.parse_chat(body) if chat else api_text.parse_completion(body)
            pieces = self._tokens(rec, req.max_tokens, req.stream)
            return await api_text.respond(request, req, self.state.model_name, count_words(req.prompt), pieces)

        return await self._timed(request, endpoint, work, content)

    async def completions(self, request: web.Request) -> web.StreamResponse:
        """POST /v1/completions."""
        return await self._text(request, "/v1/completions", chat=False)

    async def chat(self, request: web.Request) -> web.StreamResponse:
        """POST /v1/chat/completions."""
        return await self._text(request, "/v1/chat/completions", chat=True)

    # -- embeddings and transcriptions ----------------------------------------------
    def _deadline(self, rec: RequestRecord) -> float:
        return rec.started_s + self.args.latency_ms / 1000.0 + self._extra_s(rec)

    async def embeddings(self, request: web.Request) -> web.StreamResponse:
        """POST /v1/embeddings: deterministic vectors after ``--latency-ms``."""
        content = await request.read()

        async def work(rec: RequestRecord) -> web.StreamResponse:
            body = await read_json_object(request)
            self.state.check_model(body)
            req = api_embeddings.parse_embeddings(body, None)
            api_embeddings.check_dimensions(req, self.args.embedding_dim)
            vectors = [fake_embedding(x, self.args.embedding_dim) for x in req.inputs]
            n_tokens = sum(count_words(x) if isinstance(x, str) else len(x) for x in req.inputs)
            # Build the reply first so serialisation is not added on top of the latency.
            response = web.json_response(
                api_embeddings.embeddings_response(req, vectors, self.state.model_name, n_tokens)
            )
            await sleep_until(self._deadline(rec))
            return response

        return await self._timed(request, "/v1/embeddings", work, content)

    async def transcriptions(self, request: web.Request) -> web.StreamResponse:
        """POST /v1/audio/transcriptions: ``ceil(seconds * tps)`` words after ``--latency-ms``."""
        try:
            form: api_audio.Form | ApiError = await api_audio.read_form(request)
        except ApiError as exc:
            form = exc  # still timed and logged like any other request

        async def work(rec: RequestRecord) -> web.StreamResponse:
            if isinstance(form, ApiError):
                raise form
            req = await api_audio.parse_form(form, self.state)
            n = api_audio.tokens_for_duration(req.audio.duration_s, self.args.tokens_per_second)
            span = self.tokenizer.vocab_size - RESERVED_TOKENS
            text = self.tokenizer.decode(RESERVED_TOKENS + (rec.seq * 31 + i) % span for i in range(n))
            response = api_audio.transcription_response(req, text)
            await sleep_until(self._deadline(rec))
            rec.output_tokens = n
            self.metrics.generated_tokens.inc(n)
            return response

        upload = form.get("file") if isinstance(form, dict) else None
        return await self._timed(request, "/v1/audio/transcriptions", work,
                                 str(getattr(upload, "filename", "")).encode())


def run(args: argparse.Namespace) -> int:
    """Entry point for ``python -m bench_plugin.servers synthetic``."""
    state = ServerState("synthetic", args.model_name, "none", ServerMetrics())
    server = SyntheticServer(args, state)
    app = create_app(state)
    app.router.add_post("/v1/completions", server.completions)
    app.router.add_post("/v1/chat/completions", server.chat)
    app.router.add_post("/v1/embeddings", server.embeddings)
    app.router.add_post("/v1/audio/transcriptions", server.transcriptions)
    return serve(app, state, server, args.host, args.port)
