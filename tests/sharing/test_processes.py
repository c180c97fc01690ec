"""The local backend's process helpers: free ports for servers that bind them a moment later."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from bench_plugin.sharing import processes
from bench_plugin.sharing.processes import free_port


def test_a_server_port_is_outside_the_ports_the_kernel_hands_out_and_free() -> None:
    """The kernel gives its ephemeral ports to every probe and every connection's own end, so one it gave a probe
    could be taken before the server binds it; a port picked outside that range cannot be, and is bindable."""
    low, high = processes._ephemeral()
    ports = {free_port() for _ in range(50)}
    assert len(ports) > 40  # picked at random, not one after another
    for port in ports:
        assert processes.CHOSEN_FROM <= port < low or port > high, port
    with socket.socket() as sock:
        sock.bind((processes.HOST, ports.pop()))


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind((processes.HOST, port))
        except OSError:
            return False
    return True


def test_a_taken_port_is_not_picked(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each pick is checked by binding it: a port in use is passed over for the next pick."""
    with socket.socket() as taken:
        taken.bind((processes.HOST, 0))
        taken.listen()
        busy = taken.getsockname()[1]
        free = next(port for port in range(23_456, 24_456) if _bindable(port))
        picks = iter([busy, busy, free])
        monkeypatch.setattr(processes._RANDOM, "randrange", lambda start, stop: next(picks))
        monkeypatch.setattr(processes, "_ephemeral", lambda: (32768, 60999))
        assert free_port() == free


def test_without_the_kernel_s_range_it_falls_back_to_linux_s_default(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(processes, "EPHEMERAL_RANGE", tmp_path / "absent")
    assert processes._ephemeral() == (32768, 60999)
