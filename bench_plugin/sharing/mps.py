"""The MPS control daemon of one segment: started in its own directories, stopped for sure.

An MPS arm gets a control daemon of its own (``nvidia-cuda-mps-control -d``) whose pipe and log
directories live in a fresh temporary directory, so it can neither join nor disturb a daemon someone
else runs (the default one listens in /tmp/nvidia-mps). Every server of the segment gets the same
``CUDA_MPS_PIPE_DIRECTORY`` and ``CUDA_MPS_LOG_DIRECTORY``, which is what makes it a client of this
daemon, plus its class's knobs (:func:`client_env`).

Stopping sends ``quit`` through the control pipe, waits until the daemon and the MPS servers it
spawned are gone, forces what is left (every process whose environment names our pipe directory:
nothing else can carry a directory made for this daemon), copies the logs out and removes the
directory. A failed start runs the same stop, and the stop is also registered with ``atexit``, so
no path leaves a daemon behind short of the campaign process being killed outright (SIGKILL); then
``CUDA_MPS_PIPE_DIRECTORY=<dir> nvidia-cuda-mps-control <<< quit`` stops it by hand.

Nothing here touches the GPU's compute mode or any other device setting: MPS works in the Default
compute mode (EXCLUSIVE_PROCESS is NVIDIA's recommendation for a daemon that owns the GPU, not a
requirement), and a benchmark must leave the host as it found it.
"""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from bench_plugin.scenario import ClassSettings

logger = logging.getLogger(__name__)

CONTROL_BINARY = "nvidia-cuda-mps-control"
FALLBACK_BIN_DIRS: tuple[str, ...] = ("/usr/local/nvidia/bin",)
"""Where the binary lives when the driver is mounted into a container but not on PATH."""
DEFAULT_PIPE_DIRECTORY = Path("/tmp/nvidia-mps")
"""Where a daemon started without CUDA_MPS_PIPE_DIRECTORY listens, and where CUDA clients look by default."""
MPS_ENV_PREFIX = "CUDA_MPS_"

CLIENT_PRIORITY: dict[str, str] = {"normal": "0", "low": "1"}
"""CUDA_MPS_CLIENT_PRIORITY levels: NVIDIA documents 0 (normal) and 1 (below normal), nothing above normal."""


class MpsError(Exception):
    """The MPS control daemon did not start, or did not answer; the message says why."""


def find_control_binary() -> str | None:
    """``nvidia-cuda-mps-control`` on PATH or in the driver's usual container mount, else None."""
    found = shutil.which(CONTROL_BINARY)
    if found:
        return found
    for folder in FALLBACK_BIN_DIRS:
        candidate = Path(folder) / CONTROL_BINARY
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def foreign_daemon_pipe(pipe_directory: Path = DEFAULT_PIPE_DIRECTORY) -> Path | None:
    """The control pipe of a daemon listening at the default location, if one exists.

    A CUDA process without CUDA_MPS_PIPE_DIRECTORY connects to that daemon, so every server of a
    non-MPS arm would silently run under MPS while it is there.
    """
    control = pipe_directory / "control"
    return control if control.exists() else None


def client_env(settings: ClassSettings) -> dict[str, str]:
    """One class's MPS knobs as client environment variables.

    The memory limit names device 0 because each server sees exactly one GPU (CUDA_VISIBLE_DEVICES
    holds its UUID). ``high`` has no MPS level and is refused before a campaign starts.
    """
    env = {"CUDA_MPS_CLIENT_PRIORITY": CLIENT_PRIORITY[settings.priority]}
    if settings.thread_percentage is not None:
        env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = str(settings.thread_percentage)
    if settings.memory_limit_mib is not None:
        env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] = f"0={settings.memory_limit_mib}M"
    return env


def without_mps_env(environ: dict[str, str]) -> dict[str, str]:
    """``environ`` minus every CUDA_MPS_* variable, so nothing inherited picks a daemon or its defaults."""
    return {k: v for k, v in environ.items() if not k.startswith(MPS_ENV_PREFIX)}


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    # The state letter follows the parenthesised command name; a zombie has already exited.
    return stat.rpartition(")")[2].split()[0] != "Z"


