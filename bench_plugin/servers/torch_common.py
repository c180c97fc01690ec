"""Torch helpers shared by the model servers: device/dtype choice and seeded model building.

Models are constructed directly on the target device in the target dtype and then
filled with seeded random weights there, so an 8B model never passes through host
memory or float32, which matters on the GPU machines. (Constructing on ``meta`` and
materialising would also work, but its first use costs ~1.5 s of lazy imports, too
much for the tiny presets' start-up budget.)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

import torch
from torch import nn

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
INIT_STD = 0.02

M = TypeVar("M", bound=nn.Module)


def resolve_device(spec: str | None) -> torch.device:
    """``cpu``, ``cuda`` or ``cuda:N``; None means CUDA when available, else CPU.

    Raises ValueError for a device this machine does not have.
    """
    if spec is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(spec)
    except RuntimeError as exc:
        raise ValueError(f"invalid device {spec!r}: {exc}") from None
    if device.type == "cpu":
        return device
    if device.type != "cuda":
        raise ValueError(f"unsupported device {spec!r}: use cpu, cuda or cuda:N")
    if not torch.cuda.is_available():
        raise ValueError(f"device {spec!r} requested but CUDA is not available")
    index = 0 if device.index is None else device.index
    if index >= torch.cuda.device_count():
        raise ValueError(f"device {spec!r} does not exist ({torch.cuda.device_count()} CUDA devices)")
    return torch.device("cuda", index)


def resolve_dtype(name: str | None, device: torch.device) -> torch.dtype:
    """Named dtype; None means bfloat16 on CUDA and float32 on CPU."""
    if name is None:
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    if name not in _DTYPES:
        raise ValueError(f"unsupported dtype {name!r}: use one of {sorted(_DTYPES)}")
    return _DTYPES[name]


def dtype_choices() -> list[str]:
    """Names accepted by :func:`resolve_dtype`."""
    return sorted(_DTYPES)


def build_model(factory: Callable[[], M], device: torch.device, dtype: torch.dtype, seed: int) -> M:
    """Construct ``factory()`` on ``device`` in ``dtype`` and seed its weights."""
    with torch.device(device), _default_dtype(dtype):
        model = factory()
    init_weights(model, seed)
    return model.eval()


@contextmanager
def _default_dtype(dtype: torch.dtype) -> Iterator[None]:
    # Process-wide, but only the loading thread creates float tensors while it is set.
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(previous)


@torch.no_grad()
def init_weights(model: nn.Module, seed: int) -> None:
    """Deterministic random init: N(0, 0.02) matrices, unit norm gains, zero biases."""
    device = next(model.parameters()).device
    generator = torch.Generator(device=device)
    generator.manual_seed(seed)
    for module in model.modules():
        if isinstance(module, nn.LayerNorm | nn.RMSNorm):
            if module.weight is not None:
                module.weight.fill_(1.0)
            bias = getattr(module, "bias", None)
            if bias is not None:
                bias.zero_()
            continue
        for name, param in module.named_parameters(recurse=False):
            if name == "bias":
                param.zero_()
            else:
                param.normal_(0.0, INIT_STD, generator=generator)


def configure_torch(threads: int | None, device: torch.device) -> None:
    """Process-wide torch settings for a server: CPU threads and attention backends.

    ``threads`` pins torch's intra-op CPU threads (``--threads``; None keeps the default).
    On CUDA the cuDNN attention backend is switched off: it builds a new execution plan
    for every new shape (40-70 ms each on an H200), and the KV length grows by one every
    decode step, so it stalled each step; the memory-efficient kernel has no such cost.
    """
    if threads is not None:
        torch.set_num_threads(threads)
    if device.type == "cuda":
        torch.backends.cuda.enable_cudnn_sdp(False)
