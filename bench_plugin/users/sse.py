"""Reading an OpenAI-style Server-Sent Events stream as it arrives, one event at a time.

The stream is ``data: <json>`` events separated by blank lines. OpenAI's API, vLLM, SGLang, TGI and
llama.cpp's server end it with ``data: [DONE]``; ``transformers serve`` closes the connection after its
last chunk (the one with ``finish_reason`` and ``usage``) without one. So the end of the body ends the
events too, and the reader of the events (users/llm.py) judges whether the stream had finished. Lines
are read straight off the socket (users/body.py: each returned as soon as it is complete), so the time
at which each event is seen is the time it arrived, which TTFT depends on; a stream that never pauses
still lets the event loop turn, and a line over 16 MiB is a StreamError. Each event's JSON is decoded
into its typed shape in one pass (users/shapes.py); the line itself is never decoded to text.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from bench_plugin.users.body import TooLarge, lines
from bench_plugin.users.shapes import Chunk, ShapeError, decode_chunk

DONE = "[DONE]"
_DONE = b"[DONE]"
_FIELDS = (b"event:", b"id:", b"retry:")
"""SSE fields other than ``data`` that a stream may carry; the class reads none of them."""


class StreamError(Exception):
    """The stream broke the SSE/OpenAI framing; the message says where."""


def iter_events(raw_response: Any) -> Iterator[Chunk | str]:
    """Yield each event's chunk, then the string ``[DONE]`` if the stream sends it; raise StreamError on bad
    framing. Ends at ``[DONE]`` or where the body ends.

    ``raw_response`` is geventhttpclient's response (FastResponse._response) with the body unread.
    """
    try:
        for line in lines(raw_response):
            if line == b"\n":  # the blank line after each event: half the lines of a stream
                continue
            event = _event(line)
            if event is None:
                continue
            yield event
            if event is DONE:
                return
    except TooLarge as exc:
        raise StreamError(str(exc)) from None


def _event(line: bytes) -> Chunk | str | None:
    """The event a line carries: its chunk, ``[DONE]``, or None for a line that carries none."""
    line = line.rstrip(b"\r\n")
    if not line or line[0] == 58:  # ":" an SSE comment (keep-alive); empty: the event separator
        return None
    if not line.startswith(b"data:"):
        if line.startswith(_FIELDS):
            return None
        raise StreamError(f"unexpected line in event stream: {line[:80].decode('utf-8', 'replace')!r}")
    payload = line[5:].strip()
    if payload == _DONE:
        return DONE
    try:
        return decode_chunk(payload)
    except ShapeError as exc:
        raise StreamError(f"event {exc}") from None
