"""OpenAI ``/v1/embeddings`` protocol: input parsing and response building.

Shared by the embedding and synthetic servers; torch-free (numpy only).
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from .app import ApiError
from .validation import Body, opt_int, opt_str

MAX_INPUTS = 2048  # OpenAI's per-request limit
# Fixed-point digits of float-encoded vectors (a multiple of 3): below a float32 ulp for |x| ~ 0.01-1.
FLOAT_DECIMALS = 9
FLOAT_WIDTH = FLOAT_DECIMALS + 4
"""Bytes of one formatted value: sign (or space), digit, point, decimals, separator."""
_DIGITS = np.array([[ord(c) for c in f"{i:03d}"] for i in range(1000)], dtype=np.uint8)
EmbeddingInput = str | list[int]


@dataclass(frozen=True)
class EmbeddingRequest:
    """A validated embeddings request: texts and/or token-id lists."""

    inputs: list[EmbeddingInput]
    encoding_format: str
    dimensions: int | None


def _is_int_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value)


def _normalise_input(value: Any) -> list[EmbeddingInput]:
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list) or not value:
        raise ApiError("'input' must be a non-empty string or list", param="input")
    if all(isinstance(v, str) for v in value):
        return list(value)
    if _is_int_list(value):
        return [list(value)]
    if all(_is_int_list(v) for v in value):
        return [list(v) for v in value]
    raise ApiError(
        "'input' must be a string, a list of strings, a list of token ids or a list of token-id lists",
        param="input",
    )


def parse_embeddings(body: Body, vocab_size: int | None) -> EmbeddingRequest:
    """Validate an embeddings body; token ids must lie in [0, vocab_size) when given."""
    if "input" not in body:
        raise ApiError("'input' is required", param="input")
    inputs = _normalise_input(body["input"])
    if len(inputs) > MAX_INPUTS:
        raise ApiError(f"at most {MAX_INPUTS} inputs per request, got {len(inputs)}", param="input")
    for i, item in enumerate(inputs):
        if isinstance(item, str) and not item.split():
            raise ApiError(f"input[{i}] is empty", param="input")
        if isinstance(item, list):
            if not item:
                raise ApiError(f"input[{i}] is an empty token list", param="input")
            if min(item) < 0 or (vocab_size is not None and max(item) >= vocab_size):
                raise ApiError(f"input[{i}] has token ids outside [0, {vocab_size})", param="input")
    fmt = opt_str(body, "encoding_format", "float", choices=("float", "base64"))
    assert fmt is not None
    dimensions = opt_int(body, "dimensions", None, minimum=1)
    opt_str(body, "user", None)
    return EmbeddingRequest(inputs, fmt, dimensions)


def check_dimensions(req: EmbeddingRequest, model_dim: int) -> None:
    """400 unless ``dimensions`` is absent or equals the model's size (no truncation support)."""
    if req.dimensions is not None and req.dimensions != model_dim:
        raise ApiError(
            f"this model produces {model_dim}-dimensional embeddings; 'dimensions' is not supported",
            param="dimensions",
            code="unsupported_parameter",
        )


def encode_vector(vector: np.ndarray, encoding_format: str) -> list[float] | str:
    """A float32 vector as a JSON list, or base64 of its little-endian float32 bytes."""
    if encoding_format == "base64":
        return base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode("ascii")
    result: list[float] = np.asarray(vector, dtype=np.float32).tolist()
    return result


def embeddings_response(req: EmbeddingRequest, vectors: list[np.ndarray], model: str, prompt_tokens: int) -> Body:
    """The OpenAI ``list`` object holding one ``embedding`` per input, in input order."""
    data = [
        {"object": "embedding", "index": i, "embedding": encode_vector(v, req.encoding_format)}
        for i, v in enumerate(vectors)
    ]
    return {
        "object": "list",
        "data": data,
        "model": model,
        "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens},
    }


def format_floats(rows: np.ndarray) -> list[bytes]:
    """Each row of a 2-D float array (|x| < 10) as fixed-width decimals, formatted at once.

    Every value takes FLOAT_WIDTH bytes: its sign ("-", or a space: JSON allows whitespace around a
    number), one digit, a point, FLOAT_DECIMALS decimals and a separator (a comma, a space after the
    row's last value), so the text of a row is a slice of one array, not a filtered copy. ``json.dumps``
    of a 1024-float vector costs ~0.5 ms of Python (~9 ms for a 16-input request): at a few hundred
    requests a second that alone saturates the event loop and leaves the GPU idle. Unit-norm embeddings
    are well inside |x| < 10; each value is within 0.5e-9 of the float32 it encodes. The embedding
    server formats on the GPU the same bytes (:func:`.embedding_text.float_text`).
    """
    values = np.asarray(rows, dtype=np.float64)
    flat = values.ravel()
    scaled = np.rint(np.abs(flat) * 10**FLOAT_DECIMALS).astype(np.int64)
    chars = np.empty((flat.size, FLOAT_WIDTH), dtype=np.uint8)
    chars[:, 0] = np.where(np.signbit(flat), ord("-"), ord(" "))
    units, rest = np.divmod(scaled, 10**FLOAT_DECIMALS)
    chars[:, 1] = ord("0") + units
    chars[:, 2] = ord(".")
    for group in range(FLOAT_DECIMALS // 3):  # three decimals at a time, through a lookup table
        shift = 10 ** (FLOAT_DECIMALS - 3 * (group + 1))
        chars[:, 3 + 3 * group : 6 + 3 * group] = _DIGITS[(rest // shift) % 1000]
    chars[:, -1] = ord(",")
    per_row = chars.reshape(values.shape[0], -1)
    per_row[:, -1] = ord(" ")
    return [row.tobytes() for row in per_row]


def fits_fixed_point(vectors: np.ndarray) -> bool:
    """Whether every value can take the fixed-width form (|x| < 10, none NaN)."""
    return bool(np.all(np.abs(vectors) < 9.999999999))  # NaN fails this too


def embeddings_body(req: EmbeddingRequest, vectors: list[np.ndarray], model: str, prompt_tokens: int,
                    texts: list[bytes] | None = None) -> bytes:
    """:func:`embeddings_response` serialised to JSON bytes, with float vectors formatted by numpy, or given
    already formatted in ``texts`` (:func:`format_floats`' bytes, one per vector)."""
    if req.encoding_format == "base64":
        encoded = [json.dumps(encode_vector(v, "base64")).encode() for v in vectors]
    else:
        matrix = np.stack(vectors)
        if fits_fixed_point(matrix):
            encoded = [b"[" + row + b"]" for row in (texts if texts is not None else format_floats(matrix))]
        else:
            encoded = [json.dumps(encode_vector(v, "float")).encode() for v in vectors]
    items = [b'{"object":"embedding","index":%d,"embedding":%s}' % (i, e) for i, e in enumerate(encoded)]
    tail = {"model": model, "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens}}
    return b'{"object":"list","data":[' + b",".join(items) + b"]," + json.dumps(tail).encode()[1:]
