"""Embedding vectors formatted as JSON decimals on the device that computed them.

:func:`float_text` gives, for a [rows, dims] tensor of values with |x| < 10, the bytes that
:func:`.api_embeddings.format_floats` writes on the host, as a uint8 tensor [rows, dims * FLOAT_WIDTH]
on the same device. The embedding server formats each batch on the GPU and copies the text to the host
with the vectors, so the event loop only slices bytes: formatting 16 vectors of 1024 floats on the host
took the one Python thread's time per request, which at saturation kept the GPU waiting
(docs/server-efficiency.md).
"""

from __future__ import annotations

import torch
from torch import Tensor

from .api_embeddings import FLOAT_DECIMALS, FLOAT_WIDTH

_ZERO, _POINT, _MINUS, _SPACE, _COMMA = (ord(c) for c in "0.- ,")


def float_text(vectors: Tensor) -> Tensor:
    """The fixed-width decimal text of each row of ``vectors`` (values within 0.5e-9 of each float)."""
    values = vectors.to(torch.float64)
    scaled = torch.round(values.abs() * 10**FLOAT_DECIMALS).to(torch.int64)
    powers = 10 ** torch.arange(FLOAT_DECIMALS, -1, -1, device=vectors.device, dtype=torch.int64)
    digits = (scaled.unsqueeze(-1) // powers) % 10  # [rows, dims, 1 + FLOAT_DECIMALS]: units, then decimals
    chars = torch.empty((*vectors.shape, FLOAT_WIDTH), dtype=torch.uint8, device=vectors.device)
    chars[..., 0] = torch.where(torch.signbit(values), _MINUS, _SPACE).to(torch.uint8)
    chars[..., 1] = (digits[..., 0] + _ZERO).to(torch.uint8)
    chars[..., 2] = _POINT
    chars[..., 3:-1] = (digits[..., 1:] + _ZERO).to(torch.uint8)
    chars[..., -1] = _COMMA
    chars[:, -1, -1] = _SPACE
    return chars.reshape(vectors.shape[0], -1)
