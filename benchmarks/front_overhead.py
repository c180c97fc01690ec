"""Benchmark: what a class's front (bench_plugin/sharing/front.py) adds to each request, against the same server direct.

A campaign whose arm has a disruption on the local backend reaches every class through its front, a TCP relay
that lets the backend move a class to a new server mid-stage. This measures what the relay costs a request:
one client, one request in flight, a kept-alive connection, against benchmarks/nullserver (realistic replies
at a few microseconds of its own CPU) direct and through a front routed to it, in interleaved rounds, per
request kind:

- ``embedding``: 16 inputs, a base64 reply of 16 x 1,024 float32 (about 88 KB);
- ``asr``: a 220 KB upload, a short JSON reply;
- ``llm``: a chat stream of 64 chunks, read to its end (time to the first chunk, and to the last).

Per kind and path: latency P50 and P99 over every round's requests, and the front's CPU per request (its
process's user + system time over the rounds through it, from /proc). The client runs in this process
(stdlib http.client), the null server and the front in their own.

    .venv/bin/python benchmarks/front_overhead.py [--requests 400] [--rounds 5] [--nullserver BIN]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from loadgen_nullserver import MODEL, binary, command, describe, free_port, wait_healthy

from bench_plugin.analysis.statistics import percentile
from bench_plugin.sharing.processes import HOST, start_front

ASR_BYTES = 220 * 1024
STREAM_TOKENS = 64


def _embedding(conn: http.client.HTTPConnection) -> tuple[float, float | None]:
    body = json.dumps({"model": MODEL, "input": [f"text number {i} " * 8 for i in range(16)],
                       "encoding_format": "base64"}).encode()
    start = time.perf_counter()
    conn.request("POST", "/v1/embeddings", body, {"Content-Type": "application/json"})
    reply = conn.getresponse()
    data = reply.read()
    end = time.perf_counter()
    if reply.status != 200 or len(data) < 80_000:
        raise RuntimeError(f"embedding: HTTP {reply.status}, {len(data)} bytes")
    return end - start, None


_AUDIO = b"--b\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\n" + MODEL.encode() + (
    b"\r\n--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.wav\"\r\nContent-Type: audio/wav\r\n\r\n"
    + b"\0" * ASR_BYTES + b"\r\n--b--\r\n")


def _asr(conn: http.client.HTTPConnection) -> tuple[float, float | None]:
    start = time.perf_counter()
    conn.request("POST", "/v1/audio/transcriptions", _AUDIO, {"Content-Type": "multipart/form-data; boundary=b"})
    reply = conn.getresponse()
    data = reply.read()
    end = time.perf_counter()
    if reply.status != 200 or b"text" not in data:
        raise RuntimeError(f"asr: HTTP {reply.status}: {data[:200]!r}")
    return end - start, None


def _llm(conn: http.client.HTTPConnection) -> tuple[float, float | None]:
    body = json.dumps({"model": MODEL, "messages": [{"role": "user", "content": "hello"}], "stream": True,
                       "max_tokens": STREAM_TOKENS}).encode()
    start = time.perf_counter()
    conn.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
    reply = conn.getresponse()
    first = None
    events = 0
    while True:
        line = reply.readline()
        if not line:
            break
        if line.startswith(b"data:"):
            if first is None:
                first = time.perf_counter() - start
            events += 1
    end = time.perf_counter()
    if reply.status != 200 or events < STREAM_TOKENS:
        raise RuntimeError(f"llm: HTTP {reply.status}, {events} events")
    return end - start, first


KINDS: dict[str, Callable[[http.client.HTTPConnection], tuple[float, float | None]]] = {
    "embedding": _embedding, "asr": _asr, "llm": _llm}


def _cpu_s(pid: int) -> float:
    """User + system seconds of process ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _round(port: int, kind: str, n: int) -> tuple[list[float], list[float]]:
    """``n`` requests of ``kind`` on one kept-alive connection to ``port``: their latencies and first-chunk times."""
    conn = http.client.HTTPConnection(HOST, port, timeout=30)
    run = KINDS[kind]
    run(conn)  # the connection opened, and one request warm
    latencies, firsts = [], []
    for _ in range(n):
        latency, first = run(conn)
        latencies.append(latency)
        if first is not None:
            firsts.append(first)
    conn.close()
    return latencies, firsts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=400, help="requests per round and path (default 400)")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds, direct then through the front")
    parser.add_argument("--nullserver", default=None, help="a prebuilt null server (default: built with go)")
    parser.add_argument("--kinds", default=",".join(KINDS), help=f"of {', '.join(KINDS)}")
    args = parser.parse_args()
    server_bin = binary(args.nullserver)
    port = free_port()
    server = subprocess.Popen(command(server_bin, port, 0.0), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    logs = Path(tempfile.mkdtemp(prefix="front-overhead-"))
    front = None
    try:
        wait_healthy(f"http://{HOST}:{port}")
        front = start_front("bench", HOST, logs / "front.log")
        front.route(HOST, port)
        results: dict[str, dict[str, object]] = {}
        for kind in args.kinds.split(","):
            direct: tuple[list[float], list[float]] = ([], [])
            fronted: tuple[list[float], list[float]] = ([], [])
            front_cpu = 0.0
            for _ in range(args.rounds):
                for target, into in ((port, direct), (front.port, fronted)):
                    before = _cpu_s(front.process.pid)
                    latencies, firsts = _round(target, kind, args.requests)
                    if target == front.port:
                        front_cpu += _cpu_s(front.process.pid) - before
                    into[0].extend(latencies)
                    into[1].extend(firsts)
            n = args.rounds * args.requests
            row: dict[str, object] = {"requests_per_path": n, "front_cpu_us_per_request": 1e6 * front_cpu / n}
            for name, (latencies, firsts) in (("direct", direct), ("front", fronted)):
                p99 = percentile(latencies, 99)  # linear interpolation, as every percentile of the project
                row[name] = {"p50_ms": 1000 * statistics.median(latencies), "p99_ms": 1000 * (p99 or 0.0)}
                if firsts:
                    row[name]["first_p50_ms"] = 1000 * statistics.median(firsts)  # type: ignore[index]
            results[kind] = row
        print(json.dumps({"taken": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cores": os.cpu_count(),
                          "python": sys.version.split()[0], "nullserver": describe(server_bin),
                          "results": results}, indent=1))
        print()
        print("| request | direct P50 / P99 (ms) | through the front P50 / P99 (ms) | added P50 (ms) | "
              "front CPU per request (us) |")
        print("|---|---|---|---:|---:|")
        for kind, row in results.items():
            d, f = row["direct"], row["front"]
            assert isinstance(d, dict) and isinstance(f, dict)
            first = (f" (first chunk {d['first_p50_ms']:.3f} / {f['first_p50_ms']:.3f})"
                     if "first_p50_ms" in d else "")
            print(f"| {kind}{first} | {d['p50_ms']:.3f} / {d['p99_ms']:.3f} | {f['p50_ms']:.3f} / {f['p99_ms']:.3f} | "
                  f"{f['p50_ms'] - d['p50_ms']:+.3f} | {row['front_cpu_us_per_request']:.0f} |")
    finally:
        if front is not None:
            front.stop()
        server.terminate()
        server.wait(timeout=10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
