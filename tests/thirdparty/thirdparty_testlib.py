"""The third-party tier's parts: the environments tools/thirdparty/setup.sh builds, the servers run from
them, and the scenarios that point the plugin at those servers.

Every process here runs offline (OFFLINE_ENV: no model hub, no telemetry) with a cache folder of its own,
on loopback, one thread of torch each (two cores are shared by three servers and the load generator).
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import importlib.metadata
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests
import yaml

ROOT = Path(__file__).resolve().parents[2]
THIRDPARTY = ROOT / ".thirdparty"
SETUP = "tools/thirdparty/setup.sh"
MODELS_SCRIPT = Path(__file__).resolve().parent / "models.py"

OFFLINE_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "DO_NOT_TRACK": "1",  # infinity-emb's anonymous usage statistics (posthog)
    "INFINITY_ANONYMOUS_USAGE_STATS": "0",
    "TOKENIZERS_PARALLELISM": "false",
    "OMP_NUM_THREADS": "1",
}
"""Set for every third-party process: nothing is fetched or reported, whatever a model folder names."""

STARTUP_S = 120.0
"""How long a server may take to answer its health check (seconds: about 3 for transformers serve, 7 for
infinity-emb on two idle cores)."""

CB_FLAGS = ["--continuous-batching", "--cb-num-blocks", "64", "--cb-block-size", "32", "--cb-max-batch-tokens", "256"]
"""transformers serve with continuous batching, its paged KV cache sized by hand: left to itself on a CPU it
sizes the cache from the host's RAM (continuous_batching/cache.py, get_available_memory: a share of
psutil's total), which took 35 s and gigabytes on the first request here; 64 blocks of 32 tokens take 3 s."""


class EnvironmentMissing(Exception):
    """A .thirdparty/<name> environment that is absent or out of date: the message says to run setup.sh."""


def env_dir(name: str) -> Path:
    """.thirdparty/<name>, checked against the stamp setup.sh writes (the lock's and the script's sha256,
    the main venv's torch version); EnvironmentMissing where it was never built or was built from another lock."""
    venv = THIRDPARTY / name
    stamp = venv / ".installed"
    if not (venv / "bin" / "python").exists() or not stamp.is_file():
        raise EnvironmentMissing(f".thirdparty/{name} is missing: run {SETUP} (make test runs it)")
    digest = hashlib.sha256((ROOT / "requirements" / f"{name}.txt").read_bytes()
                            + (ROOT / SETUP).read_bytes()).hexdigest()
    wanted = f"{digest} torch-{importlib.metadata.version('torch')}"
    if stamp.read_text().strip() != wanted:
        raise EnvironmentMissing(f".thirdparty/{name} was built from another requirements/{name}.txt, "
                                 f"{SETUP} or torch: run {SETUP} (make test runs it)")
    return venv


def process_env(home: Path) -> dict[str, str]:
    """The environment of a third-party process: this one's, offline, with ``home`` as its Hugging Face home
    (so no cache of this host's is read or written), and nothing of the main venv's."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
    return {**env, **OFFLINE_ENV, "HF_HOME": str(home), "INFINITY_HOME": str(home)}


def _die_with_parent() -> None:  # between fork and exec: a pytest that is killed takes its servers along
    with contextlib.suppress(OSError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def spawn(argv: list[str], log: Path, home: Path) -> subprocess.Popen[bytes]:
    """``argv`` in a process group of its own, output to ``log``."""
    with open(log, "wb") as out:
        return subprocess.Popen(argv, cwd=home, env=process_env(home), stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=_die_with_parent)


def group_members(pgid: int) -> list[int]:
    """The live processes of process group ``pgid``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = entry.joinpath("stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != "Z" and int(fields[2]) == pgid:
            found.append(int(entry.name))
    return found


def stop_group(process: subprocess.Popen[bytes], grace_s: float = 10.0) -> list[int]:
    """SIGTERM to ``process``'s group, SIGKILL to what is left after ``grace_s``; the pids that needed SIGKILL."""
    pgid = process.pid
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        process.poll()
        if not group_members(pgid):
            break
        time.sleep(0.1)
    stubborn = group_members(pgid)
    if stubborn:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)
    process.wait(timeout=10)
    return stubborn


@dataclass
class Server:
    """One third-party server on loopback: what it is, where it answers, its log."""

    name: str
    url: str
    log: Path
    process: subprocess.Popen[bytes]
    health: str = "/health"
    models: dict[str, str] = field(default_factory=dict)
    """Class -> the model name that requests for that class give."""

    def log_text(self, since: int = 0) -> str:
        """The server's output from byte ``since`` on."""
        with open(self.log, "rb") as fh:
            fh.seek(since)
            return fh.read().decode("utf-8", errors="replace")

    def log_size(self) -> int:
        return self.log.stat().st_size

    def tail(self, chars: int = 3000) -> str:
        return self.log_text()[-chars:]

    def wait_ready(self, timeout_s: float = STARTUP_S) -> None:
        """Until GET ``health`` answers 200; AssertionError with the log's tail if the server exits or is late."""
        deadline = time.monotonic() + timeout_s
        while True:
            if self.process.poll() is not None:
                raise AssertionError(f"{self.name} exited with {self.process.returncode} before it answered "
                                     f"{self.health}; its log ({self.log}):\n{self.tail()}")
            try:
                if requests.get(self.url + self.health, timeout=2).status_code == 200:
                    return
            except requests.RequestException:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name} did not answer {self.health} within {timeout_s:.0f} s; its log "
                                     f"({self.log}):\n{self.tail()}")
            time.sleep(0.2)


def write_scenario(path: Path, name: str, classes: dict[str, dict[str, Any]], load: dict[str, float],
                   duration_s: float = 4.0) -> Path:
    """A one-arm, one-repeat, one-stage scenario for the manual backend: each class's ``endpoint`` (in
    ``classes``) is a server already running, which the plugin measures and never starts or stops."""
    scenario = {
        "name": name,
        "description": f"tests/thirdparty: the plugin against {name}",
        "change": "nothing (one arm)",
        "fixed": "a third-party server, a tiny random model",
        "repeats": 1,
        "seed": 1,
        "backend": "manual",
        "readiness_timeout_s": 60,
        "drain_timeout_s": 20,
        "classes": classes,
        "arms": [{"name": "exclusive", "control": True, "sharing": "exclusive"}],
        "stages": [{"name": "low", "duration_s": duration_s, "load": load}],
    }
    path.write_text(yaml.safe_dump(scenario, sort_keys=False))
    return path
