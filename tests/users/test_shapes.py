"""A large embedding reply decoded in pieces: the same value and the same refusals as one pass, and the loop turns.

The event-loop test runs in pytest's process, which tests/conftest.py has monkey-patched with gevent as in a
load generator.
"""

from __future__ import annotations

import base64
import json
import random
import struct
import time

import gevent
import pytest

from bench_plugin.loadgen.alarm import wait_until
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


@pytest.mark.serial  # a timing on the loop: two lanes beside it could pre-empt the process for milliseconds
def test_a_send_due_while_a_large_reply_is_decoded_leaves_on_time() -> None:
    body = embedding_reply(64, 4096)  # about 5 MB: several ms in one pass on the project's 2-core machine
    lateness: list[float] = []

    def sender(due: float) -> None:
        wait_until(due)
        lateness.append(time.time() - due)

    start = time.time()
    decode_embeddings(body)
    one_pass_s = time.time() - start
    due = time.time() + one_pass_s / 2  # halfway through the decode below
    sending = gevent.spawn(sender, due)
    gevent.sleep(0)  # the sender waits for its time
    decode_embeddings(body, gevent.idle)
    sending.join()
    # in one pass the sender would have waited for its end: about one_pass_s / 2 late
    assert lateness[0] < one_pass_s / 4, (lateness, one_pass_s)
