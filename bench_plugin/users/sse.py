"""Reading an OpenAI-style Server-Sent Events stream as it arrives, one event at a time.

The stream is ``data: <json>`` events separated by blank lines. OpenAI's API, vLLM, SGLang, TGI and
llama.cpp's server end it with ``data: [DONE]``; ``transformers serve`` closes the connection after its
last chunk (the one with ``finish_reason`` and ``usage``) without one. So the end of the body ends the
events too, and the reader of the events (users/llm.py) judges whether the stream had finished. Lines
are read straight off the socket (geventhttpclient's readline returns as soon as a line is complete),
so the time at which each event is seen is the time it arrived, which TTFT depends on.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

DONE = "[DONE]"


class StreamError(Exception):
    """The stream broke the SSE/OpenAI framing; the message says where."""


def iter_events(raw_response: Any) -> Iterator[dict[str, Any] | str]:
    """Yield each event's JSON object, then the string ``[DONE]`` if the stream sends it; raise StreamError
    on bad framing. Ends at ``[DONE]`` or where the body ends.

    ``raw_response`` is geventhttpclient's response (FastResponse._response) with the body unread.
    """
    while True:
        line = raw_response.readline(b"\n")
        if not line:
            return
        text = line.decode("utf-8", errors="replace").rstrip("\r\n")
        if not text or text.startswith(":"):
            continue  # event separator or SSE comment (keep-alive)
        if not text.startswith("data:"):
            if text.startswith(("event:", "id:", "retry:")):
                continue
            raise StreamError(f"unexpected line in event stream: {text[:80]!r}")
        payload = text[5:].strip()
        if payload == DONE:
            yield DONE
            return
        try:
            event = json.loads(payload)
        except json.JSONDecodeError:
            raise StreamError(f"event is not JSON: {payload[:80]!r}") from None
        if not isinstance(event, dict):
            raise StreamError(f"event is not a JSON object: {payload[:80]!r}")
        yield event
