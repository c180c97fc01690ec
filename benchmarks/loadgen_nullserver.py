"""The null server of benchmarks/loadgen_capacity.py: benchmarks/nullserver, built here or carried.

benchmarks/nullserver/main.go answers the plugin's routes with realistic replies (one 1,024-value vector
per embedding input, as base64 or as JSON floats; vLLM-shaped LLM streams of exactly max_tokens chunks; a
transcription) at a few microseconds of its own CPU per request, so what limits a run against it is the
load generator. :func:`binary` finds it: ``--nullserver PATH`` (a static binary carried to a host without
Go), else a build with ``go`` into ~/.cache/bench-plugin/bin/nullserver, rebuilt whenever a source file
is newer than the binary.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

SOURCE = Path(__file__).resolve().parent / "nullserver"
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "bench-plugin" / "bin" / "nullserver"
MODEL = "null"
"""The model name every class asks for (the null server answers any)."""
BUILD = "cd benchmarks/nullserver && CGO_ENABLED=0 go build -o BIN ."


def binary(given: str | None) -> Path:
    """The null server's executable: ``given``, else the cached build (built or rebuilt here with ``go``)."""
    if given:
        path = Path(given).resolve()
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise RuntimeError(f"--nullserver {given}: not an executable file")
        return path
    sources = [*SOURCE.glob("*.go"), SOURCE / "go.mod"]
    newest = max(p.stat().st_mtime for p in sources)
    if CACHE.is_file() and CACHE.stat().st_mtime >= newest:
        return CACHE
    go = shutil.which("go")
    if go is None:
        raise RuntimeError(f"no `go` on PATH to build the null server: build it elsewhere ({BUILD}) "
                           "and give --nullserver BIN")
    CACHE.parent.mkdir(parents=True, exist_ok=True)
    partial = CACHE.with_name(f".nullserver-{os.getpid()}")
    env = {**os.environ, "CGO_ENABLED": "0"}
    done = subprocess.run([go, "build", "-o", str(partial), "."], cwd=SOURCE, env=env, capture_output=True,
                          text=True, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"building the null server failed: {done.stderr.strip()[-300:]}")
    partial.replace(CACHE)
    return CACHE


def describe(path: Path) -> dict[str, str]:
    """What identifies the binary in the results: its path and the start of its sha256."""
    return {"path": str(path), "sha256": hashlib.sha256(path.read_bytes()).hexdigest()[:16]}


def command(path: Path, port: int, itl_ms: float) -> list[str]:
    """The null server on loopback ``port``, ``itl_ms`` between two tokens of a stream."""
    return [str(path), "-addr", f"127.0.0.1:{port}", "-model", MODEL, "-itl", f"{itl_ms:g}ms"]


def free_port() -> int:
    """A TCP port on loopback that nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


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
    raise RuntimeError(f"the null server at {url} did not answer /health within {timeout_s:g} s")
