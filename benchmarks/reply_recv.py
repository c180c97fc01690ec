"""What reading a realistic embedding reply off a socket costs, with glibc's malloc as it comes and as tuned.

    .venv/bin/python benchmarks/reply_recv.py [--replies 400] [--runs 3]

Each run is a fresh process (mallopt is process-wide) that builds a reply of the embedding class's real
size and shape (16 x 1,024 float32: base64, about 88 KB, or JSON floats as Python's ``json`` writes them,
about 348 KB), puts it whole into a loopback socket pair's buffers ``--replies`` times, and reads it the
way the users do: geventhttpclient's response, ``users/body.read_all`` (receives of up to a megabyte),
then ``users/shapes.decode_embeddings``. It prints the CPU per reply of the read alone and of read and
decode, with glibc's defaults (``default``) and after ``loadgen/allocator.settle`` (``settled``), the
kinds taking turns, and the median of the runs.
"""

from __future__ import annotations

import argparse
import base64
import json
import random
import statistics
import struct
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def body(kind: str) -> bytes:
    """A vLLM-style /v1/embeddings reply: 16 unit-norm vectors of 1,024 values, as ``kind`` asks."""
    rng = random.Random(1)
    data = []
    for index in range(16):
        vector = [rng.gauss(0.0, 1.0) for _ in range(1024)]
        norm = sum(v * v for v in vector) ** 0.5
        vector = [v / norm for v in vector]
        if kind == "base64":
            packed = struct.pack("<1024f", *vector)
            data.append({"object": "embedding", "embedding": base64.b64encode(packed).decode(), "index": index})
        else:
            data.append({"object": "embedding", "embedding": [struct.unpack("<f", struct.pack("<f", v))[0]
                                                               for v in vector], "index": index})
    return json.dumps({"object": "list", "data": data, "model": "null",
                       "usage": {"prompt_tokens": 2048, "total_tokens": 2048}}).encode()


def child(kind: str, settled: bool, replies: int) -> None:
    """One run: print ``read_us decode_us`` per reply (CPU, this process)."""
    import socket
    import time

    from gevent import monkey
    monkey.patch_all()
    from geventhttpclient.response import HTTPSocketResponse

    from bench_plugin.loadgen import allocator
    from bench_plugin.users.body import read_all
    from bench_plugin.users.shapes import decode_embeddings

    if settled and not allocator.settle():
        raise SystemExit("glibc's mallopt is not available here")
    reply = body(kind)
    head = f"HTTP/1.1 200 OK\r\nContent-Length: {len(reply)}\r\nContent-Type: application/json\r\n\r\n".encode()
    read_s = decode_s = 0.0
    for _ in range(replies):
        reader, writer = socket.socketpair()
        for end in (reader, writer):
            end.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
            end.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        writer.sendall(head + reply)
        response = HTTPSocketResponse(reader, method="POST")
        began = time.process_time()
        whole = read_all(response)
        read = time.process_time()
        decode_embeddings(whole)
        decode_s += time.process_time() - read
        read_s += read - began
        assert len(whole) == len(reply)
        writer.close()
        reader.close()
    print(f"{read_s / replies * 1e6:.1f} {(read_s + decode_s) / replies * 1e6:.1f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replies", type=int, default=400)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--child", nargs=2, metavar=("KIND", "MODE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], args.child[1] == "settled", args.replies)
        return 0
    print("| reply | malloc | read, us/reply (runs) | read + decode, us/reply (runs) |")
    print("|---|---|---|---|")
    for kind in ("base64", "float"):
        got: dict[str, list[tuple[float, float]]] = {"default": [], "settled": []}
        for _ in range(args.runs):
            for mode in got:
                out = subprocess.run([sys.executable, __file__, "--replies", str(args.replies), "--child", kind, mode],
                                     capture_output=True, text=True, check=True, cwd=ROOT,
                                     env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
                read_us, total_us = (float(v) for v in out.stdout.split())
                got[mode].append((read_us, total_us))
        for mode, runs in got.items():
            reads = ", ".join(f"{r:.0f}" for r, _ in runs)
            totals = ", ".join(f"{t:.0f}" for _, t in runs)
            print(f"| {kind} ({len(body(kind)) >> 10} KiB) | {mode} | **{statistics.median(r for r, _ in runs):.0f}** "
                  f"({reads}) | **{statistics.median(t for _, t in runs):.0f}** ({totals}) |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
