"""SSE framing: events parsed as they come, ending at [DONE] or at the end of the body, bad framing named."""

from __future__ import annotations

import re

import pytest
from geventhttpclient.response import HTTPSocketResponse
from wire import reply

from bench_plugin.users.sse import DONE, StreamError, iter_events


def Lines(text: str) -> HTTPSocketResponse:  # reads as the stream it stands for
    """A real reply whose body is ``text``, read off a socket as the LLM user reads it."""
    return reply(text.encode())


def test_events_then_done() -> None:
    stream = Lines('data: {"a": 1}\n\n: keep-alive\n\ndata: {"b": 2}\n\ndata: [DONE]\n\n')
    assert list(iter_events(stream)) == [{"a": 1}, {"b": 2}, DONE]


def test_crlf_and_no_space_after_colon() -> None:
    assert list(iter_events(Lines('data:{"a": 1}\r\n\r\ndata: [DONE]\r\n'))) == [{"a": 1}, DONE]


def test_the_events_end_where_the_body_ends_without_done() -> None:
    # transformers serve closes the stream after its last chunk; whether that was complete is the reader's call
    assert list(iter_events(Lines('data: {"a": 1}\n\ndata: {"b": 2}\n\n'))) == [{"a": 1}, {"b": 2}]


def test_nothing_after_done_is_read() -> None:
    assert list(iter_events(Lines('data: {"a": 1}\n\ndata: [DONE]\n\ndata: {"late": 1}\n\n'))) == [{"a": 1}, DONE]


@pytest.mark.parametrize(("text", "message"), [
    ("data: {not json\n\n", "not JSON"),
    ("data: [1, 2]\n\n", "not a JSON object"),
    ("hello\n", "unexpected line"),
])
def test_bad_framing(text: str, message: str) -> None:
    with pytest.raises(StreamError, match=re.escape(message)):
        list(iter_events(Lines(text)))
