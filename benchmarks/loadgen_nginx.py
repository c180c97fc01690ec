"""The null server of benchmarks/loadgen_capacity.py: nginx answering fixed, valid OpenAI replies.

nginx (Debian package ``nginx``) runs as a child process in the foreground with a configuration of
its own under a temporary directory: one worker process, loopback only, no access log, keep-alive
without a request limit. It answers

- POST /v1/embeddings with ``batch`` vectors of ``DIMENSIONS`` floats (the users check the count);
- POST /v1/chat/completions with an SSE stream of ``chunks`` content chunks, a usage chunk saying
  ``completion_tokens: chunks`` (the users check the exact output length) and ``data: [DONE]``.

The plugin's readiness probe (python-requests) asks for one vector and a non-streamed completion;
it gets those replies, told apart by its User-Agent, so one server serves both the probe and the load.
A fixed body costs nginx a few microseconds: what limits the rate is the load generator.
"""

from __future__ import annotations

import json
import socket
import time
import urllib.request
from pathlib import Path

DIMENSIONS = 8
"""Floats per vector: small, so the reply's size and parsing stay far below a request's other costs."""

MODEL = "null"


def embeddings_reply(batch: int) -> str:
    """An OpenAI embeddings reply with ``batch`` vectors."""
    vector = [round(0.125 * (i + 1), 3) for i in range(DIMENSIONS)]
    data = [{"object": "embedding", "index": i, "embedding": vector} for i in range(batch)]
    usage = {"prompt_tokens": 16 * batch, "total_tokens": 16 * batch}
    return json.dumps({"object": "list", "data": data, "model": MODEL, "usage": usage}, separators=(",", ":"))


def chat_stream(chunks: int) -> str:
    """An OpenAI chat-completions SSE stream: ``chunks`` one-token content chunks, usage, [DONE]."""

    def event(choices: list[dict[str, object]], **extra: object) -> str:
        body = {"id": "null", "object": "chat.completion.chunk", "created": 0, "model": MODEL, "choices": choices,
                **extra}
        return "data: " + json.dumps(body, separators=(",", ":")) + "\n\n"

    out = [event([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}])]
    out += [event([{"index": 0, "delta": {"content": "x"}, "finish_reason": None}]) for _ in range(chunks)]
    out.append(event([{"index": 0, "delta": {}, "finish_reason": "length"}]))
    out.append(event([], usage={"prompt_tokens": 16, "completion_tokens": chunks, "total_tokens": 16 + chunks}))
    return "".join(out) + "data: [DONE]\n\n"


def chat_reply() -> str:
    """A non-streamed chat completion (what the readiness probe asks for)."""
    choice = {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "length"}
    return json.dumps({"id": "null", "object": "chat.completion", "created": 0, "model": MODEL, "choices": [choice],
                       "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}},
                      separators=(",", ":"))


def _quoted(text: str) -> str:
    """``text`` as an nginx quoted string (nginx turns \\n back into a newline)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n") + "'"


def config(directory: Path, port: int, batch: int, chunks: int) -> str:
    """The nginx configuration: everything it writes stays under ``directory``."""
    temp = "\n".join(f"    {name}_temp_path {directory}/{name};" for name in ("client_body", "proxy", "fastcgi",
                                                                               "uwsgi", "scgi"))
    probe = "($http_user_agent ~ ^python-requests)"
    return f"""worker_processes 1;
daemon off;
error_log {directory}/error.log warn;
pid {directory}/nginx.pid;
events {{ worker_connections 4096; }}
http {{
    access_log off;
{temp}
    keepalive_requests 100000000;
    keepalive_timeout 300s;
    server {{
        listen 127.0.0.1:{port} reuseport;
        location = /v1/embeddings {{
            default_type application/json;
            if {probe} {{ return 200 {_quoted(embeddings_reply(1))}; }}
            return 200 {_quoted(embeddings_reply(batch))};
        }}
        location = /v1/chat/completions {{
            default_type text/event-stream;
            if {probe} {{ return 200 {_quoted(chat_reply())}; }}
            return 200 {_quoted(chat_stream(chunks))};
        }}
        location = /health {{ default_type text/plain; return 200 'ok'; }}
    }}
}}
"""


def free_port() -> int:
    """A TCP port on loopback that nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def write_config(directory: Path, port: int, batch: int, chunks: int) -> Path:
    """Write the configuration (and the temp directories nginx insists on); its path."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "nginx.conf"
    path.write_text(config(directory, port, batch, chunks))
    return path


def command(conf: Path) -> list[str]:
    """The nginx command line for ``conf`` (foreground; its prefix is the config's directory)."""
    return ["nginx", "-p", str(conf.parent), "-c", str(conf)]


def wait_healthy(url: str, timeout_s: float = 10.0) -> None:
    """Return once ``url``/health answers; RuntimeError after ``timeout_s``."""
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(url + "/health", timeout=1) as reply:
                if reply.status == 200:
                    return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nginx at {url} did not answer /health within {timeout_s:g} s")
