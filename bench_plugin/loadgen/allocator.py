"""Allocator: keep glibc's malloc from mapping fresh memory for the replies a load generator reads.

The users read a whole reply in pieces of up to a megabyte (users/body.py): geventhttpclient's
``read(n)`` asks the socket for ``recv(n)``, and CPython allocates the n bytes first, then shrinks the
object to what came. glibc serves an allocation over its mmap threshold with a new ``mmap``, and the
kernel then faults in every page the reply is copied into. The threshold starts at 128 KiB and rises
only when a mapped block at least that large is freed (a shrunk one never is), so whether a process
maps a fresh megabyte for every receive depends on what it happened to free before: a fresh process
does, and a 16 x 1,024-float reply (348 KB) then costs about a third of a millisecond of CPU more
than from memory the process already has (benchmarks/reply_recv.py).

``settle`` fixes the thresholds, as servers tuned for throughput do: blocks up to MMAP_THRESHOLD come
from the heap, and up to TRIM_THRESHOLD of free memory at the heap's top is kept rather than given back
and faulted in again. A load generator's memory then stays at its peak (its largest replies in flight),
which is what it reuses, the same in every process. Nothing happens where the C library is not glibc,
or until ``settle`` is called.
"""

from __future__ import annotations

import ctypes
import platform

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
"""mallopt's parameters (glibc's malloc.h)."""
MMAP_THRESHOLD = 32 << 20
"""The largest block glibc allows to come from the heap (its DEFAULT_MMAP_THRESHOLD_MAX on 64-bit)."""
TRIM_THRESHOLD = 128 << 20
"""Free memory at the heap's top kept for reuse before any is returned to the system."""

_settled = [False]


def settle() -> bool:
    """Fix glibc's thresholds for this process (once); whether they were set (False: not glibc, or refused)."""
    if _settled[0]:
        return True
    if platform.libc_ver()[0] != "glibc":
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    _settled[0] = bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    return _settled[0]
