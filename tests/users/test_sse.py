"""SSE framing: events parsed as they come, ending at [DONE] or at the end of the body, bad framing named."""

from __future__ import annotations

import re

import pytest
from geventhttpclient.response import HTTPSocketResponse
from wire import reply

from bench_plugin.users.shapes import Choice, Chunk, Delta
from bench_plugin.users.sse import DONE, StreamError, event_blocks


def Lines(text: str) -> HTTPSocketResponse:  # reads as the stream it stands for
    """A real reply whose body is ``text``, read off a socket as the LLM user reads it."""
    return reply(text.encode())


def iter_events(stream: HTTPSocketResponse) -> list[Chunk | str]:
    """Every event of ``stream``, in order, whichever receive brought it."""
    return [event for block in event_blocks(stream) for event in block]


A = Chunk(choices=[Choice(delta=Delta(content="a"))])
B = Chunk(choices=[Choice(text="b", finish_reason="length")], usage={"completion_tokens": 2})
A_JSON = '{"id": "x", "choices": [{"index": 0, "delta": {"content": "a"}, "logprobs": null}]}'
B_JSON = '{"choices": [{"index": 0, "text": "b", "finish_reason": "length"}], "usage": {"completion_tokens": 2}}'


def test_events_then_done() -> None:
    stream = Lines(f"data: {A_JSON}\n\n: keep-alive\n\nevent: x\ndata: {B_JSON}\n\ndata: [DONE]\n\n")
    assert list(iter_events(stream)) == [A, B, DONE]


def test_crlf_and_no_space_after_colon() -> None:
    assert list(iter_events(Lines(f"data:{A_JSON}\r\n\r\ndata: [DONE]\r\n"))) == [A, DONE]


def test_the_events_end_where_the_body_ends_without_done() -> None:
    # transformers serve closes the stream after its last chunk; whether that was complete is the reader's call
    assert list(iter_events(Lines(f"data: {A_JSON}\n\ndata: {B_JSON}\n\n"))) == [A, B]


def test_nothing_after_done_is_read() -> None:
    assert list(iter_events(Lines(f"data: {A_JSON}\n\ndata: [DONE]\n\ndata: {B_JSON}\n\n"))) == [A, DONE]


@pytest.mark.parametrize(("text", "message"), [
    ("data: {not json\n\n", "event reply is not JSON: b'{not json'"),
    ("data: [1, 2]\n\n", "event reply: expected `object`, got `array`"),
    ('data: {"choices": [{"delta": {"content": 5}}]}\n\n', "event choices[0].delta.content: expected `str | null`"),
    ("hello\n", "unexpected line in event stream: 'hello'"),
])
def test_bad_framing(text: str, message: str) -> None:
    with pytest.raises(StreamError, match=re.escape(message)):
        list(iter_events(Lines(text)))
