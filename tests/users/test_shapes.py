"""An embedding reply read: a list of numbers counted in place, a large reply in pieces, each way the same result.

How long a read holds the event loop, and how late a send due meanwhile leaves, is measured by
benchmarks/reply_parse.py (docs/benchmarks.md, "Reading a reply").
"""

from __future__ import annotations

import base64
import json
import random
import struct

import pytest

from bench_plugin.users import shapes
from bench_plugin.users.shapes import ShapeError, decode_embeddings


def embedding_reply(vectors: int, dims: int, seed: int = 1, encoding: str = "float") -> bytes:
    """A reply as vLLM writes it: floats as Python's json writes a float32 widened to a float64."""
    rng = random.Random(seed)
    data = []
    for i in range(vectors):
        values = [float(f"{rng.gauss(0, 0.03):.9g}") for _ in range(dims)]
        vector = base64.b64encode(struct.pack(f"<{dims}f", *values)).decode() if encoding == "base64" else values
        data.append({"index": i, "object": "embedding", "embedding": vector})
    return json.dumps({"id": "e", "object": "list", "data": data, "model": "m",
                       "usage": {"prompt_tokens": 1, "total_tokens": 1}}).encode()


@pytest.mark.parametrize("encoding", ["float", "base64"])
def test_pieces_give_what_one_pass_gives(encoding: str) -> None:
    body = embedding_reply(64, 1024, encoding=encoding)
    pauses: list[int] = []
    assert decode_embeddings(body, lambda: pauses.append(1)) == decode_embeddings(body)
    assert (len(body) > shapes.PIECE_BYTES) == bool(pauses)


def test_a_small_reply_is_one_pass() -> None:
    pauses: list[int] = []
    decode_embeddings(embedding_reply(16, 1024), lambda: pauses.append(1))  # about 330 KB
    assert pauses == []


def test_pieces_refuse_what_one_pass_refuses_naming_the_same_field() -> None:
    body = embedding_reply(64, 1024)
    broken = body.replace(b'"index": 40, "object": "embedding", "embedding": [',
                          b'"index": 40, "object": "embedding", "embedding": ["x", ', 1)
    assert broken != body
    messages = []
    for pause in (None, lambda: None):
        with pytest.raises(ShapeError) as caught:
            decode_embeddings(broken, pause)
        messages.append(str(caught.value))
    assert messages[0] == messages[1] == "data[40].embedding[0]: expected `float`, got `str`"


def test_a_large_reply_lets_the_loop_turn_after_locating_and_between_pieces_of_vectors() -> None:
    body = embedding_reply(64, 4096)  # about 5.8 MB: a locating pass, then 11 pieces of vectors
    located = shapes._raw_embeddings.decode(body)
    sizes = [len(item.embedding) for item in located.data]
    expected, done = 1, 0  # one turn after the locating pass, then one each time a piece is done
    for size in sizes:
        if done >= shapes.PIECE_BYTES:
            expected, done = expected + 1, 0
        done += size
    pauses: list[int] = []
    decode_embeddings(body, lambda: pauses.append(1))
    assert len(pauses) == expected >= sum(sizes) // shapes.PIECE_BYTES


@pytest.mark.parametrize("encoding", ["float", "base64"])
def test_the_form_is_told_by_the_key_not_by_a_value_named_alike(encoding: str) -> None:
    body = embedding_reply(2, 3, encoding=encoding)
    assert shapes._numbers_first(body) == (encoding == "float")
    assert body.index(b'"object": "embedding"') < body.index(b'"embedding": ')  # the value comes first
    spaced = body.replace(b'"embedding": ', b'"embedding" :\n ')
    assert shapes._numbers_first(spaced) == (encoding == "float")
    assert decode_embeddings(spaced) == decode_embeddings(body)


@pytest.mark.parametrize(("vector", "count"), [
    (b"[]", 0), (b"[ \n]", 0), (b"[1]", 1), (b"[ -1.5e-05 , 2E+3,0 ]", 3), (b"[0.1,0.2,0.3]", 3),
    (b'["x"]', None), (b"[[1]]", None), (b"[true]", None), (b"[null, 1]", None), (b"[{}]", None), (b"7", None),
    (b'"AAAA"', None),
])
def test_a_list_is_counted_only_when_it_holds_numbers_alone(vector: bytes, count: int | None) -> None:
    body = b'{"data": [{"index": 0, "embedding": ' + vector + b"}]}"
    raw = shapes._raw_embeddings.decode(body).data[0].embedding
    assert shapes._count_numbers(raw) == count


def test_a_reply_read_either_way_is_the_same() -> None:
    """The float form counted in place and the same reply decoded whole give equal items."""
    body = embedding_reply(8, 64)
    counted = decode_embeddings(body)
    whole = shapes._embeddings.decode(body)
    assert [(i.index, i.object, i.format, i.size) for i in counted.data] == \
        [(i.index, i.object, "float", len(i.embedding)) for i in whole.data]
