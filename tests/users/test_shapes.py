"""An embedding reply read: a list of numbers counted in place, a large reply in pieces, each way the same result.

How long a read holds the event loop, and how late a send due meanwhile leaves, is measured by
benchmarks/reply_parse.py (docs/benchmarks.md, "Reading a reply").
"""

from __future__ import annotations

import base64
import json
import random
import struct
from unittest import mock

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


def test_a_reply_of_a_few_vectors_is_one_pass() -> None:
    pauses: list[int] = []
    decode_embeddings(embedding_reply(2, 1024), lambda: pauses.append(1))  # about 40 KB
    decode_embeddings(embedding_reply(16, 1024, encoding="base64"), lambda: pauses.append(1))  # about 88 KB
    assert pauses == []


def test_lists_of_numbers_are_read_a_few_vectors_at_a_time() -> None:
    """The embedding class's realistic reply (16 x 1,024 floats, about 330 KB) turns the loop between pieces
    of vectors, so no step holds it for the whole reply."""
    body = embedding_reply(16, 1024)
    sizes = [len(item.embedding) for item in shapes._raw_embeddings.decode(body).data]
    expected, done = 0, 0
    for size in sizes:
        if done >= shapes.VECTOR_PIECE_BYTES:
            expected, done = expected + 1, 0
        done += size
    pauses: list[int] = []
    assert decode_embeddings(body, lambda: pauses.append(1)) == decode_embeddings(body)
    assert len(pauses) == expected >= sum(sizes) // shapes.VECTOR_PIECE_BYTES - 1 >= 2


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


def test_a_large_reply_read_whole_lets_the_loop_turn_after_locating_and_between_pieces_of_vectors() -> None:
    body = embedding_reply(64, 4096, encoding="base64")  # about 1.4 MB: a locating pass, then 3 pieces
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
    if vector.startswith(b"[") and b"]" not in vector[:-1]:  # a span _by_vector cuts: counted alike, in one pass
        start = body.index(vector)
        assert shapes._count_cuts(body, [(start, start + len(vector))]) == (None if count is None else [count])


def test_the_lists_of_a_reply_are_counted_in_one_pass_as_each_alone() -> None:
    lists = [b"[1,2,3]", b"[ ]", b"[-1.5e-05]", b"[0.25 , 4]"]
    body = b'{"data": [' + b", ".join(b'{"index": %d, "embedding": %s}' % (k, v) for k, v in enumerate(lists)) + b"]}"
    cuts = [(body.index(v), body.index(v) + len(v)) for v in lists]
    assert shapes._count_cuts(body, cuts) == [3, 0, 1, 2]
    # one list that is not numbers alone, anywhere, and no count at all
    for bad in (b"[1,true]", b"[1e5,null]", b"[{}]"):
        changed = body.replace(lists[2], bad)
        spans = [(changed.index(v), changed.index(v) + len(v)) for v in (*lists[:2], bad, lists[3])]
        assert shapes._count_cuts(changed, spans) is None, bad
    assert shapes._count_cuts(body, []) is None
    # a span may end the body (a vector read alone), and must open a list
    assert shapes._count_cuts(b"[1,2]", [(0, 5)]) == [2] and shapes._count_cuts(b" [1]", [(0, 4)]) is None


def test_a_reply_read_either_way_is_the_same() -> None:
    """The float form counted in place and the same reply decoded whole give equal items."""
    body = embedding_reply(8, 64)
    counted = decode_embeddings(body)
    whole = shapes._embeddings.decode(body)
    assert [(i.index, i.object, i.format, i.size) for i in counted.data] == \
        [(i.index, i.object, "float", len(i.embedding)) for i in whole.data]


def whole(body: bytes) -> object:
    """What the whole read (every byte located by msgspec) makes of ``body``: its reply, or its error."""
    with mock.patch.object(shapes, "_by_vector", lambda body, pause: None):
        return outcome(body)


def outcome(body: bytes) -> object:
    try:
        return decode_embeddings(body, lambda: None)
    except ShapeError as exc:
        return f"ShapeError: {exc}"


VECTORS = b'{"object": "list", "data": [{"index": 0, "object": "embedding", "embedding": [0.5, -1, 2e-3]}, ' \
    b'{"index": 1, "object": "embedding", "embedding": [1, 2, 3]}], "model": "m", "usage": {"total_tokens": 2}}'


TAIL = b'"embedding": [1, 2, 3]}], "model": "m", "usage": {"total_tokens": 2}}'
BY_VECTOR = [(b"", b""), (b'"embedding": [1, 2, 3]', b'"embedding"\t:\r\n [1,2,3]'),
             (b'"embedding": [0.5, -1, 2e-3]', b'"embedding": [1e999]')]
"""The changes below after which the reply is still read a vector at a time."""


@pytest.mark.parametrize("change", [
    (b"", b""),  # as sent
    (b'"embedding": [1, 2, 3]', b'"embedding"\t:\r\n [1,2,3]'),  # JSON's whitespace around the colon
    (b'"embedding": [1, 2, 3]', b'"embedding": [1, "x", 3]'),  # a string in a vector
    (b'"embedding": [1, 2, 3]', b'"embedding": [1, true, 3]'),  # a boolean
    (b'"embedding": [1, 2, 3]', b'"embedding": [1,, 3]'),  # not JSON inside a vector
    (b'"embedding": [1, 2, 3]', b'"embedding": [[1], [2], [3]]'),  # a vector of lists
    (b'"embedding": [1, 2, 3]', b'"embedding": [1, 2, 3'),  # a vector cut off
    (b'"embedding": [1, 2, 3]', b'"embedding": [1, 2, 3], "embedding": [4]'),  # a key twice
    (b'"embedding": [1, 2, 3]', b'"\\u0065mbedding": [1, 2, 3]'),  # a key written with an escape
    (b'"embedding": [1, 2, 3]', b'"embedding": 7'),  # a number, not a vector
    (b'"total_tokens": 2', b'"embedding": [9]'),  # a vector under usage
    (TAIL, b'"embedding": "#1"}], "model": "m", "usage": {"embedding": [9]}}'),  # that, and a marker's look-alike
    (TAIL, b'"embedding": 1}], "model": "m", "usage": {"embedding": [9]}}'),  # or a number where marker 1 stands
    (b'"model": "m"', b'"model": "#0"'),  # a value that looks like a marker
    (b'"model": "m"', b'"model": "m\\/1\\u00e9"'),  # escapes outside the vectors
    (b'"model": "m"', b'"model": "x\\"embedding\\": [1]"'),  # a key's text inside a string
    (b'"data": [', b'"data": [{"index": 2, "\\"embedding": [5]}, '),  # a key that ends in embedding
    (b'}], "model"', b'}, 7], "model"'),  # an item that is not an object
    (b'"usage": {"total_tokens": 2}}', b'"usage": {"total_tokens": 2}} x'),  # text after the reply
    (b'"embedding": [0.5, -1, 2e-3]', b'"embedding": [1e999]'),  # past a double's range: counted either way
])
def test_read_a_vector_at_a_time_or_whole_a_reply_gives_the_same_reply_or_error(change: tuple[bytes, bytes]) -> None:
    """Whatever the reply, reading its vectors one at a time gives what the whole read gives: the same items,
    or the same error naming the same field."""
    old, new = change
    body = VECTORS.replace(old, new, 1)
    assert old in VECTORS and (body != VECTORS or not old)
    assert outcome(body) == whole(body)
    read = shapes._by_vector(body, None)  # None: left to the whole read
    assert (read is not None) == (change in BY_VECTOR), read
