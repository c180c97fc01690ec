"""The local backend: reference servers as processes on this host's GPUs, or on its CPU.

- ``exclusive``: each class on a device of its own when there are enough devices; otherwise each
  class alone in turn (the solo control): one segment per class, nothing else running.
- ``time-slicing``: every class's server at once on the same device; the driver (GPU) or the OS
  scheduler (CPU) interleaves them.
- ``mps`` and ``mig`` need NVIDIA GPUs with those features; they are refused, with the reason,
  before a campaign starts on a host that cannot apply them.

Every server the backend starts it also stops, between segments, at the end, on Ctrl-C, and (by a
parent-death signal) if the campaign process itself is killed.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Any

from bench_plugin.scenario import Arm, Scenario
from bench_plugin.sharing.base import ApplyError, ClassPlacement, Placement, SharingBackend
from bench_plugin.sharing.devices import Device, host_devices
from bench_plugin.sharing.processes import ServerProcess, free_port, start_server

HOST = "127.0.0.1"

AUTO_SIZES: dict[str, dict[str, str]] = {
    "cpu": {"llm": "tiny", "embedding": "tiny", "asr": "tiny"},
    "gpu": {"llm": "1b", "embedding": "large", "asr": "base"},
}
"""What ``size: auto`` means per device kind: small enough for two CPU cores, busy enough for a GPU."""


class LocalBackend(SharingBackend):
    """Starts and stops the scenario's servers as local processes."""

    name = "local"

    def __init__(self, scenario: Scenario, log_dir: Path) -> None:
        super().__init__(scenario)
        self.log_dir = log_dir
        self.devices, self.device_info = host_devices()
        self.running: list[ServerProcess] = []

    def describe(self) -> dict[str, Any]:
        return {
            "backend": self.name,
            "devices": [d.__dict__ for d in self.devices],
            **self.device_info,
        }

    def check(self, arm: Arm) -> None:
        has_gpu = any(d.is_gpu for d in self.devices)
        if arm.sharing in ("mps", "mig") and not has_gpu:
            raise ApplyError(f"arm '{arm.name}': sharing '{arm.sharing}' needs an NVIDIA GPU; this host has none")
        if arm.sharing in ("mps", "mig"):
            raise ApplyError(f"arm '{arm.name}': sharing '{arm.sharing}' is not supported by the local backend yet")
        for name, settings in arm.classes.items():
            if settings.thread_percentage is not None and arm.sharing != "mps":
                raise ApplyError(f"arm '{arm.name}': classes.{name}.thread_percentage needs sharing 'mps'")
            if settings.memory_limit_mib is not None or settings.priority != "normal":
                raise ApplyError(
                    f"arm '{arm.name}': classes.{name}: memory limits and priorities need an NVIDIA GPU "
                    "and are not supported by the local backend yet"
                )
            if settings.device is not None and settings.device not in [d.name for d in self.devices]:
                known = ", ".join(d.name for d in self.devices)
                raise ApplyError(f"arm '{arm.name}': classes.{name}.device {settings.device!r} is not on this "
                                 f"host (devices: {known})")

    def segments(self, arm: Arm, class_names: list[str]) -> list[list[str]]:
        if arm.sharing == "exclusive" and len(self.devices) < len(class_names):
            return [[name] for name in class_names]
        return [list(class_names)]

    def _device_for(self, arm: Arm, name: str, index: int) -> Device:
        settings = arm.classes.get(name)  # type: ignore[call-overload]
        if settings is not None and settings.device is not None:
            return next(d for d in self.devices if d.name == settings.device)
        if arm.sharing == "exclusive":
            return self.devices[index % len(self.devices)]
        return self.devices[0]

    def size(self, name: str, device: Device) -> str:
        """The reference-server preset for class ``name`` on ``device``."""
        size = self.scenario.classes.get(name).server.size
        return AUTO_SIZES["gpu" if device.is_gpu else "cpu"][name] if size == "auto" else size

    def command(self, name: str, device: Device, port: int) -> list[str]:
        """The command line that serves class ``name`` on ``device`` at ``port``."""
        spec = self.scenario.classes.get(name)
        server = spec.server
        if server.kind == "command":
            assert server.command is not None
            fill = {"port": str(port), "host": HOST, "device": device.name, "model": spec.model,
                    "python": sys.executable, "log_dir": str(self.log_dir)}
            return [part.format(**fill) for part in server.command]
        cmd = [
            sys.executable, "-m", "bench_plugin.servers", name, "--host", HOST, "--port", str(port),
            "--size", self.size(name, device), "--model-name", spec.model, "--device", device.name,
        ]
        if server.threads is not None:
            cmd += ["--threads", str(server.threads)]
        return cmd + list(server.args)

    def apply(self, arm: Arm, class_names: list[str], trial_id: int, segment: int) -> Placement:
        self.release()
        placements: dict[str, ClassPlacement] = {}
        try:
            for index, name in enumerate(class_names):
                device = self._device_for(arm, name, index)
                port = free_port(HOST)
                cmd = self.command(name, device, port)
                env = {"PYTHONUNBUFFERED": "1"}
                log = self.log_dir / f"trial-{trial_id:03d}-seg{segment}-{name}.log"
                log.parent.mkdir(parents=True, exist_ok=True)
                with open(log, "a", encoding="utf-8") as fh:
                    fh.write(f"# {shlex.join(cmd)}\n")
                proc = start_server(name, cmd, env, log)
                self.running.append(proc)
                placements[name] = ClassPlacement(
                    url=f"http://{HOST}:{port}", device=device.name, pid=proc.pid, command=cmd, env=env, log=str(log)
                )
        except OSError as exc:
            self.release()
            raise ApplyError(f"arm '{arm.name}': could not start a server: {exc}") from None
        return Placement(placements)

    def exited(self, name: str) -> str | None:
        proc = next((p for p in self.running if p.name == name), None)
        if proc is None or proc.exit_code() is None:
            return None
        return f"exit code {proc.exit_code()}; log {proc.log_path}: {proc.log_tail()}"

    def release(self) -> None:
        while self.running:
            self.running.pop().stop()
