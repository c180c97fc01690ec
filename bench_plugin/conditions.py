"""Conditions: everything about where and how a campaign ran, so the next experiment can build on it.

The seed's rule: keep the full conditions of every run, whatever it shows. This collects the host,
its CPU and GPUs (with driver), the Python and package versions, the plugin's source (its git revision
and a digest of its files: two installs of one version can differ), and the command line; the scenario
and request-set hashes are recorded beside it by the plugin.
"""

from __future__ import annotations

import platform
import socket
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

from bench_plugin.loadgen.protocol import source_digest
from bench_plugin.sharing.base import SharingBackend

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
    root = Path(__file__).resolve().parent.parent
    if not (root / ".git").exists():
        return None
    try:
        done = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=5, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() or None


def collect_conditions(backend: SharingBackend) -> dict[str, Any]:
    """The conditions table of a campaign."""
    return {
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "packages": package_versions(),
        "source_revision": source_revision(),
        "source_digest": source_digest(),
        "command": sys.argv,
        "backend": backend.describe(),
    }
