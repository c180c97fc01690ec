"""Provenance: what software and host produced a run (package versions, the plugin's source revision and digest,
the host, the command line, the backend's own facts).

The seed's rule: keep the full conditions of every run, whatever it shows. Recorded with every campaign
(:func:`this_process`, summary.json's ``conditions``) and compared where two processes or two runs must be the
same software: a worker and its master (loadgen/protocol.py), a resumed campaign and its first run
(launch/resume.py). Two installs of one version can differ, so the source itself is digested too. Each
load-generating process (and a master) also says where it runs: :func:`generator_process`.
"""

from __future__ import annotations

import hashlib
import os
import platform
import socket
import subprocess
import sys
import time
from collections.abc import Iterable
from functools import cache
from importlib import metadata
from pathlib import Path, PurePosixPath

from bench_plugin.results.facts import BackendFacts
from bench_plugin.results.summary import GeneratorProcess, Provenance
from bench_plugin.scenario import format_cpulist

ROOT = Path(__file__).resolve().parent.parent
"""The bench_plugin package directory, whose ``.py`` files :func:`source_digest` digests."""

PACKAGES = ("bench-plugin", "locust", "gevent", "geventhttpclient", "pydantic", "numpy", "torch", "aiohttp",
            "nvidia-ml-py")


def package_versions(names: tuple[str, ...] = PACKAGES) -> dict[str, str | None]:
    """Installed versions of the packages that shape a measurement (None: not installed)."""
    out: dict[str, str | None] = {}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def source_revision() -> str | None:
    """The git commit of the bench_plugin source, when it runs from a checkout."""
    root = ROOT.parent
    if not (root / ".git").exists():
        return None
    try:
        done = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=5, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() or None


@cache
def source_digest() -> str:
    """sha256 (first 12 hex digits) of the bench_plugin sources: two installs of one version can differ."""
    return digest_sources((path.relative_to(ROOT).as_posix(), path.read_bytes()) for path in ROOT.rglob("*.py"))


def digest_sources(files: Iterable[tuple[str, bytes]]) -> str:
    """:func:`source_digest` of ``(path below bench_plugin/, content)`` pairs of its ``.py`` files, from
    anywhere (a checkout, a commit of its history)."""
    digest = hashlib.sha256()
    for name, content in sorted(files, key=lambda pair: PurePosixPath(pair[0])):
        digest.update(name.encode())
        digest.update(content)
    return digest.hexdigest()[:12]


def this_process(backend: BackendFacts) -> Provenance:
    """The provenance of a campaign run by this process, on a backend that describes itself as ``backend``."""
    return Provenance(
        host=socket.gethostname(),
        platform=platform.platform(),
        python=sys.version.split()[0],
        packages=package_versions(),
        source_revision=source_revision(),
        source_digest=source_digest(),
        utc_offset_s=time.localtime().tm_gmtoff,
        command=list(sys.argv),
        backend=backend,
    )


def generator_process() -> GeneratorProcess:
    """This process as a load generator (or a master) records itself: its pid, host, and the CPU cores it may
    run on (a container's cpuset, a ``taskset`` around it)."""
    return GeneratorProcess(pid=os.getpid(), host=socket.gethostname(),
                            cores=format_cpulist(os.sched_getaffinity(0)))
