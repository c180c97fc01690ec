"""The CPU priority a ``cpu_bound`` test runs at (conftest.cpu_bound_yields), and whether it can be set back."""

from __future__ import annotations

import resource
from pathlib import Path

LOWEST_PRIORITY = 19
"""The nice value a ``cpu_bound`` test runs at."""
CAP_SYS_NICE = 23
"""The capability bit that lets a process raise its own priority again (linux/capability.h)."""


def may_raise_priority(to: int) -> bool:
    """Whether this process may set its nice value back to ``to`` once it has lowered its priority: within its
    RLIMIT_NICE, or holding CAP_SYS_NICE (root in a container may not)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NICE)
    if soft == resource.RLIM_INFINITY or 20 - soft <= to:
        return True
    status = Path("/proc/self/status")
    effective = [line.split()[1] for line in status.read_text().splitlines() if line.startswith("CapEff:")]
    return bool(effective) and bool(int(effective[0], 16) >> CAP_SYS_NICE & 1)
