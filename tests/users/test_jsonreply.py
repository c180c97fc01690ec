"""A large JSON reply parsed in pieces: the same value and the same refusals as json.loads, and the loop turns.

The documents are drawn from a seeded generator (nested objects and arrays, strings with escapes and
non-ASCII text, numbers of every JSON form, constants) and parsed with pieces down to one character,
so every value of the two walked levels is followed by a pause; malformed ones are cut or broken at
every kind of place the walk checks. The event-loop test runs in pytest's process, which
tests/conftest.py has monkey-patched with gevent as in a load generator.
"""

from __future__ import annotations

import io
import json
import random
import time
from typing import Any

import gevent
import pytest

from bench_plugin.results.samples import Sample
from bench_plugin.users import jsonreply
from bench_plugin.users.base import read_json, wait_until


def document(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.choice(["object", "array", "string", "number", "constant"] if depth < 4 else
                      ["string", "number", "constant"])
    if kind == "object":
        return {rng.choice(["a", "data", "é", "k\"q", "\\n", ""]) + str(rng.randrange(9)): document(rng, depth + 1)
                for _ in range(rng.randrange(5))}
    if kind == "array":
        return [document(rng, depth + 1) for _ in range(rng.randrange(6))]
    if kind == "string":
        return "".join(rng.choice(["x", "ü", "\n", "\"", "\\", "\u2028", "😀", " "]) for _ in range(rng.randrange(8)))
    if kind == "number":
        return rng.choice([0, -1, 10**30, rng.uniform(-1e6, 1e6), 1e-300, -0.0])
    return rng.choice([True, False, None])


def texts(value: Any, rng: random.Random) -> list[str]:
    """The same document written compactly, with json's default spacing, and with odd whitespace."""
    spaced = json.dumps(value, indent=rng.choice([1, 3]), ensure_ascii=rng.random() < 0.5)
    return [json.dumps(value, separators=(",", ":")), json.dumps(value), " \n\t" + spaced + "\r\n "]


@pytest.mark.parametrize("seed", range(40))
def test_every_document_reads_as_json_loads_reads_it(seed: int) -> None:
    rng = random.Random(seed)
    value = document(rng)
    for text in texts(value, rng):
        for piece in (1, 5, 64):
            assert jsonreply.loads(text, lambda: None, piece) == json.loads(text)
            assert jsonreply.loads(text.encode(), lambda: None, piece) == json.loads(text.encode())


def test_nan_and_infinity_read_as_json_loads_reads_them() -> None:
    text = '{"a": [NaN, Infinity, -Infinity], "b": {"c": NaN}}'
    got = jsonreply.loads(text, lambda: None, 1)
    assert got["a"][0] != got["a"][0] and got["a"][1:] == [float("inf"), float("-inf")]
    assert got["b"]["c"] != got["b"]["c"]


MALFORMED = [
    "", " ", "{", "[", "{]", "[}", '{"a" 1}', '{"a": 1 "b": 2}', '{"a": 1,}', "[1 2]", "[1,]", "[,1]", "{,}",
    '{a: 1}', '{"a": }', '{"a": [1, 2}', '{"a": "unterminated}', '{"a": 1} x', "[1] [2]", '{"a": 1}}',
    '{"a": "\x01"}', '{"a": 01}', "[tru]", '{"\\x": 1}', "\ufeff[1]", '{"a": [1, {"b": 2,}]}', "[[1, 2] 3]",
]


@pytest.mark.parametrize("text", MALFORMED)
def test_what_json_loads_refuses_is_refused_the_same_way(text: str) -> None:
    with pytest.raises(json.JSONDecodeError) as expected:
        json.loads(text)
    for piece in (1, 3, 1000):
        with pytest.raises(json.JSONDecodeError) as got:
            jsonreply.loads(text, lambda: None, piece)
        assert got.value.pos == expected.value.pos, (piece, got.value, expected.value)


def test_bytes_that_are_not_text_are_refused_as_json_loads_refuses_them() -> None:
    body = b'{"a": "\xff\xfe\xfd"}' + b" " * 100
    with pytest.raises(UnicodeDecodeError):
        json.loads(body)
    with pytest.raises(UnicodeDecodeError):
        jsonreply.loads(body, lambda: None, 8)


def embedding_reply(vectors: int, dims: int) -> bytes:
    rng = random.Random(7)
    data = [{"object": "embedding", "index": i, "embedding": [rng.gauss(0, 1) for _ in range(dims)]}
            for i in range(vectors)]
    return json.dumps({"object": "list", "data": data, "model": "m", "usage": {"prompt_tokens": 3}}).encode()


def test_an_embedding_reply_pauses_between_vectors_and_a_short_reply_not_at_all() -> None:
    body = embedding_reply(16, 1024)
    pauses: list[int] = []
    assert jsonreply.loads(body, lambda: pauses.append(1)) == json.loads(body)
    # a pause once PIECE_CHARS (32 KB) were parsed since the last, at a vector's end (each about 21 KB): every
    # second vector of the 16
    assert jsonreply.PIECE_CHARS == 32_768 and len(pauses) == 8, len(pauses)
    small: list[int] = []
    assert jsonreply.loads(b'{"object": "list", "data": []}', lambda: small.append(1)) == {"object": "list",
                                                                                          "data": []}
    assert small == []


@pytest.mark.serial  # a timing on the loop: two lanes beside it could pre-empt the process for milliseconds
def test_a_send_due_while_a_reply_is_read_leaves_on_time() -> None:
    body = embedding_reply(64, 1024)  # about 1.3 MB: 10-15 ms of json.loads on the project's 2-core machine
    lateness: list[float] = []

    def sender(due: float) -> None:
        wait_until(due)
        lateness.append(time.time() - due)

    start = time.time()
    json.loads(body)
    parse_s = time.time() - start
    due = time.time() + parse_s / 2  # halfway through the parse below
    sending = gevent.spawn(sender, due)
    gevent.sleep(0)  # the sender waits for its time
    sample = Sample("embedding", 1, 0, 0, 0, 0, 0.0, 0.0, 0.0, False)
    reply = read_json(io.BytesIO(body), sample)  # what the users read a reply with (a reader of the body)
    sending.join()
    assert reply == json.loads(body) and sample.end_s >= start
    # with json.loads the sender would have waited for the end of the parse: about parse_s / 2 late
    assert lateness[0] < parse_s / 4, (lateness, parse_s)
