"""An OpenAI-compatible test server with the quirks of real ones, each switched on by a flag.

    python tests/quirky_server.py --port PORT [--reject ignore_eos,min_tokens] [--no-done] [--no-usage]
        [--tokens-per-chunk K] [--stop-at N] [--truncate] [--models-500] [--junk] [--fail-after N]
        [--embedding-drop FIELD] [--cut-every N] [--endless slow|fast]
        [--endless-after N] [--endless-count N] [--die-after N] [--busy-for S] [--shed-above N]

What each flag copies (docs/servers.md has the servers):
- ``--reject F,G``: a 422 naming the fields when a body holds any of them, as ``transformers serve``
  answers vLLM's ``ignore_eos``/``min_tokens`` ("Unexpected fields in the request");
- ``--no-done``: the stream ends after the chunk with ``finish_reason`` and ``usage``, without
  ``data: [DONE]`` (``transformers serve``); ``--no-usage``: no usage at all (servers that ignore
  ``stream_options``); ``--tokens-per-chunk K``: K tokens a chunk (servers that batch their writes);
- ``--stop-at N``: at most N tokens, whatever ``min_tokens`` says (a server that ignores it);
- ``--truncate``: the connection closes mid-stream, no ``finish_reason`` and no ``[DONE]``;
- ``--models-500``: ``GET /v1/models`` answers 500 (``transformers serve`` with a local model path);
- ``--junk``: chat completions answer 200 with a body that is not an event stream;
- ``--fail-after N``: after N chat requests, every one gets a 400 (a server that changes under the run);
- ``--embedding-drop FIELD``: embedding items lack FIELD (``index`` or ``embedding``);
- ``--cut-every N``: every Nth embedding reply is cut off mid-body: its headers announce the whole
  body, half of it is sent, and the connection closes (a server that crashes or is killed mid-reply);
- ``--endless slow``: chat streams never end, one token every ``--itl-ms`` (a server stuck generating);
  ``--endless fast``: chat streams of 1 MB events, sent without a pause, that never end (a runaway server);
  ``--endless-after N``: the first N chat requests are answered as usual (readiness passes), then endless;
  ``--endless-count N``: only N requests are endless, those after them are answered as usual again;
- ``--die-after N``: the first N chat requests are answered, then the process exits (code 3) on the next
  one without answering it (a server that crashes after it became ready);
- ``--busy-for S``: for S seconds after it starts, every chat and embedding request gets 503 with
  ``Retry-After: 1`` (a server still loading its model, as vLLM's and TGI's front ends answer);
- ``--shed-above N``: a chat request that would make more than N in flight gets 429 with ``Retry-After: 1``
  (a server or gateway that sheds load rather than queueing it).
Tokens are ``t0 t1 ...``: the first after ``--ttft-ms``, then one chunk every ``--itl-ms``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from typing import Any

from aiohttp import web


def _chunk(model: str, content: str | None, finish: str | None = None, usage: dict[str, int] | None = None,
           role: bool = False) -> bytes:
    delta: dict[str, Any] = {"role": "assistant"} if role else {}
    if content is not None:
        delta["content"] = content
    event: dict[str, Any] = {"id": "chatcmpl-quirky", "object": "chat.completion.chunk", "created": int(time.time()),
                             "model": model, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    if usage is not None:
        event["usage"] = usage
    return f"data: {json.dumps(event)}\n\n".encode()


class Quirky:
    """The server's state: its flags and how many chat requests it has answered."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.started = time.monotonic()
        self.in_flight = 0
        self.rejected = {f for f in (args.reject or "").split(",") if f}
        self.embedding_replies = 0
        self.chats = 0

    async def models(self, request: web.Request) -> web.Response:
        if self.args.models_500:
            return web.json_response({"error": "Internal Server Error"}, status=500)
        return web.json_response({"object": "list", "data": [{"id": self.args.model, "object": "model"}]})

    async def health(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    def _refusal(self) -> web.Response | None:
        """503 while busy (--busy-for), else None."""
        if self.args.busy_for and time.monotonic() - self.started < self.args.busy_for:
            return web.json_response({"error": {"message": "model is loading", "type": "ServiceUnavailable"}},
                                     status=503, headers={"Retry-After": "1"})
        return None

    async def chat(self, request: web.Request) -> web.StreamResponse:
        refused = self._refusal()
        if refused is not None:
            return refused
        if self.args.shed_above is not None and self.in_flight >= self.args.shed_above:
            return web.json_response({"error": {"message": "too many requests", "type": "RateLimitError"}},
                                     status=429, headers={"Retry-After": "1"})
        self.in_flight += 1
        try:
            return await self._chat(request)
        finally:
            self.in_flight -= 1

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.chats += 1
        if self.args.die_after is not None and self.chats > self.args.die_after:
            print(f"quirky: dying on chat request {self.chats}", flush=True)
            os._exit(3)
        unexpected = sorted(self.rejected & set(body))
        if unexpected:
            return web.json_response({"detail": f"Unexpected fields in the request: {set(unexpected)}"}, status=422)
        if self.args.fail_after is not None and self.chats > self.args.fail_after:
            return web.json_response({"error": {"message": "model was unloaded", "type": "BadRequestError"}},
                                     status=400)
        if body.get("model") != self.args.model:
            return web.json_response({"error": {"message": f"model {body.get('model')} not found"}}, status=404)
        if self.args.junk:
            return web.Response(text="hello, this is not an event stream\n", content_type="text/plain")
        wanted = int(body.get("max_tokens") or body.get("max_completion_tokens") or 16)
        n = min(wanted, self.args.stop_at) if self.args.stop_at else wanted
        model = body["model"]
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(_chunk(model, None, role=True))
        await asyncio.sleep(self.args.ttft_ms / 1000)
        endless_until = self.args.endless_after + (self.args.endless_count or self.chats)
        if self.args.endless and self.args.endless_after < self.chats <= endless_until:
            await self._endless(response, model)
        k = self.args.tokens_per_chunk
        sent = 0
        while sent < n:
            words = " ".join(f"t{i}" for i in range(sent, min(n, sent + k)))
            sent = min(n, sent + k)
            await response.write(_chunk(model, words + " "))
            if self.args.truncate and sent >= n // 2:
                return response  # the body ends here: no finish_reason, no [DONE]
            if sent < n:
                await asyncio.sleep(self.args.itl_ms / 1000)
        usage = None
        if not self.args.no_usage and (body.get("stream_options") or {}).get("include_usage"):
            usage = {"prompt_tokens": 8, "completion_tokens": n, "total_tokens": 8 + n}
        await response.write(_chunk(model, None, "length" if n == wanted else "stop", usage))
        if not self.args.no_done:
            await response.write(b"data: [DONE]\n\n")
        return response

    async def _endless(self, response: web.StreamResponse, model: str) -> None:
        """Stream tokens for ever: until the client goes (the write fails)."""
        big = _chunk(model, "x" * (1 << 20)) if self.args.endless == "fast" else b""
        i = 0
        while True:
            if big:
                await response.write(big)
            else:
                await response.write(_chunk(model, f"t{i} "))
                await asyncio.sleep(self.args.itl_ms / 1000)
            i += 1

    async def embeddings(self, request: web.Request) -> web.Response:
        refused = self._refusal()
        if refused is not None:
            return refused
        body = await request.json()
        inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
        await asyncio.sleep(self.args.latency_ms / 1000)
        data = []
        for i, _ in enumerate(inputs):
            item: dict[str, Any] = {"object": "embedding", "embedding": [0.25, 0.5, 0.25], "index": i}
            item.pop(self.args.embedding_drop or "", None)
            data.append(item)
        reply = {"object": "list", "data": data, "model": body.get("model"),
                 "usage": {"prompt_tokens": 4, "total_tokens": 4}}
        self.embedding_replies += 1
        if self.args.cut_every and self.embedding_replies % self.args.cut_every == 0:
            whole = json.dumps(reply).encode()
            cut = web.StreamResponse(headers={"Content-Type": "application/json"})
            cut.content_length = len(whole)
            await cut.prepare(request)
            await cut.write(whole[:len(whole) // 2])
            assert request.transport is not None
            request.transport.close()
            return cut
        return web.json_response(reply)

    async def transcriptions(self, request: web.Request) -> web.Response:
        form = await request.post()
        await asyncio.sleep(self.args.latency_ms / 1000)
        text = "one two three"
        kind = str(form.get("response_format") or "json")
        if kind == "text":
            return web.Response(text=text, content_type="text/plain")
        reply: dict[str, Any] = {"text": text}
        if kind == "verbose_json":
            reply.update(language="en", duration=1.0, segments=[{"id": 0, "start": 0.0, "end": 1.0, "text": text}])
        return web.json_response(reply)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--model", default="bench-synthetic")
    parser.add_argument("--ttft-ms", type=float, default=10.0)
    parser.add_argument("--itl-ms", type=float, default=4.0)
    parser.add_argument("--latency-ms", type=float, default=5.0)
    parser.add_argument("--reject")
    parser.add_argument("--no-done", action="store_true")
    parser.add_argument("--no-usage", action="store_true")
    parser.add_argument("--tokens-per-chunk", type=int, default=1)
    parser.add_argument("--stop-at", type=int)
    parser.add_argument("--truncate", action="store_true")
    parser.add_argument("--models-500", action="store_true")
    parser.add_argument("--junk", action="store_true")
    parser.add_argument("--fail-after", type=int)
    parser.add_argument("--embedding-drop")
    parser.add_argument("--cut-every", type=int)
    parser.add_argument("--endless", choices=["slow", "fast"])
    parser.add_argument("--endless-after", type=int, default=0)
    parser.add_argument("--endless-count", type=int)
    parser.add_argument("--die-after", type=int)
    parser.add_argument("--busy-for", type=float)
    parser.add_argument("--shed-above", type=int)
    quirky = Quirky(parser.parse_args())
    app = web.Application()
    app.add_routes([web.get("/health", quirky.health), web.get("/v1/models", quirky.models),
                    web.post("/v1/chat/completions", quirky.chat), web.post("/v1/embeddings", quirky.embeddings),
                    web.post("/v1/audio/transcriptions", quirky.transcriptions)])
    web.run_app(app, host=quirky.args.host, port=quirky.args.port, print=None)


if __name__ == "__main__":
    main()
