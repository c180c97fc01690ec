"""The OpenAI replies the users read, as typed shapes, each decoded in one pass (msgspec).

A reply is decoded straight into these structs: the decoder checks every field it reads against its
type as it parses (an ``index`` that is not an integer, an embedding that is neither a list of numbers
nor a base64 string, a ``choices`` that is not a list) and skips, without building them, the fields no
class reads (``model``, ``usage`` of an embedding, ``logprobs``). What it cannot say (how many vectors,
each index once, one width for all) the users check after it (users/embedding.py, users/llm.py).

Why msgspec: a realistic embedding reply is 16 vectors of 1,024 floats, about 350 KB of JSON. Python's
``json`` spent 3-5 ms of CPU on one on the project's 2-core machine, more than the rest of the request;
msgspec decodes it in about 0.5 ms, and a base64 reply (about 88 KB, what OpenAI's SDK asks for by
default) in under 0.1 ms, its strings turned into bytes by the same pass. One SSE event of an LLM stream
costs about a microsecond.

:class:`ShapeError` carries a one-line reason naming the field (``data[1].embedding: expected array or
base64 string, got int``), or saying the text is not JSON.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import msgspec

BASE64 = "base64"
FLOAT = "float"
"""How an embedding came back (EmbeddingItem.format)."""


class ShapeError(ValueError):
    """A reply that is not JSON, or whose JSON does not have the shape; the message names the field."""


class EmbeddingItem(msgspec.Struct, frozen=True):
    """One item of an embeddings reply's ``data``."""

    embedding: list[float] | bytes
    """The vector: a JSON list of numbers, or (``encoding_format: base64``) its little-endian float32 bytes,
    decoded from base64 by the same pass."""
    index: int
    object: str = "embedding"

    @property
    def width(self) -> int | None:
        """The vector's dimensions; None for base64 bytes that are not whole float32 values."""
        if isinstance(self.embedding, bytes):
            return len(self.embedding) // 4 if len(self.embedding) % 4 == 0 else None
        return len(self.embedding)

    @property
    def format(self) -> str:
        """BASE64 or FLOAT: how the vector came back."""
        return BASE64 if isinstance(self.embedding, bytes) else FLOAT


class EmbeddingsReply(msgspec.Struct, frozen=True):
    """POST /v1/embeddings' reply: ``{"object": "list", "data": [...], "model", "usage"}``."""

    data: list[EmbeddingItem]


class Delta(msgspec.Struct, frozen=True):
    """A streamed chat choice's ``delta``: the text it adds (content, or a reasoning model's thinking)."""

    content: str | None = None
    reasoning_content: str | None = None
    reasoning: str | None = None


class Choice(msgspec.Struct, frozen=True):
    """One choice of a streamed chunk: chat (``delta``) or completions (``text``)."""

    delta: Delta | None = None
    text: str | None = None
    finish_reason: str | None = None


class Chunk(msgspec.Struct, frozen=True):
    """One event of an OpenAI stream (``chat.completion.chunk`` or ``text_completion``)."""

    choices: list[Choice] | None = None
    usage: dict[str, Any] | None = None
    error: Any = None
    """An error event (vLLM and SGLang send ``{"error": {...}}`` mid-stream); None otherwise."""


class Transcription(msgspec.Struct, frozen=True):
    """POST /v1/audio/transcriptions' ``json`` or ``verbose_json`` reply."""

    text: str
    segments: list[Segment] | None = None


class Segment(msgspec.Struct, frozen=True):
    """One segment of a ``verbose_json`` transcription."""

    text: str


class _RawItem(msgspec.Struct, frozen=True):
    """An item whose vector is left undecoded (its bytes located, nothing built): the first pass over a large reply."""

    embedding: msgspec.Raw
    index: int
    object: str = "embedding"


class _RawReply(msgspec.Struct, frozen=True):
    data: list[_RawItem]


PIECE_BYTES = 512 << 10
"""A reply longer than this is decoded in pieces (:func:`decode_embeddings`): at about 0.7 ms of decoding per
piece of floats on the project's 2-core machine, no single step holds the event loop much longer."""

_embeddings = msgspec.json.Decoder(EmbeddingsReply)
_raw_embeddings = msgspec.json.Decoder(_RawReply)
_vector = msgspec.json.Decoder(list[float] | bytes)
_chunk = msgspec.json.Decoder(Chunk)
_transcription = msgspec.json.Decoder(Transcription)
_AT = re.compile(r" - at `\$(.*)`$")
_KINDS = {"`bytes | array`": "a list of numbers or a base64 string", "`bytes`": "a base64 string"}


def _error(exc: msgspec.ValidationError | msgspec.DecodeError, body: bytes | str, within: str = "") -> ShapeError:
    """The one-line reason for ``exc``; ``within``: the field a partial decode started at."""
    if isinstance(exc, msgspec.ValidationError):
        text = str(exc)
        found = _AT.search(text)
        where = within + (found.group(1) if found else "")
        where = where.lstrip(".")
        what = text[:found.start()] if found else text
        for typed, plain in _KINDS.items():
            what = what.replace(typed, plain)
        what = what[0].lower() + what[1:] if what else what
        return ShapeError(f"{where or 'reply'}: {what}")
    head = body[:80] if isinstance(body, bytes) else body[:80].encode()
    return ShapeError(f"reply is not JSON: {head!r}")


def decode_embeddings(body: bytes, pause: Callable[[], object] | None = None) -> EmbeddingsReply:
    """A whole /v1/embeddings reply, typed; ShapeError naming the field where it does not fit.

    With ``pause``, a body over PIECE_BYTES is decoded in pieces, calling ``pause()`` between them (the
    users pass ``gevent.idle``, so a request due meanwhile leaves on time): a first pass locates each
    vector without building it (msgspec.Raw, about a third of a whole decode), then the vectors are
    decoded one by one. The result, and the error for a malformed reply, are those of one pass.
    """
    try:
        if pause is None or len(body) <= PIECE_BYTES:
            return _embeddings.decode(body)
        located = _raw_embeddings.decode(body)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise _error(exc, body) from None
    items, done = [], 0
    pause()
    for position, item in enumerate(located.data):
        if done >= PIECE_BYTES:
            pause()
            done = 0
        try:
            vector = _vector.decode(item.embedding)
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            raise _error(exc, body, f"data[{position}].embedding") from None
        items.append(EmbeddingItem(vector, item.index, item.object))
        done += len(item.embedding)
    return EmbeddingsReply(items)


def decode_chunk(data: bytes | str) -> Chunk:
    """One stream event (the JSON after ``data: ``), typed; ShapeError naming the field where it does not fit."""
    try:
        return _chunk.decode(data)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise _error(exc, data) from None


def decode_transcription(body: bytes) -> Transcription:
    """A ``json`` or ``verbose_json`` transcription, typed; ShapeError naming the field where it does not fit."""
    try:
        return _transcription.decode(body)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise _error(exc, body) from None
