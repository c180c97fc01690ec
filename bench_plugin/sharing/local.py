"""The local backend: the scenario's servers as processes on this host's GPUs, or on its CPU.

- ``exclusive``: each class on a device of its own when there are enough whole GPUs; otherwise each
  class alone in turn (the solo control): one segment per class, nothing else running.
- ``time-slicing``: every class's server at once on the same GPU (or CPU); the driver (or the OS
  scheduler) interleaves them.
- ``mps``: as time-slicing, but every server is a client of an MPS control daemon started for the
  segment in its own directories (sharing/mps.py) and stopped with it.
- ``mig``: each class on its own existing MIG instance.

Every server on a GPU is pinned with ``CUDA_VISIBLE_DEVICES=<GPU or MIG UUID>`` and told
``--device cuda:0``, so device numbering cannot drift between the backend and the server. What each
mode and knob does, and what is refused, is decided in sharing/plan.py (docs/sharing-modes.md). An
arm's ``cpu_affinity`` pins each class's server to CPU cores (or a NUMA node) of this host, each class
being a process of its own (sharing/affinity.py); every placement records the cores read back from
the running server.

In an arm a disruption hits (scenario/disruption.py), each class is reached through a front
(sharing/front.py) that stays for the segment while the class's server is restarted, killed or rolled
behind it (sharing/restart.py); the placement's ``url`` is then the front's.

Every server, front (and MPS daemon) the backend starts it also stops: between segments, at the end, on
Ctrl-C, when a start fails, and (servers and fronts, by a parent-death signal) if the campaign is killed.
"""

from __future__ import annotations

import importlib.util
import os
import shlex
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from bench_plugin.results.facts import BackendFacts
from bench_plugin.results.placement import CAMPAIGN_ENV, CLASS_ENV, ClassPlacement, Placement
from bench_plugin.results.samples import Sample
from bench_plugin.scenario import Arm, Disruption, Scenario, format_cpulist
from bench_plugin.sharing.affinity import check_affinity, host_cpus, pins, read_cores
from bench_plugin.sharing.base import ApplyError, SharingBackend
from bench_plugin.sharing.devices import Device, host_devices
from bench_plugin.sharing.mps import (
    DEFAULT_PIPE_DIRECTORY,
    MPS_ENV_PREFIX,
    MpsDaemon,
    MpsError,
    find_control_binary,
    foreign_daemon_pipe,
)
from bench_plugin.sharing.plan import ServerPlan, assign_devices, check_arm, plan_segments, server_plan
from bench_plugin.sharing.processes import (
    HOST,
    FrontProcess,
    ServerProcess,
    free_port,
    port_of,
    start_front,
    start_server,
)
from bench_plugin.sharing.restart import Restarter

AUTO_SIZES: dict[str, dict[str, str]] = {
    "cpu": {"llm": "tiny", "embedding": "tiny", "asr": "tiny"},
    "gpu": {"llm": "1b", "embedding": "large", "asr": "base"},
}
"""What ``size: auto`` means per device kind: small enough for two CPU cores, busy enough for a GPU."""

INHERITED_BUT_DROPPED: tuple[str, ...] = (MPS_ENV_PREFIX, "CUDA_VISIBLE_DEVICES")
"""Variables of the campaign's own environment that never reach a server: the arm sets them, or nothing does."""


SERVER_MODULES: tuple[str, ...] = ("aiohttp", "numpy", "torch")
"""What the reference servers import (the 'servers' extra), checked before any server starts."""


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


