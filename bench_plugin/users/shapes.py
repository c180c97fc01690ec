"""The OpenAI replies the users read, as typed shapes, each read in one pass (msgspec).

A reply is decoded straight into these structs: the decoder checks every field it reads against its
type as it parses (an ``index`` that is not an integer, an embedding that is neither a list of numbers
nor a base64 string, a ``choices`` that is not a list) and skips, without building them, the fields no
class reads (``model``, ``usage`` of an embedding, ``logprobs``). What it cannot say (how many vectors,
each index once, one width for all) the users check after it (users/embedding.py, users/llm.py).

Why msgspec: a realistic embedding reply is 16 vectors of 1,024 floats, about 360 KB of JSON. Python's
``json`` spends about 5 ms of CPU on one on the project's 2-core machine, more than the rest of the
request; a base64 reply (about 88 KB, what OpenAI's SDK asks for by default) is decoded by msgspec in
under 0.1 ms, its strings turned into bytes by the same pass. A reply of floats is read a vector at a
time, each vector checked as JSON by msgspec and its numbers counted in place, never built into Python
floats, and the event loop turns between pieces of a few vectors (benchmarks/reply_parse.py measures
the read and how long it holds the loop). One SSE event of an LLM stream costs about a microsecond.

:class:`ShapeError` carries a one-line reason naming the field (``data[1].embedding: expected array or
base64 string, got int``), or saying the text is not JSON.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from itertools import chain
from typing import Any

import msgspec
import numpy as np

BASE64 = "base64"
FLOAT = "float"
"""How an embedding came back (EmbeddingItem.format)."""


class ShapeError(ValueError):
    """A reply that is not JSON, or whose JSON does not have the shape; the message names the field."""


class EmbeddingItem(msgspec.Struct, frozen=True):
    """One item of an embeddings reply's ``data``, as read: how its vector came back and its size.

    A list of numbers is checked and counted in place, never built into Python floats (:func:`decode_embeddings`).
    """

    index: int
    object: str
    format: str
    """BASE64 or FLOAT."""
    size: int
    """FLOAT: the numbers in the list; BASE64: the bytes the string decodes to."""
    vector: bytes = b""
    """BASE64: the little-endian float32 bytes, decoded from base64."""

    @property
    def width(self) -> int | None:
        """The vector's dimensions; None for base64 bytes that are not whole float32 values."""
        if self.format == FLOAT:
            return self.size
        return self.size // 4 if self.size % 4 == 0 else None


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


class _Item(msgspec.Struct, frozen=True):
    """An item decoded whole: the vector a JSON list of numbers, or (``encoding_format: base64``) its
    little-endian float32 bytes, decoded from base64 by the same pass."""

    embedding: list[float] | bytes
    index: int
    object: str = "embedding"


class _Reply(msgspec.Struct, frozen=True):
    data: list[_Item]


class _RawItem(msgspec.Struct, frozen=True):
    """An item whose vector is left undecoded (its JSON located and checked, nothing built)."""

    embedding: msgspec.Raw
    index: int
    object: str = "embedding"


class _RawReply(msgspec.Struct, frozen=True):
    data: list[_RawItem]


PIECE_BYTES = 512 << 10
"""A reply read whole (base64, or one :func:`_by_vector` leaves to it) longer than this is read in pieces
(:func:`decode_embeddings`): the loop turns after its vectors are located, and after each PIECE_BYTES of
vectors read. The locating pass is one step, over the whole reply."""

VECTOR_PIECE_BYTES = 64 << 10
"""A reply of lists of numbers is read a vector at a time (:func:`_by_vector`), the loop turning after each
VECTOR_PIECE_BYTES of them: three vectors of 1,024 floats."""


class _CutItem(msgspec.Struct, frozen=True):
    """An item whose vector was cut out (:func:`_by_vector`): ``embedding`` is the marker left in its place."""

    embedding: str
    index: int
    object: str = "embedding"


class _CutReply(msgspec.Struct, frozen=True):
    data: list[_CutItem]


