"""The embedding and transcription replies are checked against OpenAI's schema, each error naming the field."""

from __future__ import annotations

import re
from typing import Any

import pytest

from bench_plugin.users.asr import check_transcription
from bench_plugin.users.base import RequestFailed
from bench_plugin.users.embedding import check_embeddings


def item(i: int, **changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"object": "embedding", "embedding": [0.1, 0.2, 0.3], "index": i}
    base.update(changes)
    return {k: v for k, v in base.items() if v is not None}


def test_what_vllm_tei_and_infinity_send_is_read() -> None:
    check_embeddings({"object": "list", "data": [item(1), item(0)], "model": "m"}, 2)  # any order, each index once
    check_embeddings({"data": [item(0, embedding="AAAAAA==")]}, 1)  # encoding_format base64


@pytest.mark.parametrize(("reply", "message"), [
    ({"embeddings": []}, "reply has no 'data' list (keys: embeddings)"),
    ({"data": [item(0)]}, "1 embeddings in 'data' for 2 inputs"),
    ({"data": [item(0), item(0)]}, "data[1].index is 0: each of 0-1 once"),
    ({"data": [item(0), item(1, index=None)]}, "data[1].index is None"),
    ({"data": [item(0), item(1, embedding=[])]}, "data[1].embedding is not a non-empty list of numbers"),
    ({"data": [item(0), item(1, embedding=[0.5])]}, "data[1].embedding has 1 dimensions, data[0] 3"),
    ({"data": [item(0), item(1, object="list")]}, "data[1].object is 'list', not 'embedding'"),
    ({"data": [item(0), "x"]}, "data[1] is not an object"),
])
def test_a_broken_embedding_reply_names_the_field(reply: dict[str, Any], message: str) -> None:
    with pytest.raises(RequestFailed, match=re.escape(message)) as caught:
        check_embeddings(reply, 2)
    assert caught.value.kind == "protocol"


def test_transcriptions_in_json_and_verbose_json() -> None:
    check_transcription({"text": "hello"}, "json")
    check_transcription({"text": "hello", "language": "en", "segments": [{"id": 0, "text": "hello"}]}, "verbose_json")
    with pytest.raises(RequestFailed, match=re.escape("json reply has no 'text' string (keys: transcript)")):
        check_transcription({"transcript": "hello"}, "json")
    with pytest.raises(RequestFailed, match=re.escape("segments[0] has no 'text' string")):
        check_transcription({"text": "hello", "segments": [{"id": 0}]}, "verbose_json")
