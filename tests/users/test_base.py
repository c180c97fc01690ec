"""What every class's sender sends, checked against a real HTTP server on loopback."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from locust import FastHttpUser
from locust.env import Environment

from bench_plugin import ASRUser


class _SetsCookies(BaseHTTPRequestHandler):
    """Answers every POST with a transcription and a balancer's affinity cookie; notes each request's Cookie."""

    seen: list[str | None] = []

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        type(self).seen.append(self.headers.get("Cookie"))
        body = b'{"text": "hello"}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Set-Cookie", "affinity=server-1; Path=/")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def cookie_server() -> Iterator[str]:
    _SetsCookies.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _SetsCookies)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _post_twice(user: FastHttpUser, url: str) -> None:
    for _ in range(2):
        with user.client.request("POST", f"{url}/v1/audio/transcriptions", data=b"x",  # type: ignore[arg-type]
                                 catch_response=True) as resp:
            assert resp.status_code == 200
            resp.success()


def test_a_sender_keeps_no_cookie_a_reply_set(cookie_server: str) -> None:
    """Each arrival is a client of its own: a cookie one reply set does not go out with the next request,
    where a plain FastHttpUser (the control, which shows the server's cookie would follow) sends it back."""
    environment = Environment()

    class Plain(FastHttpUser):
        host = cookie_server

    _post_twice(Plain(environment), cookie_server)
    assert _SetsCookies.seen == [None, "affinity=server-1"]

    _SetsCookies.seen = []
    _post_twice(ASRUser(environment), cookie_server)
    assert _SetsCookies.seen == [None, None]
