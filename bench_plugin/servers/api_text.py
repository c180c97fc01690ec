"""OpenAI completions / chat completions protocol: request parsing and responses.

Shared by the LLM server (tokens from the engine) and the synthetic server (tokens
from timers): both hand this module an async iterator of text pieces, one per token,
and it writes either one JSON object or a Server-Sent Events stream framed exactly
like OpenAI's. Torch-free.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncGenerator
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any, Literal

from aiohttp import web

from .app import ApiError, ClientDisconnected
from .validation import (
    Body,
    opt_bool,
    opt_int,
    opt_number,
    opt_object,
    reject_if_set,
    require_n_is_one,
)

DEFAULT_MAX_TOKENS = 16
FINISH_REASON = "length"  # every request generates exactly max_tokens: EOS never ends one
_ROLES = ("system", "user", "assistant", "developer", "tool")
_UNSUPPORTED = ("best_of", "echo", "logprobs", "top_logprobs", "suffix", "tools", "functions", "tool_choice")


@dataclass(frozen=True)
class TextRequest:
    """A validated completions or chat completions request."""

    kind: Literal["completion", "chat"]
    prompt: str  # the words the prompt is made of (chat: all message contents, no template)
    max_tokens: int
    stream: bool
    include_usage: bool
    request_id: str
    created: int

    @property
    def object_name(self) -> str:
        """OpenAI ``object`` of a non-streamed response."""
        return "text_completion" if self.kind == "completion" else "chat.completion"


def _common(body: Body, kind: Literal["completion", "chat"], prompt: str, max_tokens: int) -> TextRequest:
    require_n_is_one(body)
    for name in _UNSUPPORTED:
        reject_if_set(body, name)
    response_format = opt_object(body, "response_format")
    if response_format.get("type", "text") != "text":
        raise ApiError("only response_format type 'text' is supported", param="response_format")
    opt_number(body, "temperature", 0.0, 2.0)
    opt_number(body, "top_p", 0.0, 1.0)
    opt_number(body, "presence_penalty", -2.0, 2.0)
    opt_number(body, "frequency_penalty", -2.0, 2.0)
    opt_int(body, "seed", None, minimum=-(2**63))
    opt_bool(body, "ignore_eos", False)
    min_tokens = opt_int(body, "min_tokens", 0, minimum=0)
    if min_tokens is not None and min_tokens > max_tokens:
        raise ApiError("'min_tokens' must not exceed 'max_tokens'", param="min_tokens")
    stream = opt_bool(body, "stream", False)
    include_usage = bool(opt_bool(opt_object(body, "stream_options"), "include_usage", False))
    prefix = "cmpl-" if kind == "completion" else "chatcmpl-"
    return TextRequest(kind, prompt, max_tokens, stream, include_usage, prefix + uuid.uuid4().hex, int(time.time()))


def parse_completion(body: Body) -> TextRequest:
    """Validate a ``/v1/completions`` body (prompt: a string or a list of one string)."""
    prompt = body.get("prompt")
    if isinstance(prompt, list):
        if len(prompt) != 1 or not isinstance(prompt[0], str):
            raise ApiError("'prompt' must be a string or a list of exactly one string", param="prompt")
        prompt = prompt[0]
    if not isinstance(prompt, str):
        raise ApiError("'prompt' is required and must be a string", param="prompt")
    if not prompt.split():
        raise ApiError("'prompt' is empty", param="prompt")
    max_tokens = opt_int(body, "max_tokens", DEFAULT_MAX_TOKENS, minimum=1)
    assert max_tokens is not None
    return _common(body, "completion", prompt, max_tokens)


def _message_text(message: Any, index: int) -> str:
    param = f"messages[{index}]"
    if not isinstance(message, dict):
        raise ApiError(f"{param} must be an object", param=param)
    if message.get("role") not in _ROLES:
        raise ApiError(f"{param}.role must be one of {list(_ROLES)}", param=f"{param}.role")
    content = message.get("content")
    if content is None or isinstance(content, str):
        return content or ""
    if not isinstance(content, list):
        raise ApiError(f"{param}.content must be a string or a list of parts", param=f"{param}.content")
    texts = []
    for part in content:
        if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
            raise ApiError(
                f"{param}.content parts must be {{'type': 'text', 'text': str}}; other part types are not supported",
                param=f"{param}.content",
            )
        texts.append(part["text"])
    return " ".join(texts)


def parse_chat(body: Body) -> TextRequest:
    """Validate a ``/v1/chat/completions`` body; the prompt is every message's content."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ApiError("'messages' is required and must be a non-empty list", param="messages")
    prompt = " ".join(_message_text(m, i) for i, m in enumerate(messages))
    if not prompt.split():
        raise ApiError("the messages contain no text", param="messages")
    max_tokens = opt_int(body, "max_completion_tokens", None, minimum=1)
    if max_tokens is None:
        max_tokens = opt_int(body, "max_tokens", DEFAULT_MAX_TOKENS, minimum=1)
    assert max_tokens is not None
    return _common(body, "chat", prompt, max_tokens)


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    """OpenAI usage object."""
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def full_response(req: TextRequest, model: str, text: str, prompt_tokens: int, n_tokens: int) -> Body:
    """The non-streamed ``text_completion`` / ``chat.completion`` object."""
    choice: Body = {"index": 0, "finish_reason": FINISH_REASON, "logprobs": None}
    if req.kind == "completion":
        choice["text"] = text
    else:
        choice["message"] = {"role": "assistant", "content": text}
    return {
        "id": req.request_id,
        "object": req.object_name,
        "created": req.created,
        "model": model,
        "choices": [choice],
        "usage": usage(prompt_tokens, n_tokens),
    }