_VECTOR_AT = re.compile(rb'"embedding"[ \t\r\n]*:[ \t\r\n]*\[')
"""A vector that is a JSON list: its key and the list's opening bracket (JSON's whitespace between)."""
_cut_embeddings = msgspec.json.Decoder(_CutReply)
_json_value = msgspec.json.Decoder(msgspec.Raw)
_embeddings = msgspec.json.Decoder(_Reply)
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
    """A whole /v1/embeddings reply, read; ShapeError naming the field where it does not fit.

    A reply of base64 strings is decoded in one typed pass. A reply of lists of numbers is read a vector
    at a time (:func:`_by_vector`): its vectors are cut out, what is left is decoded typed, and each
    vector is checked as JSON and its numbers counted in place (:func:`_count_cuts`), never built into
    Python floats: a list of JSON numbers is all the check needs, and building 16,384 Python floats to count
    them was most of the request's CPU. A reply that cannot be read so (a list that is anything but
    numbers, a reply that is not JSON, keys written with escapes) is read whole instead: located
    (msgspec.Raw: every byte checked as JSON, no vector built), each list counted in place, any other
    decoded, so an error names the element as a whole decode would. The two forms are told apart by the
    first vector (:func:`_numbers_first`); a guess that is wrong costs time, never a different result.

    With ``pause`` (the users pass ``gevent.idle``, so a request due meanwhile leaves on time), the loop
    turns between pieces: every VECTOR_PIECE_BYTES of vectors read one at a time; read whole, a body over
    PIECE_BYTES turns it after locating its vectors, then every PIECE_BYTES of them. A malformed reply is
    refused with the error of its first fault found: a fault in a vector is found after the faults
    elsewhere in the reply.
    """
    numbers = _numbers_first(body)
    if numbers:
        read = _by_vector(body, pause)
        if read is not None:
            return read
    pieces = pause is not None and len(body) > PIECE_BYTES
    try:
        if not pieces and not numbers:
            return EmbeddingsReply([_read(item) for item in _embeddings.decode(body).data])
        located = _raw_embeddings.decode(body)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise _error(exc, body) from None
    items, done = [], 0
    if pieces and pause is not None:
        pause()
    for position, item in enumerate(located.data):
        if pieces and pause is not None and done >= PIECE_BYTES:
            pause()
            done = 0
        raw = item.embedding
        numbers_in = _count_numbers(raw)
        if numbers_in is not None:
            items.append(EmbeddingItem(item.index, item.object, FLOAT, numbers_in))
        else:
            try:
                items.append(_read(_Item(_vector.decode(raw), item.index, item.object)))
            except (msgspec.ValidationError, msgspec.DecodeError) as exc:
                raise _error(exc, body, f"data[{position}].embedding") from None
        done += len(raw)
    return EmbeddingsReply(items)


def _by_vector(body: bytes, pause: Callable[[], object] | None) -> EmbeddingsReply | None:
    """A reply whose vectors are all lists of numbers, read a vector at a time; None where it cannot be read
    so, for the whole read to find why (or to read it: a reply this refuses is never one it accepts).

    Every ``"embedding": [`` is cut out up to its first ``]`` and a marker string ``"#k"`` put in its place;
    what is left (about a kilobyte) is decoded typed. It is read only if that holds no backslash and no
    ``"#`` but the markers, and data[k].embedding is marker k for every k: then each marker is a whole
    string token (with no escapes, a quote before ``#`` opens a string), the cuts are exactly the items'
    vectors, and the reply is the JSON that a whole decode reads, with the same items, once each cut is
    checked as JSON (msgspec.Raw) and found a list of numbers alone. The loop turns every
    VECTOR_PIECE_BYTES of cuts checked, so no step holds it for more than a few vectors.
    """
    cuts: list[tuple[int, int]] = []
    parts: list[bytes] = []
    at = 0
    found = _VECTOR_AT.search(body)
    while found is not None:
        start = found.end() - 1
        end = body.find(b"]", start) + 1
        if not end:
            return None
        parts += (body[at:start], b'"#%d"' % len(cuts))
        cuts.append((start, end))
        at = end
        found = _VECTOR_AT.search(body, end)
    parts.append(body[at:])
    rest = b"".join(parts)
    if not cuts or b"\\" in rest or rest.count(b'"#') != len(cuts):
        return None
    try:
        data = _cut_embeddings.decode(rest).data
    except (msgspec.ValidationError, msgspec.DecodeError):
        return None
    if len(data) != len(cuts) or any(item.embedding != f"#{k}" for k, item in enumerate(data)):
        return None
    counts = _count_cuts(body, cuts)
    if counts is None:
        return None
    items, done, view = [], 0, memoryview(body)
    for item, (start, end), numbers in zip(data, cuts, counts, strict=True):
        if pause is not None and done >= VECTOR_PIECE_BYTES:
            pause()
            done = 0
        try:
            _json_value.decode(view[start:end])
        except msgspec.DecodeError:
            return None
        items.append(EmbeddingItem(item.index, item.object, FLOAT, numbers))
        done += end - start
    return EmbeddingsReply(items)


