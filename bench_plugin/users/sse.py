"""Reading an OpenAI-style Server-Sent Events stream as it arrives, the events of each receive at once.

The stream is ``data: <json>`` events separated by blank lines. OpenAI's API, vLLM, SGLang, TGI and
llama.cpp's server end it with ``data: [DONE]``; ``transformers serve`` closes the connection after its
last chunk (the one with ``finish_reason`` and ``usage``) without one. So the end of the body ends the
events too, and the reader of the events (users/llm.py) judges whether the stream had finished. Lines
are read straight off the socket (users/body.py: the lines of each receive as soon as they are complete), so
the time at which each event is seen is the time it arrived, which TTFT depends on; a stream that never pauses
still lets the event loop turn, and a line over 16 MiB is a StreamError. Each event's JSON is decoded
into its typed shape in one pass (users/shapes.py); the line itself is never decoded to text.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from bench_plugin.users.body import TooLarge, line_blocks
from bench_plugin.users.shapes import Chunk, ShapeError, decode_chunk

DONE = "[DONE]"
_DONE = b"[DONE]"
_FIELDS = (b"event:", b"id:", b"retry:")
"""SSE fields other than ``data`` that a stream may carry; the class reads none of them."""


class StreamError(Exception):
    """The stream broke the SSE/OpenAI framing; the message says where."""


def event_blocks(raw_response: Any) -> Iterator[list[Chunk | str]]:
    """The stream's events as they arrive: after each receive, the events it completed (usually one), each a
    chunk or the string ``[DONE]``; StreamError on bad framing. Ends at ``[DONE]`` or where the body ends.

    ``raw_response`` is geventhttpclient's response (FastResponse._response) with the body unread. The
    events of one receive arrived together: a reader stamps them with one time.
    """
    try:
        for block in line_blocks(raw_response):
            events: list[Chunk | str] = []
            for line in block.split(b"\n"):
                if not line:  # the blank line after each event: half the lines of a stream
                    continue
                if line.startswith(b"data:"):
                    payload = line[5:].strip()
                    if payload == _DONE:
                        events.append(DONE)
                        yield events
                        return
                    try:
                        events.append(decode_chunk(payload))
                    except ShapeError as exc:
                        raise StreamError(f"event {exc}") from None
                elif line != b"\r" and line[0] != 58 and not line.startswith(_FIELDS):
                    # not a blank line ending in CR, an SSE comment (":", a keep-alive) or a field the class
                    # does not read
                    text = line.rstrip(b"\r")[:80].decode("utf-8", "replace")
                    raise StreamError(f"unexpected line in event stream: {text!r}")
            if events:
                yield events
    except TooLarge as exc:
        raise StreamError(str(exc)) from None