def _chunk(req: TextRequest, model: str, choices: list[Body]) -> bytes:
    obj = "text_completion" if req.kind == "completion" else "chat.completion.chunk"
    payload = {"id": req.request_id, "object": obj, "created": req.created, "model": model, "choices": choices}
    return sse(payload)


def sse(payload: Body | str) -> bytes:
    """One Server-Sent Event carrying ``payload`` (JSON-encoded unless a string)."""
    data = payload if isinstance(payload, str) else json.dumps(payload, separators=(",", ":"))
    return f"data: {data}\n\n".encode()


def token_chunk(req: TextRequest, model: str, piece: str, first: bool) -> bytes:
    """The event(s) for one token; chat's first token is preceded by the role chunk.

    The role chunk goes out together with the first token (not at stream start), so a
    client timing the first event and one timing the first content agree on TTFT.
    """
    if req.kind == "completion":
        return _chunk(req, model, [{"index": 0, "text": piece, "finish_reason": None, "logprobs": None}])
    out = b""
    if first:
        role = {"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}
        out = _chunk(req, model, [role])
    content = {"index": 0, "delta": {"content": piece}, "finish_reason": None}
    return out + _chunk(req, model, [content])


def final_chunks(req: TextRequest, model: str, prompt_tokens: int, n_tokens: int) -> bytes:
    """The finish_reason chunk, the optional usage chunk, and ``[DONE]``."""
    if req.kind == "completion":
        last: Body = {"index": 0, "text": "", "finish_reason": FINISH_REASON, "logprobs": None}
    else:
        last = {"index": 0, "delta": {}, "finish_reason": FINISH_REASON}
    out = _chunk(req, model, [last])
    if req.include_usage:
        obj = "text_completion" if req.kind == "completion" else "chat.completion.chunk"
        out += sse(
            {
                "id": req.request_id,
                "object": obj,
                "created": req.created,
                "model": model,
                "choices": [],
                "usage": usage(prompt_tokens, n_tokens),
            }
        )
    return out + sse("[DONE]")


async def respond(
    request: web.Request, req: TextRequest, model: str, prompt_tokens: int, pieces: AsyncGenerator[str, None]
) -> web.StreamResponse:
    """Answer ``req`` from ``pieces`` (one text piece per token), streamed or not.

    ``pieces`` is always closed before returning, so its producer learns at once when
    the client disconnected mid-stream.
    """
    async with aclosing(pieces):
        return await _respond(request, req, model, prompt_tokens, pieces)


async def _respond(
    request: web.Request, req: TextRequest, model: str, prompt_tokens: int, pieces: AsyncGenerator[str, None]
) -> web.StreamResponse:
    if not req.stream:
        texts = [piece async for piece in pieces]
        body = full_response(req, model, "".join(texts), prompt_tokens, len(texts))
        return web.json_response(body)
    response = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    )
    await response.prepare(request)
    n_tokens = 0
    try:
        async for piece in pieces:
            # One write per token: aiohttp hands it to the (TCP_NODELAY) socket at once.
            await response.write(token_chunk(req, model, piece, n_tokens == 0))
            n_tokens += 1
        await response.write(final_chunks(req, model, prompt_tokens, n_tokens))
        await response.write_eof()
    except ApiError as exc:
        # Headers are gone already: report the failure in-band, the way OpenAI does.
        await response.write(sse(exc.payload()) + sse("[DONE]"))
        await response.write_eof()
    except ConnectionResetError:
        raise ClientDisconnected(response) from None
    return response
