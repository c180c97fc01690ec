"""An HTTP reply on a real loopback socket pair, read by geventhttpclient's response as the users read it."""

from __future__ import annotations

import socket

from geventhttpclient.response import HTTPSocketResponse

BUFFER_BYTES = 4 << 20
"""Each end's kernel buffer: a reply up to about this size is written whole before it is read."""


def reply(body: bytes, headers: str = "Content-Type: text/event-stream") -> HTTPSocketResponse:
    """geventhttpclient's response to a reply of ``body`` (read until the connection closes, as an SSE stream
    without a length is), its headers read and its body in the socket, unread. The whole reply is in the
    kernel's buffers before the first read, so no read ever has to wait for one (as when a server sends
    faster than the client reads). The sender's end is closed after it."""
    reader, writer = socket.socketpair()
    for end in (reader, writer):
        end.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, BUFFER_BYTES)
        end.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, BUFFER_BYTES)
    writer.sendall(f"HTTP/1.1 200 OK\r\n{headers}\r\nConnection: close\r\n\r\n".encode() + body)
    writer.close()
    return HTTPSocketResponse(reader, method="POST")
