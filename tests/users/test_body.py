"""Reply bodies are read in bounded pieces with the event loop turning between them, over real sockets."""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Any

import gevent
import pytest
from geventhttpclient.response import HTTPSocketResponse
from wire import reply

from bench_plugin.users.body import TooLarge, line_blocks, read_all

SSE = b'data: {"a": 1}\n\n: keep-alive\r\n\r\ndata: {"b": 2}\n\ndata: [DONE]\n\n'


def lines(raw: HTTPSocketResponse, **kw: Any) -> list[bytes]:
    """The lines of ``raw``'s body as readline returns them, cut from the blocks line_blocks yields."""
    blocks = list(line_blocks(raw, **kw))
    assert all(block.endswith(b"\n") for block in blocks[:-1]), blocks  # only the body's last line may lack one
    cut: list[bytes] = []
    for block in blocks:
        *whole, rest = block.split(b"\n")
        cut += [line + b"\n" for line in whole] + ([rest] if rest else [])
    return cut


def test_lines_are_what_geventhttpclients_readline_returns() -> None:
    assert list(lines(reply(SSE))) == [b'data: {"a": 1}\n', b"\n", b": keep-alive\r\n", b"\r\n",
                                       b'data: {"b": 2}\n', b"\n", b"data: [DONE]\n", b"\n"]
    expected = []
    theirs = reply(SSE)
    while line := theirs.readline(b"\n"):
        expected.append(line)
    assert list(lines(reply(SSE))) == expected


def test_a_last_line_without_its_newline_is_kept() -> None:
    assert list(lines(reply(b"data: 1\n\ndata: [DONE]"))) == [b"data: 1\n", b"\n", b"data: [DONE]"]


def test_a_chunked_body_is_read_through_its_framing() -> None:
    parts = (b"data: 1\n", b"\ndata:", b" 2\n\n")
    chunked = b"".join(f"{len(part):x}\r\n".encode() + part + b"\r\n" for part in parts) + b"0\r\n\r\n"
    assert list(lines(reply(chunked, "Transfer-Encoding: chunked"))) == [
        b"data: 1\n", b"\n", b"data: 2\n", b"\n"]


def test_a_stream_that_never_waits_for_the_network_still_turns_the_loop() -> None:
    # 600 KB of events already in the socket: no recv ever blocks, so only the reader's own pauses turn the loop
    body = b"".join(b"data: %s\n\n" % (b"x" * 1000) for _ in range(600))
    pauses: list[float] = []
    got = list(lines(reply(body), every=64 << 10, pause=lambda: pauses.append(time.time())))
    assert len(got) == 1200 and got[0] == b"data: " + b"x" * 1000 + b"\n"
    assert len(pauses) >= 600_000 // (64 << 10) - 1, len(pauses)


def test_a_whole_body_is_read_in_pieces_with_pauses() -> None:
    body = bytes(range(256)) * 2400  # 600 KB
    pauses: list[int] = []
    whole = reply(body, f"Content-Length: {len(body)}")
    assert read_all(whole, every=64 << 10, pause=lambda: pauses.append(1)) == body
    assert len(pauses) >= 9, len(pauses)
    assert read_all(reply(b"", "Content-Length: 0")) == b""


def test_a_body_or_a_line_past_its_limit_is_refused() -> None:
    with pytest.raises(TooLarge, match="reply body over 1 MiB"):
        read_all(reply(b"x" * (2 << 20), f"Content-Length: {2 << 20}"), limit=1 << 20)
    with pytest.raises(TooLarge, match="a line of the event stream over 1 MiB"):
        list(lines(reply(b"data: " + b"x" * (2 << 20)), limit=1 << 20))


@pytest.mark.serial  # it times the event loop: run alone, after the lanes (tools/run_tests.py)
def test_a_request_timeout_ends_an_endless_stream_sent_without_pause() -> None:
    # a real process writing 4 MB events as fast as it can, for ever: the reader's gevent.Timeout must fire
    import socket
    reader, writer = socket.socketpair()
    sender = subprocess.Popen([sys.executable, "-c", (
        "import os, sys\n"
        "fd = int(sys.argv[1])\n"
        "os.set_blocking(fd, True)\n"
        "os.write(fd, b'HTTP/1.1 200 OK\\r\\nContent-Type: text/event-stream\\r\\n\\r\\n')\n"
        "event = b'data: ' + b'x' * (4 << 20) + b'\\n\\n'\n"
        "while True:\n"
        "    os.write(fd, event)\n"), str(writer.fileno())], pass_fds=[writer.fileno()])
    writer.close()
    began = time.time()
    ticks: list[float] = [began]
    ticker = gevent.spawn(lambda: [ticks.append(time.time()) or gevent.sleep(0.05) for _ in iter(int, 1)])
    read = 0
    try:
        with pytest.raises(gevent.Timeout), gevent.Timeout(1.0):
            for block in line_blocks(HTTPSocketResponse(reader, method="POST")):
                read += len(block)
        ended = time.time()
    finally:
        ticker.kill()
        sender.kill()
        sender.wait()
        reader.close()
    assert read > 0
    # The loop is held at most one PAUSE_BYTES at a time (about a millisecond): the timeout fires on time and
    # a 50-ms ticker keeps ticking. Before, geventhttpclient's readline held it for as long as the socket had
    # data: the timeout fired 1-2 s late, and the ticker's gaps were as long.
    assert ended - began < 1.5, ended - began
    gaps = [later - earlier for earlier, later in zip(ticks, [*ticks[1:], ended], strict=True)]
    assert max(gaps) < 0.5, gaps
