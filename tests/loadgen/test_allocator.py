"""Once settled, reading a large reply takes its memory from the heap, not from new pages each time.

Each check runs in a fresh process: mallopt's thresholds hold for the whole process.
"""

from __future__ import annotations

import platform
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

CHILD = r"""
import resource, socket, sys
from gevent import monkey
monkey.patch_all()
from geventhttpclient.response import HTTPSocketResponse
from bench_plugin.loadgen import allocator
from bench_plugin.users.body import read_all

if sys.argv[1] == "settled":
    assert allocator.settle() and allocator.settle()  # once, and again is a no-op that says so
body = b"[" + b"0.0123456789, " * 25_000 + b"1.0]"  # 350 KB: a 16 x 1,024-float reply's size
head = f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\n\r\n".encode()

def one():
    reader, writer = socket.socketpair()
    for end in (reader, writer):
        end.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
        end.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    writer.sendall(head + body)
    assert read_all(HTTPSocketResponse(reader, method="POST")) == body
    writer.close()
    reader.close()

for _ in range(5):
    one()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(50):
    one()
print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 50)
"""


def faults_per_read(mode: str) -> float:
    out = subprocess.run([sys.executable, "-c", CHILD, mode], capture_output=True, text=True, cwd=ROOT, timeout=120,
                         check=True)
    return float(out.stdout)


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt's thresholds are glibc's")
def test_a_settled_process_reads_a_large_reply_without_faulting_in_new_pages() -> None:
    # glibc's defaults map a fresh megabyte for each receive of up to a megabyte and fault in every page the reply
    # is copied into (87 for 350 KB); settled, the receives reuse heap the process already has
    settled = faults_per_read("settled")
    assert settled < 5, settled
    default = faults_per_read("default")
    assert default > settled, (default, settled)
