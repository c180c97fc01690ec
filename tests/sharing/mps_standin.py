"""A stand-in for ``nvidia-cuda-mps-control`` with the same command-line and control interface.

Tests only: the real daemon needs an NVIDIA driver and GPU, which this host lacks; the device run
on the lent H200 starts the real one. Like the real binary it reads CUDA_MPS_PIPE_DIRECTORY and
CUDA_MPS_LOG_DIRECTORY; ``-d`` daemonises (double fork, new session), writes
``nvidia-cuda-mps-control.pid`` and a ``control`` endpoint (here a UNIX socket) into the pipe
directory and logs commands to ``control.log``; without arguments it sends each stdin line to the
daemon and prints the answer, failing when no daemon listens; ``quit`` ends the daemon.

Also appends what it saw (arguments, CUDA_* environment, commands) as JSON lines to
$STUB_MPS_RECORD, and misbehaves on purpose by $STUB_MPS_MODE: ``fail`` (-d exits 1),
``no-pipe`` (the daemon never opens its control endpoint), ``ignore-quit`` (quit is not obeyed).
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time

PIPE = os.environ.get("CUDA_MPS_PIPE_DIRECTORY", "/tmp/nvidia-mps")
LOGS = os.environ.get("CUDA_MPS_LOG_DIRECTORY", "/var/log/nvidia-mps")
MODE = os.environ.get("STUB_MPS_MODE", "")
CONTROL = os.path.join(PIPE, "control")
PID_FILE = os.path.join(PIPE, "nvidia-cuda-mps-control.pid")


def note(event: str, **fields: object) -> None:
    record = os.environ.get("STUB_MPS_RECORD")
    if record:
        with open(record, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"event": event, "pid": os.getpid(), **fields}) + "\n")


def log(line: str) -> None:
    with open(os.path.join(LOGS, "control.log"), "a", encoding="utf-8") as fh:
        fh.write(line + "\n")


def serve() -> None:
    with open(PID_FILE, "w", encoding="utf-8") as fh:
        fh.write(str(os.getpid()))
    note("serve")
    log("[INFO] Starting control daemon")
    if MODE == "no-pipe":
        time.sleep(3600)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(CONTROL)
    server.listen()
    while True:
        conn, _ = server.accept()
        with conn:
            line = conn.makefile("r").readline().strip()
            log(f"[INFO] User command: {line}")
            note("command", line=line)
            if line == "get_server_list":
                conn.sendall(b"")
            elif line == "quit" and MODE != "ignore-quit":
                conn.sendall(b"")
                server.close()
                os.unlink(CONTROL)
                os.unlink(PID_FILE)
                log("[INFO] Exit")
                return
            elif line != "quit":
                conn.sendall(b"Unknown command\n")


def daemonize() -> None:
    cuda = {k: v for k, v in os.environ.items() if k.startswith("CUDA_")}
    note("start", argv=sys.argv[1:], env=cuda)
    if MODE == "fail":
        print("stand-in: cannot start the daemon", file=sys.stderr)
        sys.exit(1)
    child = os.fork()
    if child:
        os.waitpid(child, 0)
        sys.exit(0)
    os.setsid()
    if os.fork():
        os._exit(0)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    try:
        serve()
    finally:
        os._exit(0)


def client() -> int:
    for line in sys.stdin:
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
                conn.connect(CONTROL)
                conn.sendall(line.strip().encode() + b"\n")
                conn.shutdown(socket.SHUT_WR)
                sys.stdout.write(conn.makefile("r").read())
        except OSError:
            print("Cannot find MPS control daemon process", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    if sys.argv[1:] == ["-d"]:
        daemonize()
    sys.exit(client())
