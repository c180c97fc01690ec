"""Device flags decided without torch: the accepted ``--device`` forms and the flags a CPU cannot honour.

Importing torch takes seconds; a server asked for ``--device tpu``, or for a CUDA-only flag on
``--device cpu``, is refused by these checks before that (exit 2, one line), and the torch-side checks
(:func:`.torch_common.check_sharing_flags`) use the same messages once the device is known.
"""

from __future__ import annotations

import re

DEVICE_SPEC = re.compile(r"cpu|cuda(:\d+)?")
"""What ``--device`` accepts."""


def device_spec_error(spec: str) -> str | None:
    """Why ``spec`` is no ``--device`` value (None when it is one)."""
    if DEVICE_SPEC.fullmatch(spec):
        return None
    return f"unsupported device {spec!r}: use cpu, cuda or cuda:N"


def cuda_only_refusal(device: str, memory_limit_mib: int | None, stream_priority: str,
                      cuda_graphs: bool = False) -> str | None:
    """Why a server on a non-CUDA ``device`` would silently ignore one of its flags (None when none is set)."""
    if memory_limit_mib is not None:
        return f"--memory-limit-mib needs a CUDA device; this server would run on {device}"
    if stream_priority != "normal":
        return f"--stream-priority {stream_priority} needs a CUDA device; this server would run on {device}"
    if cuda_graphs:
        return f"--cuda-graphs needs a CUDA device; this server would run on {device}"
    return None