def _runs_mps_binary(pid: int) -> bool:
    # Guards the PIDs remembered from the PID file and get_server_list against reuse by another program.
    try:
        return b"nvidia-cuda-mps" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def processes_with_env(name: str, value: str) -> list[int]:
    """PIDs of this user's live processes whose initial environment has ``name=value``."""
    needle = f"{name}={value}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue  # gone meanwhile, or another user's process: neither can carry our directory
        if needle in environ.split(b"\0") and _alive(int(entry.name)):
            found.append(int(entry.name))
    return sorted(found)


class MpsDaemon:
    """One MPS control daemon with its own pipe and log directories."""

    def __init__(self, control: str, visible_devices: list[str], *, timeout_s: float = 30.0,
                 log_archive: Path | None = None) -> None:
        """``visible_devices``: the GPU UUIDs the daemon (and so its servers) may use.

        ``log_archive``: a path prefix; on stop the daemon's logs are copied to ``<prefix>-<name>``.
        """
        self.control = control
        self.visible_devices = visible_devices
        self.timeout_s = timeout_s
        self.log_archive = log_archive
        self.directory: Path | None = None
        self.pid: int | None = None
        self.server_pids: list[int] = []

    @property
    def pipe_directory(self) -> Path:
        """Where the control pipe lives."""
        assert self.directory is not None, "the daemon is not started"
        return self.directory / "pipe"

    @property
    def log_directory(self) -> Path:
        """Where control.log and server.log are written."""
        assert self.directory is not None, "the daemon is not started"
        return self.directory / "log"

    @property
    def env(self) -> dict[str, str]:
        """The two variables that make a process a client of this daemon."""
        return {"CUDA_MPS_PIPE_DIRECTORY": str(self.pipe_directory), "CUDA_MPS_LOG_DIRECTORY": str(self.log_directory)}

    def _environ(self) -> dict[str, str]:
        environ = without_mps_env(dict(os.environ))
        environ.pop("CUDA_VISIBLE_DEVICES", None)
        if self.visible_devices:
            # UUIDs, not indices: the MPS server renumbers the devices it sees, and clients name theirs
            # by UUID too, so both sides agree whatever the host's numbering (NVIDIA MPS docs).
            environ["CUDA_VISIBLE_DEVICES"] = ",".join(self.visible_devices)
        return {**environ, **self.env}

    def start(self) -> None:
        """Start the daemon and check it answers; on any failure stop it again and raise MpsError."""
        if self.directory is not None:
            raise MpsError("this MPS daemon is already started")
        self.directory = Path(tempfile.mkdtemp(prefix="bench-mps-"))
        self.pipe_directory.mkdir()
        self.log_directory.mkdir()
        atexit.register(self.stop)
        try:
            self._launch()
            self._wait_for_pipe()
            answer = self.command("get_server_list")
            if answer.returncode != 0:
                raise MpsError(f"the daemon does not answer get_server_list (exit {answer.returncode}: "
                               f"{(answer.stdout + answer.stderr).strip()})")
        except BaseException as exc:
            reason = str(exc) if isinstance(exc, MpsError) else f"{type(exc).__name__}: {exc}"
            log = self.log_tail()
            self.stop()
            if isinstance(exc, MpsError | OSError | subprocess.TimeoutExpired):
                raise MpsError(f"MPS control daemon ({self.control}) did not start: {reason}"
                               + (f"; control.log: {log}" if log else "")) from None
            raise
        self.pid = self._read_pid()
        logger.info("MPS control daemon %s started in %s", self.pid, self.directory)

    def _launch(self) -> None:
        assert self.directory is not None
        # Output to a file, not a pipe: the daemonised child keeps the parent's stdout open, and reading a
        # pipe would wait for the daemon to end.
        out_path = self.directory / "start.out"
        with open(out_path, "wb") as out:
            done = subprocess.run([self.control, "-d"], env=self._environ(), stdin=subprocess.DEVNULL, stdout=out,
                                  stderr=subprocess.STDOUT, timeout=self.timeout_s, check=False)
        if done.returncode != 0:
            said = out_path.read_text(errors="replace").strip()
            raise MpsError(f"'{self.control} -d' exited {done.returncode}" + (f": {said}" if said else ""))

    def _wait_for_pipe(self) -> None:
        control = self.pipe_directory / "control"
        deadline = time.monotonic() + self.timeout_s
        while not control.exists():
            if time.monotonic() > deadline:
                raise MpsError(f"no control pipe at {control} after {self.timeout_s:.0f} s")
            time.sleep(0.05)

    def _read_pid(self) -> int | None:
        try:
            return int((self.pipe_directory / "nvidia-cuda-mps-control.pid").read_text().strip())
        except (OSError, ValueError):
            return None  # not every driver writes the PID file; the environment scan finds the daemon anyway

    def command(self, line: str) -> subprocess.CompletedProcess[str]:
        """Send one control command (``get_server_list``, ``quit``...) the way ``echo line | ...`` does."""
        return subprocess.run([self.control], input=line + "\n", env=self._environ(), capture_output=True, text=True,
                              timeout=self.timeout_s, check=False)

    def log_tail(self, lines: int = 5) -> str:
        """The last lines of control.log, for error messages."""
        if self.directory is None:
            return ""
        try:
            text = (self.log_directory / "control.log").read_text(errors="replace")
        except OSError:
            return ""
        return " | ".join(text.strip().splitlines()[-lines:])

    def processes(self) -> list[int]:
        """PIDs of the daemon and the MPS servers (and any client still running) of this daemon."""
        if self.directory is None:
            return []
        found = set(processes_with_env("CUDA_MPS_PIPE_DIRECTORY", str(self.pipe_directory)))
        remembered = [pid for pid in [self.pid, *self.server_pids] if pid is not None]
        found.update(pid for pid in remembered if _alive(pid) and _runs_mps_binary(pid))
        return sorted(found)

    def stop(self) -> list[str]:
        """Quit the daemon, wait until its processes are gone, remove its directory; safe to repeat.

        Returns the problems met on the way (a quit that was not answered, processes that had to be
        killed); each is also logged as a warning.
        """
        if self.directory is None:
            return []
        atexit.unregister(self.stop)
        problems = self._quit()
        left = self._wait_gone(self.timeout_s)
        if left:
            problems.append(f"still running after quit, terminated: {left}")
            self._force(left)
        self._archive_logs()
        shutil.rmtree(self.directory, ignore_errors=False)
        logger.info("MPS control daemon %s stopped; %s removed", self.pid, self.directory)
        self.directory = None
        for problem in problems:
            logger.warning("MPS control daemon: %s", problem)
        return problems

    def _quit(self) -> list[str]:
        if not (self.pipe_directory / "control").exists():
            return []  # never came up, or already gone: the process scan below finds any remains
        try:
            servers = self.command("get_server_list")
            self.server_pids = [int(p) for p in servers.stdout.split() if p.isdigit()]
            done = self.command("quit")
        except (OSError, subprocess.TimeoutExpired) as exc:
            return [f"quit not delivered: {exc}"]
        if done.returncode != 0:
            return [f"quit exited {done.returncode}: {(done.stdout + done.stderr).strip()}"]
        return []

    def _wait_gone(self, timeout_s: float, signalled: list[int] | None = None) -> list[int]:
        """What is still running after up to ``timeout_s``: the environment scan's processes, and of the
        ``signalled`` ones each that has not exited yet (a process mid-exit has lost its environment and
        command line, so the scan no longer sees it, before it is a zombie)."""
        deadline = time.monotonic() + timeout_s

        def left() -> list[int]:
            return sorted(set(self.processes()) | {pid for pid in signalled or [] if _alive(pid)})

        while (running := left()) and time.monotonic() < deadline:
            time.sleep(0.05)
        return running

    def _force(self, pids: list[int]) -> None:
        # These processes carry our freshly made pipe directory in their environment: ours to end.
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for pid in pids:
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    continue  # ended meanwhile
            pids = self._wait_gone(2.0, signalled=pids)
            if not pids:
                return
        logger.error("MPS processes %s survived SIGKILL", pids)

    def _archive_logs(self) -> None:
        if self.log_archive is None:
            return
        for name in ("control.log", "server.log"):
            source = self.log_directory / name
            if source.exists():
                self.log_archive.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source, f"{self.log_archive}-{name}")
