"""What the third-party servers actually send and refuse, in plain HTTP: the facts docs/servers.md states and
the plugin's readers rely on (transformers serve 5.24.0 and infinity-emb 0.0.78, the versions locked in
requirements/transformers.txt and requirements/infinity.txt).

The tiny Llama's tokenizer is word-level and it never picks a special token (tests/thirdparty/models.py), so
every reply runs to max_tokens and carries one content chunk per token: the counts below are exact.
"""

from __future__ import annotations

import json

import pytest
import requests
from thirdparty_testlib import Server

from bench_plugin.scenario.request_sets import PACKAGED_CLIPS

pytestmark = pytest.mark.slow

TIMEOUT_S = 60
PROMPT = [{"role": "user", "content": "please write a short story about a robot"}]


def chat(server: Server, **fields: object) -> requests.Response:
    body = {"model": server.models["llm"], "messages": PROMPT, "max_tokens": 6, "temperature": 0.0, **fields}
    body = {key: value for key, value in body.items() if value is not None}  # None: leave the field out
    return requests.post(server.url + "/v1/chat/completions", json=body, timeout=TIMEOUT_S,
                         stream=bool(body.get("stream")))


def sse_events(reply: requests.Response) -> tuple[list[str], str]:
    """Each ``data:`` payload of a streamed reply in order, and the whole body as sent."""
    body = reply.content.decode()
    events = [line[len("data: "):] for line in body.split("\n") if line.startswith("data: ")]
    return events, body


@pytest.fixture(params=["transformers_server", "transformers_cb_server"])
def llm_server(request: pytest.FixtureRequest) -> Server:
    """Each transformers server in turn: default (one generation at a time) and --continuous-batching."""
    return request.getfixturevalue(request.param)


def test_a_chat_stream_ends_with_the_chunk_holding_finish_reason_and_usage_and_no_done(llm_server: Server) -> None:
    reply = chat(llm_server, stream=True, stream_options={"include_usage": True}, max_tokens=5)
    assert reply.status_code == 200, reply.text
    assert reply.headers["content-type"].startswith("text/event-stream")
    events, body = sse_events(reply)
    assert "[DONE]" not in body  # OpenAI, vLLM, SGLang, TGI and llama.cpp end with `data: [DONE]`; this does not
    chunks = [json.loads(event) for event in events]
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant"}
    content = [c for c in chunks if c["choices"][0]["delta"].get("content")]
    assert len(content) == 5  # one chunk per token
    last = chunks[-1]
    assert last["choices"][0]["finish_reason"] == "length" and last["choices"][0]["delta"] == {}
    assert last["usage"]["completion_tokens"] == 5 and last["usage"]["prompt_tokens"] > 0
    assert [c for c in chunks if c["choices"][0].get("finish_reason")] == [last]
    assert len(chunks) == 1 + 5 + 1  # the role, the tokens, the end: nothing after it


def test_usage_comes_without_stream_options_too(llm_server: Server) -> None:
    """stream_options is in the fields it ignores (with a warning): usage is sent either way."""
    events, _ = sse_events(chat(llm_server, stream=True, max_tokens=3))
    assert json.loads(events[-1])["usage"]["completion_tokens"] == 3


def test_max_completion_tokens_is_honoured_and_wins_over_max_tokens(llm_server: Server) -> None:
    events, _ = sse_events(chat(llm_server, stream=True, max_tokens=6, max_completion_tokens=2))
    assert json.loads(events[-1])["usage"]["completion_tokens"] == 2
    reply = chat(llm_server, max_tokens=None, max_completion_tokens=4)
    assert reply.status_code == 200 and reply.json()["usage"]["completion_tokens"] == 4


@pytest.mark.parametrize("fields", [{"ignore_eos": True, "min_tokens": 6}, {"ignore_eos": True}, {"min_tokens": 6}],
                         ids=["both", "ignore_eos", "min_tokens"])
