"""Conditions: everything about where and how a campaign ran, so the next experiment can build on it.

The seed's rule: keep the full conditions of every run, whatever it shows. This collects the host,
its CPU and GPUs (with driver), the Python and package versions, the plugin's source (its git revision
and a digest of its files: two installs of one version can differ), and the command line; the scenario
and request-set hashes are recorded beside it by the plugin.
"""

from __future__ import annotations

import platform
import socket
import sys

from bench_plugin.results.provenance import package_versions, source_digest, source_revision
from bench_plugin.results.summary import Provenance
from bench_plugin.sharing.base import SharingBackend


def collect_conditions(backend: SharingBackend) -> Provenance:
    """The conditions of a campaign run by this process, on ``backend``."""
    return Provenance(
        host=socket.gethostname(),
        platform=platform.platform(),
        python=sys.version.split()[0],
        packages=package_versions(),
        source_revision=source_revision(),
        source_digest=source_digest(),
        command=list(sys.argv),
        backend=backend.describe(),
    )
