"""Reading an OpenAI-style Server-Sent Events stream as it arrives, one event at a time.

The stream is ``data: <json>`` events separated by blank lines. OpenAI's API, vLLM, SGLang, TGI and
llama.cpp's server end it with ``data: [DONE]``; ``transformers serve`` closes the connection after its
last chunk (the one with ``finish_reason`` and ``usage``) without one. So the end of the body ends the
events too, and the reader of the events (users/llm.py) judges whether the stream had finished. Lines
are read straight off the socket (users/body.py: each returned as soon as it is complete), so the time
at which each event is seen is the time it arrived, which TTFT depends on; a stream that never pauses
still lets the event loop turn, and a line over 16 MiB is a StreamError.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from bench_plugin.users.body import TooLarge, lines

DONE = "[DONE]"


class StreamError(Exception):
    """The stream broke the SSE/OpenAI framing; the message says where."""


def iter_events(raw_response: Any) -> Iterator[dict[str, Any] | str]:
    """Yield each event's JSON object, then the string ``[DONE]`` if the stream sends it; raise StreamError
    on bad framing. Ends at ``[DONE]`` or where the body ends.

    ``raw_response`` is geventhttpclient's response (FastResponse._response) with the body unread.
    """
    try:
        for line in lines(raw_response):
            event = _event(line)
            if event is None:
                continue
            yield event
            if event == DONE:
                return
    except TooLarge as exc:
        raise StreamError(str(exc)) from None


def _event(line: bytes) -> dict[str, Any] | str | None:
    """The event a line carries: its JSON object, ``[DONE]``, or None for a line that carries none."""
    text = line.decode("utf-8", errors="replace").rstrip("\r\n")
    if not text or text.startswith(":"):
        return None  # event separator or SSE comment (keep-alive)
    if not text.startswith("data:"):
        if text.startswith(("event:", "id:", "retry:")):
            return None
        raise StreamError(f"unexpected line in event stream: {text[:80]!r}")
    payload = text[5:].strip()
    if payload == DONE:
        return DONE
    try:
        event = json.loads(payload)
    except json.JSONDecodeError:
        raise StreamError(f"event is not JSON: {payload[:80]!r}") from None
    if not isinstance(event, dict):
        raise StreamError(f"event is not a JSON object: {payload[:80]!r}")
    return event
