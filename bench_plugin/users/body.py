"""Reading a reply's body off the socket in bounded pieces, turning the event loop between them.

geventhttpclient's ``read()`` and ``readline()`` loop on ``recv`` until they have what they were asked
for, and a ``recv`` on a socket that already holds data returns without yielding to the event loop. A
server that sends without pause (a stream of 1 MB events that never ends, a body of gigabytes) thus held
the loop for as long as it sent: no timer fired, neither the request's own timeout nor the rollback
checks, the progress line or Ctrl-C, and the process sat at 100% CPU until the server stopped.

Here each read takes at most one ``recv`` at a time, and after every :data:`PAUSE_BYTES` received the
reader calls ``gevent.idle()``, which returns once the loop has run what was due, timers included (so
the request's own ``gevent.Timeout`` can end it). A reply smaller than that never pauses, so what the
samples time is unchanged for every reply a real inference server sends. A body over :data:`MAX_BODY_BYTES`
or a line over :data:`MAX_LINE_BYTES` is refused (:class:`TooLarge`) rather than held in memory.

:func:`line_blocks` reads the same private state of geventhttpclient's ``HTTPSocketResponse`` that its own
``readline`` reads (``_body_buffer``, ``_sock``, ``feed``, ``message_complete``, ``block_size``), at the
version the lock pins; tests/users/test_body.py holds it to that.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import gevent
from geventhttpclient.response import HTTPConnectionClosed

PAUSE_BYTES = 1 << 20
"""Bytes received between two turns of the event loop (about a millisecond of copying on loopback)."""
MAX_BODY_BYTES = 256 << 20
"""The largest whole reply read (an embedding reply of 64 vectors of 4,096 floats is about 5 MB of JSON)."""
MAX_LINE_BYTES = 16 << 20
"""The longest line of an event stream (one event of an LLM stream is rarely over a few KB)."""


class TooLarge(Exception):
    """The reply (or one line of it) is over its limit; the message says which and how large."""


class _Pacer:
    """Counts bytes received and turns the event loop once every ``every`` of them."""

    def __init__(self, every: int, pause: Callable[[], object]) -> None:
        self.every = every
        self.pause = pause
        self.since = 0

    def received(self, n: int) -> None:
        self.since += n
        if self.since >= self.every:
            self.since = 0
            self.pause()


def read_all(raw: Any, limit: int = MAX_BODY_BYTES, every: int = PAUSE_BYTES,
             pause: Callable[[], object] = gevent.idle) -> bytes:
    """The whole body of geventhttpclient's response ``raw``, read ``every`` bytes at a time; TooLarge
    past ``limit``."""
    pieces: list[bytes] = []
    total = 0
    pacer = _Pacer(every, pause)
    while True:
        piece = raw.read(every)
        if not piece:
            return b"".join(pieces)
        total += len(piece)
        if total > limit:
            raise TooLarge(f"reply body over {limit >> 20} MiB")
        pieces.append(piece)
        pacer.received(len(piece))


def line_blocks(raw: Any, limit: int = MAX_LINE_BYTES, every: int = PAUSE_BYTES,
                pause: Callable[[], object] = gevent.idle) -> Iterator[bytes]:
    """The lines of the body of ``raw`` as they arrive: after each receive, every line it completed, in one
    bytes object that ends with ``\\n`` (the body's last line may lack one); TooLarge for a line past
    ``limit`` bytes.

    An LLM stream's event arrives in one receive as two lines (the event and the blank line after it),
    so a block is usually one event; the part after the last newline stays in the buffer, and only what
    is new is searched next time. Split at ``\\n``, the blocks give the lines ``raw.readline(b"\\n")``
    returns, one resumption of this generator per receive rather than one per line.
    """
    buffer: bytearray = raw._body_buffer
    since = 0  # bytes received since the loop last turned (_Pacer's count, kept here: this runs per receive)
    scanned = 0
    while True:
        last = buffer.rfind(b"\n", scanned)
        if last >= 0:
            block = bytes(buffer[:last + 1])
            del buffer[:last + 1]
            yield block
        scanned = len(buffer)
        if scanned > limit:
            raise TooLarge(f"a line of the event stream over {limit >> 20} MiB")
        if raw.message_complete:
            if buffer:
                block = bytes(buffer)
                del buffer[:]
                yield block
            return
        if raw._sock is None:
            raise HTTPConnectionClosed("connection closed.")
        before = len(buffer)
        try:
            raw.feed(raw._sock.recv(raw.block_size))
        except BaseException:
            raw.release()  # as readline does: the connection cannot be reused
            raise
        since += len(buffer) - before
        if since >= every:
            since = 0
            pause()
