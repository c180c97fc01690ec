"""The OpenAI replies the users read, as typed shapes, each decoded in one pass (msgspec).

A reply is decoded straight into these structs: the decoder checks every field it reads against its
type as it parses (an ``index`` that is not an integer, an embedding that is neither a list of numbers
nor a base64 string, a ``choices`` that is not a list) and skips, without building them, the fields no
class reads (``model``, ``usage`` of an embedding, ``logprobs``). What it cannot say (how many vectors,
each index once, one width for all) the users check after it (users/embedding.py, users/llm.py).

Why msgspec: a realistic embedding reply is 16 vectors of 1,024 floats, about 350 KB of JSON. Python's
``json`` spent 3-5 ms of CPU on one on the project's 2-core machine, more than the rest of the request;
msgspec checks it in a fraction of that, counting each vector's numbers rather than building them
(:func:`decode_embeddings`), and a base64 reply (about 88 KB, what OpenAI's SDK asks for by default)
in under 0.1 ms, its strings turned into bytes. One SSE event of an LLM stream
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


class FloatVector(msgspec.Struct, frozen=True):
    """A vector that came back as a JSON list of numbers: checked and counted where it lies, not built."""

    width: int


class EmbeddingItem(msgspec.Struct, frozen=True):
    """One item of an embeddings reply's ``data``."""

    embedding: FloatVector | bytes
    """The vector: a JSON list of numbers (its width), or (``encoding_format: base64``) its little-endian
    float32 bytes, decoded from base64."""
    index: int
    object: str = "embedding"

    @property
    def width(self) -> int | None:
        """The vector's dimensions; None for base64 bytes that are not whole float32 values."""
        if isinstance(self.embedding, bytes):
            return len(self.embedding) // 4 if len(self.embedding) % 4 == 0 else None
        return self.embedding.width

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


class _Base64Item(msgspec.Struct, frozen=True):
    """An item as a base64 reply has it: the vector's bytes decoded from base64 by the same pass."""

    embedding: bytes
    index: int
    object: str = "embedding"


class _Base64Reply(msgspec.Struct, frozen=True):
    data: list[_Base64Item]


class _RawItem(msgspec.Struct, frozen=True):
    """An item whose vector is left undecoded: its bytes located and their JSON syntax checked, nothing built."""

    embedding: msgspec.Raw
    index: int
    object: str = "embedding"


class _RawReply(msgspec.Struct, frozen=True):
    data: list[_RawItem]


PIECE_BYTES = 512 << 10
"""A reply longer than this is read in pieces (:func:`decode_embeddings`), letting the loop turn between them."""

NUMBER_SYNTAX = b"0123456789+-.eE, \t\n\r"
"""What a JSON array of numbers holds besides its brackets: its numbers, commas and white space."""

_raw_embeddings = msgspec.json.Decoder(_RawReply)
_base64_embeddings = msgspec.json.Decoder(_Base64Reply)
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


def decode_embeddings(body: bytes, pause: Callable[[], object] | None = None,
                      expect: str | None = None) -> EmbeddingsReply:
    """A whole /v1/embeddings reply, typed; ShapeError naming the field where it does not fit.

    One pass locates each item's vector and checks the JSON syntax of all of it (msgspec.Raw: nothing is
    built), and each vector is then read where it lies: a base64 string decoded into its bytes, a list of
    numbers counted, not built. A list whose bytes, inside its brackets, are only what numbers, commas and
    white space are made of (NUMBER_SYNTAX) and whose syntax the first pass found valid is a flat list of
    JSON numbers; its width is its commas plus one. Anything else (a nested list, a string in it, a
    number where a list belongs) is decoded as a vector would be, for the error that names it. A float
    reply of 16 x 1,024 (360 KB) takes about 0.78 ms of CPU so, against 0.91 ms to build its 16,384 floats
    (project's 2-core machine). With ``pause``, a body over PIECE_BYTES is read in pieces, calling
    ``pause()`` between them (the users pass ``gevent.idle``, so a request due meanwhile leaves on time).

    ``expect``: the format the request asked for. Where it is BASE64 and the body is one piece, a single
    typed pass that decodes each string into bytes goes first (about 0.09 ms for 16 x 1,024, against
    0.14 ms located first); a reply that does not fit it (a server that answers floats, a broken reply) is
    read as above. The result, and the error for a malformed reply, are the same every way.
    """
    if expect == BASE64 and (pause is None or len(body) <= PIECE_BYTES):
        try:
            whole = _base64_embeddings.decode(body)
        except (msgspec.ValidationError, msgspec.DecodeError):
            pass  # read as any reply is, below: floats are accepted there, and an error names its field alike
        else:
            return EmbeddingsReply([EmbeddingItem(i.embedding, i.index, i.object) for i in whole.data])
    try:
        located = _raw_embeddings.decode(body)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise _error(exc, body) from None
    turn = pause if len(body) > PIECE_BYTES else None
    items, done = [], 0
    if turn is not None:
        turn()
    for position, item in enumerate(located.data):
        if turn is not None and done >= PIECE_BYTES:
            turn()
            done = 0
        raw = bytes(item.embedding)
        items.append(EmbeddingItem(_read_vector(raw, body, position), item.index, item.object))
        done += len(raw)
    return EmbeddingsReply(items)


def _read_vector(raw: bytes, body: bytes, position: int) -> FloatVector | bytes:
    """Item ``position``'s vector from its located JSON ``raw`` (see decode_embeddings)."""
    if raw[:1] == b"[" and raw[-1:] == b"]" and not raw[1:-1].translate(None, NUMBER_SYNTAX):
        inner = raw[1:-1]
        return FloatVector(inner.count(b",") + 1 if inner.strip() else 0)
    try:
        vector = _vector.decode(raw)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise _error(exc, body, f"data[{position}].embedding") from None
    return vector if isinstance(vector, bytes) else FloatVector(len(vector))


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