class LocalBackend(SharingBackend):
    """Starts and stops the scenario's servers (and an MPS daemon) as local processes."""

    name = "local"

    def __init__(self, scenario: Scenario, log_dir: Path) -> None:
        super().__init__(scenario)
        self.log_dir = log_dir
        self.devices, self.device_info = host_devices()
        self.mps_control = find_control_binary()
        """The MPS control binary; None where there is none (MPS arms are then refused)."""
        self.host_cpus = host_cpus()
        """The cores this process may use and the NUMA nodes, against which ``cpu_affinity`` is checked."""
        self.mps_timeout_s = 30.0
        self.default_mps_pipe_directory = DEFAULT_PIPE_DIRECTORY
        """Where a daemon this tool did not start would listen for every CUDA process (checked, never touched)."""
        self.running: list[ServerProcess] = []
        self.mps: MpsDaemon | None = None
        self.fronts: dict[str, FrontProcess] = {}
        """Class -> its front, in a segment of an arm a disruption hits."""
        self.replacing: set[str] = set()
        """Classes whose server is being replaced now: its exit is the disruption's doing, not a failure."""
        self._plans: dict[str, ServerPlan] = {}
        self._where = (0, 0)
        """The current segment's plans and (trial, segment): what a restart starts again."""
        self._restarts = 0

    def describe(self) -> BackendFacts:
        return BackendFacts.model_validate({**self.device_info.model_dump(), "backend": self.name,
                                            "mps_control": self.mps_control, **self.host_cpus.describe()})

    def check(self, arm: Arm) -> None:
        names = self.scenario.classes.names()
        kinds = {name: self.scenario.classes.get(name).server.kind for name in names}
        foreign = foreign_daemon_pipe(self.default_mps_pipe_directory)
        check_arm(arm, names, kinds, self.devices, mps_control=self.mps_control,
                  foreign_mps_pipe=str(foreign) if foreign else None)
        try:
            check_affinity(arm, names, self.host_cpus)
        except ValueError as exc:
            raise ApplyError(f"arm '{arm.name}': {exc}") from None
        reference = [name for name in names if kinds[name] == "reference"]
        missing = [module for module in SERVER_MODULES if reference and not _importable(module)]
        if missing:
            raise ApplyError(f"the local backend starts reference servers for {', '.join(reference)}, which need "
                             f"{', '.join(missing)} (not installed): install the 'servers' extra "
                             "(pip install '.[servers]'), or measure your own servers with --host")

    def segments(self, arm: Arm, class_names: list[str]) -> list[list[str]]:
        return plan_segments(arm, class_names, self.devices)

    def size(self, name: str, device: Device) -> str:
        """The reference-server preset for class ``name`` on ``device``."""
        size = self.scenario.classes.get(name).server.size
        return AUTO_SIZES["gpu" if device.is_gpu else "cpu"][name] if size == "auto" else size

    def command(self, name: str, device: Device, port: int, extra: list[str] | None = None, arm: str = "",
                sharing: str = "exclusive") -> list[str]:
        """The command line that serves class ``name`` on ``device`` at ``port`` (``extra``: sharing flags) in arm
        ``arm`` of sharing mode ``sharing``."""
        spec = self.scenario.classes.get(name)
        server = spec.server
        # The server sees only its own GPU (CUDA_VISIBLE_DEVICES), which is therefore cuda:0 inside it.
        inside = "cuda:0" if device.is_gpu else "cpu"
        if server.kind == "command":
            assert server.command is not None
            fill = {"port": str(port), "host": HOST, "device": inside, "model": spec.model,
                    "python": sys.executable, "log_dir": str(self.log_dir),
                    "arm": arm, "sharing": sharing}
            return [part.format(**fill) for part in server.command]
        cmd = [
            sys.executable, "-m", "bench_plugin.servers", name, "--host", HOST, "--port", str(port),
            "--size", self.size(name, device), "--model-name", spec.model, "--device", inside,
        ]
        if server.threads is not None:
            cmd += ["--threads", str(server.threads)]
        return cmd + list(extra or []) + list(server.args)

    def plans(self, arm: Arm, class_names: list[str], mps_env: dict[str, str] | None = None) -> dict[str, ServerPlan]:
        """Device, environment, flags and CPU cores of each class's server in one segment."""
        devices = assign_devices(arm, class_names, self.devices)
        pinned = pins(arm, class_names, self.host_cpus)
        return {name: replace(server_plan(arm, name, devices[name], self.scenario.classes.get(name).server.kind,
                                          mps_env), pin=pinned.get(name))
                for name in class_names}

    def apply(self, arm: Arm, class_names: list[str], trial_id: int, segment: int) -> Placement:
        self.release()
        placements: dict[str, ClassPlacement] = {}
        try:
            mps_env = self._start_mps(arm, class_names, trial_id, segment) if arm.sharing == "mps" else None
            self._plans, self._where = self.plans(arm, class_names, mps_env), (trial_id, segment)
            if any(spec.hits(arm.name) for spec in self.scenario.disruptions):
                # Fronts first: each listens on a port the kernel gives it, which a server's port, chosen
                # free just before the server binds it, could otherwise be.
                for name in class_names:
                    self.fronts[name] = start_front(
                        name, HOST, self.log_dir / f"trial-{trial_id:03d}-seg{segment}-{name}-front.log")
            for name, plan in self._plans.items():
                placements[name] = self._start(name, plan, trial_id, segment)
                if name in self.fronts:
                    placements[name] = self._through_front(name, placements[name])
        except (OSError, MpsError) as exc:
            self.release()
            raise ApplyError(f"arm '{arm.name}': could not start: {exc}") from None
        except BaseException:
            self.release()  # Ctrl-C or a bug mid-start: leave nothing running, then let it through
            raise
        return Placement(placements)

    def _start_mps(self, arm: Arm, class_names: list[str], trial_id: int, segment: int) -> dict[str, str]:
        if self.mps_control is None:
            raise MpsError("nvidia-cuda-mps-control not found")
        devices = assign_devices(arm, class_names, self.devices).values()
        uuids = sorted({d.uuid for d in devices if d.uuid is not None})
        self.mps = MpsDaemon(self.mps_control, uuids, timeout_s=self.mps_timeout_s,
                             log_archive=self.log_dir / f"trial-{trial_id:03d}-seg{segment}-mps")
        self.mps.start()
        return self.mps.env

    def _through_front(self, name: str, placement: ClassPlacement) -> ClassPlacement:
        """Route class ``name``'s front to its server: its placement, reached through the front."""
        front = self.fronts[name]
        front.route(HOST, port_of(placement.url))
        return placement.model_copy(update={"url": f"http://{HOST}:{front.port}", "server_url": placement.url})

    def _start(self, name: str, plan: ServerPlan, trial_id: int, segment: int, suffix: str = "") -> ClassPlacement:
        port = free_port(HOST)
        pin = plan.pin
        cmd = (pin.prefix() if pin else []) + self.command(name, plan.device, port, plan.args, plan.arm, plan.sharing)
        log = self.log_dir / f"trial-{trial_id:03d}-seg{segment}-{name}{suffix}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "a", encoding="utf-8") as fh:
            settings = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(plan.env.items()))
            fh.write(f"# {settings} {shlex.join(cmd)}\n")
            if pin is not None:
                fh.write(f"# {pin.note()}\n")
        marker = {CAMPAIGN_ENV: str(self.log_dir.parent.resolve()), CLASS_ENV: name}
        proc = start_server(name, cmd, {**plan.env, **marker}, log, drop=INHERITED_BUT_DROPPED,
                            cores=pin.cores if pin else None)
        self.running.append(proc)
        # Pinned before exec, so what /proc says now is what every thread of the server gets.
        cores = read_cores(proc.pid)
        gone = cores is None and proc.exit_code() is not None  # readiness reports its exit and log
        if pin is not None and cores != pin.cores and not gone:
            got = format_cpulist(cores) if cores is not None else "unreadable"
            raise OSError(f"{name}'s server runs on cpus {got}, not the {format_cpulist(pin.cores)} it was given "
                          f"(/proc/{proc.pid}/status Cpus_allowed_list)")
        return ClassPlacement(
            url=f"http://{HOST}:{port}", device=plan.device.name, pid=proc.pid, command=cmd, env=plan.env,
            log=str(log), device_uuid=plan.device.uuid, gpu=plan.device.gpu,
            mps_daemon_pid=self.mps.pid if self.mps is not None else None,
            cpus=format_cpulist(cores) if cores is not None else None,
            numa_node=pin.numa_node if pin else None,
            numa_membind=(pin.membind is not None) if pin and pin.numa_node is not None else None,
        )

    def exited(self, name: str) -> str | None:
        proc = self.server(name)
        if proc is None or proc.exit_code() is None or name in self.replacing:
            return None
        return f"exit code {proc.exit_code()}; log {proc.log_path}: {proc.log_tail()}"

    def server(self, name: str) -> ServerProcess | None:
        """Class ``name``'s server process now (the newest, while a restart has two)."""
        return next((p for p in reversed(self.running) if p.name == name), None)

    def start_again(self, name: str) -> tuple[ServerProcess, ClassPlacement]:
        """Start another server for class ``name`` as the segment's first was started (a restart's new server)."""
        self._restarts += 1
        placement = self._start(name, self._plans[name], *self._where, suffix=f"-restart{self._restarts}")
        return self.running[-1], placement

    def mps_state(self) -> str | None:
        """The segment's MPS control daemon: "running (pid N)", or that it is gone; None without one."""
        if self.mps is None or self.mps.pid is None:
            return None
        try:
            os.kill(self.mps.pid, 0)
        except ProcessLookupError:
            return f"gone: the control daemon (pid {self.mps.pid}) exited"
        except PermissionError:
            pass
        return f"running (pid {self.mps.pid})"

    def disrupt(self, spec: Disruption, classes: list[str], record: Callable[..., None],
                probe: Callable[[str, str], Sample]) -> None:
        """Restart, kill or roll each of ``classes``' servers behind its front, in turn (sharing/restart.py)."""
        Restarter(self, spec, record, probe, self.scenario.readiness_timeout_s).run(classes)

    def end_disruption(self) -> None:
        """A server not started again stays down: liveness then names it (exited), and the campaign stops."""
        self.replacing.clear()

    def release(self) -> None:
        """Stop the servers (the MPS clients) first, then the MPS daemon, which waits for its clients; then the
        fronts."""
        try:
            while self.running:
                self.running.pop().stop()
            while self.fronts:
                self.fronts.popitem()[1].stop()
        finally:
            if self.mps is not None:
                daemon, self.mps = self.mps, None
                daemon.stop()
