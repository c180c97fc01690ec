"""The embedding and transcription replies are checked against OpenAI's schema, each error naming the field."""

from __future__ import annotations

import base64
import json
import re
import struct
from typing import Any
from unittest import mock

import pytest

from bench_plugin.users import shapes
from bench_plugin.users.base import RequestFailed, server_times
from bench_plugin.users.embedding import check_embeddings
from bench_plugin.users.shapes import ShapeError, decode_embeddings, decode_transcription


def item(i: int, **changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"object": "embedding", "embedding": [0.1, 0.2, 0.3], "index": i}
    base.update(changes)
    return {k: v for k, v in base.items() if v is not None}


def b64(*values: float) -> str:
    return base64.b64encode(struct.pack(f"<{len(values)}f", *values)).decode()


def check(reply: dict[str, Any], wanted: int) -> str:
    """What the user does with a reply: decode it (shapes), then check it."""
    try:
        decoded = decode_embeddings(json.dumps(reply).encode())
    except ShapeError as exc:
        raise RequestFailed(str(exc), kind="protocol") from None
    return check_embeddings(decoded, wanted)


def test_what_vllm_tei_sglang_and_infinity_send_is_read() -> None:
    assert check({"object": "list", "data": [item(1), item(0)], "model": "m"}, 2) == "float"  # any order
    assert check({"data": [item(0, embedding=b64(0.5, -1.0, 2.0)), item(1, embedding=b64(1, 2, 3))]}, 2) == "base64"
    assert check({"data": [item(0, embedding=[1, 2, 3])], "usage": {"prompt_tokens": 3}}, 1) == "float"  # ints


def test_a_base64_vector_decodes_to_its_float32_values() -> None:
    reply = decode_embeddings(json.dumps({"data": [item(0, embedding=b64(0.5, -1.0))]}).encode())
    assert reply.data[0].width == 2 and struct.unpack("<2f", reply.data[0].vector) == (0.5, -1.0)


@pytest.mark.parametrize(("reply", "message"), [
    ({"embeddings": []}, "reply: object missing required field `data`"),
    ({"data": {}}, "data: expected `array`, got `object`"),
    ({"data": [item(0)]}, "1 embeddings in 'data' for 2 inputs"),
    ({"data": [item(0), item(0)]}, "data[1].index is 0: each of 0-1 once"),
    ({"data": [item(0), item(1, index=None)]}, "data[1]: object missing required field `index`"),
    ({"data": [item(0), item(1, index=True)]}, "data[1].index: expected `int`, got `bool`"),
    ({"data": [item(0), item(1, index=7)]}, "data[1].index is 7: each of 0-1 once"),
    ({"data": [item(0), item(1, embedding=[])]}, "data[1].embedding is empty"),
    ({"data": [item(0), item(1, embedding=[0.5])]}, "data[1].embedding has 1 dimensions, data[0] 3"),
    ({"data": [item(0), item(1, embedding=[0.5, "x", 1])]}, "data[1].embedding[1]: expected `float`, got `str`"),
    ({"data": [item(0), item(1, embedding=7)]}, "data[1].embedding: expected a list of numbers or a base64 string"),
    ({"data": [item(0), item(1, embedding="!!")]}, "data[1].embedding: invalid base64 encoded string"),
    ({"data": [item(0, embedding=b64(1, 2, 3)), item(1, embedding="AAAA")]},
     "data[1].embedding is base64 of 3 bytes, not whole float32 values"),
    ({"data": [item(0, embedding=b64(1, 2, 3)), item(1, embedding=b64(1, 2))]},
     "data[1].embedding has 2 dimensions, data[0] 3"),
    ({"data": [item(0), item(1, object="list")]}, "data[1].object is 'list', not 'embedding'"),
    ({"data": [item(0), "x"]}, "data[1]: expected `object`, got `str`"),
])
def test_a_broken_embedding_reply_names_the_field(reply: dict[str, Any], message: str) -> None:
    with pytest.raises(RequestFailed, match=re.escape(message)) as caught:
        check(reply, 2)
    assert caught.value.kind == "protocol"
    for first in (True, False):  # told the wrong form first, the read is slower, never different
        with mock.patch.object(shapes, "_numbers_first", lambda body, first=first: first), \
                pytest.raises(RequestFailed, match=re.escape(message)):
            check(reply, 2)


def test_a_reply_that_is_not_json_says_so() -> None:
    with pytest.raises(ShapeError, match=re.escape("reply is not JSON: b'<html>")):
        decode_embeddings(b"<html>502 Bad Gateway</html>")


def test_a_mix_of_forms_is_read_and_said() -> None:
    assert check({"data": [item(0, embedding=b64(1, 2, 3)), item(1)]}, 2) == "mixed"


def test_transcriptions_in_json_and_verbose_json() -> None:
    assert decode_transcription(b'{"text": "hello"}').text == "hello"
    found = decode_transcription(b'{"text": "hi", "language": "en", "segments": [{"id": 0, "text": "hi"}]}')
    assert found.segments is not None and found.segments[0].text == "hi"
    with pytest.raises(ShapeError, match=re.escape("reply: object missing required field `text`")):
        decode_transcription(b'{"transcript": "hello"}')
    with pytest.raises(ShapeError, match=re.escape("segments[0]: object missing required field `text`")):
        decode_transcription(b'{"text": "hello", "segments": [{"id": 0}]}')


def test_the_servers_split_of_a_reply_is_read_from_teis_headers() -> None:
    assert server_times({"x-queue-time": "12", "x-inference-time": "30.5"}) == (0.012, 0.0305)  # TEI: whole ms
    assert server_times({"x-queue-time": "0.250"}) == (0.00025, None)
    assert server_times({"x-queue-time": "soon", "x-inference-time": "-1"}) == (None, None)
    assert server_times({"x-queue-time": "nan", "x-inference-time": "inf"}) == (None, None)
    assert server_times({}) == (None, None) and server_times(None) == (None, None)