def _read(item: _Item) -> EmbeddingItem:
    vector = item.embedding
    if isinstance(vector, bytes):
        return EmbeddingItem(item.index, item.object, BASE64, len(vector), vector)
    return EmbeddingItem(item.index, item.object, FLOAT, len(vector))


def _numbers_first(body: bytes) -> bool:
    """Whether the reply's first vector looks like a JSON list (a hint for :func:`decode_embeddings`)."""
    at = body.find(b'"embedding"')
    while at >= 0:  # the key, not a value such as "object": "embedding"
        after = body[at + 11:at + 40].lstrip(b" \t\r\n")
        if after[:1] == b":":
            return after[1:].lstrip(b" \t\r\n")[:1] == b"["
        at = body.find(b'"embedding"', at + 11)
    return False


_TOP = ord("e")
"""The highest byte in a JSON list of numbers: digits, ``-+.eE``, ``,`` and whitespace are all below it;
``true``, ``false``, ``null`` and ``{`` all hold a byte above it."""


def _count_numbers(raw: msgspec.Raw | bytes) -> int | None:
    """How many numbers the JSON list ``raw`` holds; None where it is not a list of numbers alone
    (:func:`_count_cuts` of the one span that is all of it)."""
    text = raw if isinstance(raw, bytes) else bytes(raw)
    counts = _count_cuts(text, [(0, len(text))])
    return None if counts is None else counts[0]


def _count_cuts(body: bytes, cuts: list[tuple[int, int]]) -> list[int] | None:
    """How many numbers each span ``body[start:end]`` of ``cuts`` holds (each a JSON list from ``[`` to its first
    ``]``, in order), counted in one pass over the body rather than one per list; None where any of them is not a
    list of numbers alone.

    Each span is valid JSON (msgspec checks every byte of it: :func:`decode_embeddings` before, :func:`_by_vector`
    after, where counting first changes only which check finds a fault, and either sends the reply to the whole
    read), so a list with no string (``"``), no inner list (``[``) and no byte above ``e`` holds numbers only,
    separated by its commas. Numbers are not converted: one beyond a double's range (``1e999``) is counted where a
    whole decode refuses it. The body is read in place, not copied.
    """
    if not cuts:
        return None
    for start, end in cuts:
        if body[start:start + 1] != b"[" or body.find(b'"', start, end) >= 0 or body.find(b"[", start + 1, end) >= 0:
            return None
    codes = np.frombuffer(body, np.uint8)
    bounds = np.fromiter(chain.from_iterable(cuts), np.intp, 2 * len(cuts))
    if bounds[-1] >= len(body):  # the last span ends the body: its maximum runs from its start to the end
        bounds = bounds[:-1]
    if np.maximum.reduceat(codes, bounds)[0::2].max() > _TOP:  # the highest byte of each span (and each gap)
        return None
    commas = codes == 44
    counts = []
    for start, end in cuts:
        found = int(np.count_nonzero(commas[start:end]))
        counts.append(found + 1 if found or codes[start + 1:end - 1].max(initial=0) > 32 else 0)
    return counts


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