def test_ignore_eos_and_min_tokens_are_refused_with_422_naming_them(llm_server: Server, fields: dict) -> None:
    reply = chat(llm_server, stream=True, **fields)
    assert reply.status_code == 422, reply.text
    detail = reply.json()["detail"]
    assert detail.startswith("Unexpected fields in the request: ")
    for name in fields:
        assert repr(name) in detail, detail


def test_models_lists_a_local_path_once_it_is_loaded(transformers_server: Server) -> None:
    """5.24.0 answers 200 (issue 20 saw 500 for a local path on 5.17.0): the path is the id, owned by "local"."""
    assert chat(transformers_server).status_code == 200  # loaded now, if no test before loaded it
    reply = requests.get(transformers_server.url + "/v1/models", timeout=TIMEOUT_S)
    assert reply.status_code == 200, reply.text
    listed = {m["id"]: m for m in reply.json()["data"]}
    model = listed[transformers_server.models["llm"]]
    assert model["owned_by"] == "local" and model["status"] == {"value": "loaded"}


def clip() -> tuple[str, bytes]:
    path = min(PACKAGED_CLIPS.glob("*.wav"), key=lambda p: p.stat().st_size)  # the shortest packaged clip
    return path.name, path.read_bytes()


@pytest.mark.parametrize("response_format", ["json", "text"])
def test_a_transcription_is_json_whatever_response_format_asks(transformers_server: Server,
                                                               response_format: str) -> None:
    """response_format (and language) are in the fields it ignores: `text` gets the JSON object too."""
    name, audio = clip()
    reply = requests.post(transformers_server.url + "/v1/audio/transcriptions", timeout=TIMEOUT_S,
                          data={"model": transformers_server.models["asr"], "response_format": response_format,
                                "language": "en"},
                          files={"file": (name, audio, "audio/wav")})
    assert reply.status_code == 200, reply.text
    assert reply.headers["content-type"] == "application/json"
    body = reply.json()
    assert list(body) == ["text"] and isinstance(body["text"], str) and body["text"].strip()


def test_infinity_embeddings_reply(infinity_server: Server) -> None:
    inputs = ["hello world", "the quick brown fox", "embeddings map each sentence to a vector"]
    reply = requests.post(infinity_server.url + "/v1/embeddings", timeout=TIMEOUT_S,
                          json={"model": infinity_server.models["embedding"], "input": inputs,
                                "encoding_format": "float"})
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["object"] == "list" and body["model"] == infinity_server.models["embedding"]
    assert body["id"].startswith("infinity-") and isinstance(body["created"], int)
    assert [(e["object"], e["index"]) for e in body["data"]] == [("embedding", i) for i in range(len(inputs))]
    assert {len(e["embedding"]) for e in body["data"]} == {64}  # the tiny BERT's hidden size
    assert all(isinstance(x, float) for e in body["data"] for x in e["embedding"])
    # Without --lengths-via-tokenize (off by default) "tokens" are characters: len() of each input.
    assert body["usage"] == {"prompt_tokens": sum(map(len, inputs)), "total_tokens": sum(map(len, inputs))}


def test_infinity_serves_its_one_model_whatever_the_request_names(infinity_server: Server) -> None:
    """With one model loaded, the request's model is not checked (vLLM answers 404, TEI only logs it)."""
    reply = requests.post(infinity_server.url + "/v1/embeddings", json={"model": "no-such-model", "input": ["hi"]},
                          timeout=TIMEOUT_S)
    assert reply.status_code == 200 and reply.json()["model"] == infinity_server.models["embedding"]
    models = requests.get(infinity_server.url + "/v1/models", timeout=TIMEOUT_S).json()
    assert [m["id"] for m in models["data"]] == [infinity_server.models["embedding"]]


def test_infinity_routes_are_under_the_url_prefix_and_health_is_not(infinity_server: Server) -> None:
    assert requests.get(infinity_server.url + "/health", timeout=TIMEOUT_S).status_code == 200
    assert requests.get(infinity_server.url + "/v1/health", timeout=TIMEOUT_S).status_code == 404
    unprefixed = requests.post(infinity_server.url + "/embeddings", json={"input": ["hi"]}, timeout=TIMEOUT_S)
    assert unprefixed.status_code == 404
