"""Torch helpers shared by the model servers: device/dtype choice and seeded model building.

Models are constructed directly on the target device in the target dtype and then
filled with seeded random weights there, so an 8B model never passes through host
memory or float32, which matters on the GPU machines. (Constructing on ``meta`` and
materialising would also work, but its first use costs ~1.5 s of lazy imports, too
much for the tiny presets' start-up budget.)
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import torch
from torch import nn

from .device_flags import cuda_only_refusal, device_spec_error

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
INIT_STD = 0.02
MIB = 1024 * 1024
# How long a thread may hold the GIL while another waits for it (CPython's default is 5 ms).
# The model thread reacquires the GIL after every torch call; while the event loop thread
# streams tokens or encodes responses, each reacquisition could otherwise wait 5 ms, and
# the GPU would idle behind Python.
GIL_SWITCH_INTERVAL_S = 0.00025

# The stream the model runs on when --stream-priority is not normal; made current on the model's
# thread by build_model (CUDA's current stream is per thread).
_model_stream: torch.cuda.Stream | None = None

M = TypeVar("M", bound=nn.Module)


def resolve_device(spec: str | None) -> torch.device:
    """``cpu``, ``cuda`` or ``cuda:N``; None means CUDA when available, else CPU.

    Raises ValueError for a device this machine does not have.
    """
    if spec is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    error = device_spec_error(spec)
    if error:
        raise ValueError(error)
    device = torch.device(spec)
    if device.type == "cpu":
        return device
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
    """Construct ``factory()`` on ``device`` in ``dtype`` and seed its weights.

    Every server calls this on the thread that then runs the model (the engine or batcher worker),
    so that is where the stream chosen by ``--stream-priority`` is made current.
    """
    if _model_stream is not None:
        torch.cuda.set_stream(_model_stream)
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


def configure_torch(
    threads: int | None, device: torch.device, memory_limit_mib: int | None = None, stream_priority: str = "normal"
) -> None:
    """Process-wide settings for a model server: GIL switch interval, CPU threads, attention backends, sharing flags.

    ``threads`` pins torch's intra-op CPU threads (``--threads``; None keeps the default).
    On CUDA the cuDNN attention backend is switched off: it builds a new execution plan
    for every new shape (40-70 ms each on an H200), and the KV length grows by one every
    decode step, so it stalled each step; the memory-efficient kernel has no such cost.
    ``memory_limit_mib`` and ``stream_priority`` are applied before the model loads
    (:func:`cap_memory`, :func:`make_model_stream`); call :func:`check_sharing_flags` first.
    """
    sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)
    if threads is not None:
        torch.set_num_threads(threads)
    if device.type == "cuda":
        torch.backends.cuda.enable_cudnn_sdp(False)
        if memory_limit_mib is not None:
            cap_memory(device, memory_limit_mib)
        make_model_stream(device, stream_priority)


def check_sharing_flags(device: torch.device, memory_limit_mib: int | None, stream_priority: str) -> None:
    """Raise ValueError if ``--memory-limit-mib`` or ``--stream-priority`` cannot take effect on ``device``.

    Both act on CUDA only; on a CPU they would be silently ignored, so they are refused instead.
    """
    if device.type != "cuda":
        refusal = cuda_only_refusal(str(device), memory_limit_mib, stream_priority)
        if refusal:
            raise ValueError(refusal)
        return
    if memory_limit_mib is not None:
        total = torch.cuda.get_device_properties(device).total_memory // MIB
        if memory_limit_mib > total:
            raise ValueError(f"--memory-limit-mib {memory_limit_mib} is more than {device} has ({total} MiB)")


def cap_memory(device: torch.device, memory_limit_mib: int) -> float:
    """Cap PyTorch's caching allocator on ``device`` at ``memory_limit_mib``; returns the fraction set.

    This is torch.cuda.set_per_process_memory_fraction: allocations past the cap raise an
    out-of-memory error inside PyTorch. It caps PyTorch's allocator only: the CUDA context,
    cuBLAS/cuDNN workspaces made outside it and any other library's memory are not counted
    (a driver-enforced cap needs MPS: CUDA_MPS_PINNED_DEVICE_MEM_LIMIT).
    """
    total = torch.cuda.get_device_properties(device).total_memory
    fraction = min(1.0, memory_limit_mib * MIB / total)
    torch.cuda.set_per_process_memory_fraction(fraction, device)
    print(f"bench-server memory cap: {memory_limit_mib} MiB = {fraction:.4f} of {total // MIB} MiB "
          "(PyTorch allocator only)", flush=True)
    return fraction


def make_model_stream(device: torch.device, priority: str) -> torch.cuda.Stream | None:
    """Create the stream the model will run on for ``priority`` high or low; None (default stream) for normal.

    The priorities are the ends of torch.cuda.Stream.priority_range() ((0, -3) on an H200, lower
    is higher; the default stream is 0, so ``low`` equals the default there). A stream priority
    orders this process's kernels against its OTHER streams: per NVIDIA's runtime docs a stream
    belongs to its process's CUDA context, and without MPS the GPU time-slices between the contexts
    of different processes, so it does not order one server's kernels against another's. Across
    processes, priority needs MPS (CUDA_MPS_CLIENT_PRIORITY).
    """
    global _model_stream
    if priority == "normal":
        _model_stream = None
        return None
    with torch.cuda.device(device):
        least, greatest = torch.cuda.Stream.priority_range()  # type: ignore[call-arg]  # static; stub lacks it
        value = greatest if priority == "high" else least
        _model_stream = torch.cuda.Stream(device=device, priority=value)
    print(f"bench-server stream priority: {priority} = {value} (range least {least}, greatest {greatest})", flush=True)
    return _model_stream


def capture_cuda_graph(run: Callable[[], object], device: torch.device, side: torch.cuda.Stream,
                       pool: Any) -> torch.cuda.CUDAGraph:
    """Capture ``run`` as a CUDA graph on stream ``side``, sharing memory ``pool`` with other graphs.

    It runs once eagerly on the capture stream first, so cuBLAS picks its kernels and workspaces
    outside the capture, as torch.cuda.graph's documentation asks.
    """
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):
        run()
    torch.cuda.current_stream(device).wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, pool=pool, stream=side):
        run()
    return graph
