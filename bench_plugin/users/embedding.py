"""EmbeddingUser: batches of texts to POST /v1/embeddings; one vector must come back per input.

The request asks for the class's ``encoding_format``: ``base64`` (the default, as OpenAI's Python SDK
asks whenever its caller does not choose: little-endian float32 bytes in base64, about a quarter of the
bytes of floats) or ``float``. The reply is read as OpenAI's API defines it and vLLM, TEI, SGLang and
infinity send it: ``{"object": "list", "data": [{"object": "embedding", "embedding": <vector>, "index":
i}, ...], "model", "usage"}``, decoded in one typed pass (users/shapes.py). It must hold one item per
input, each ``index`` once, every vector non-empty and of one width: a JSON list of numbers, or a
base64 string whose bytes are whole float32 values (4 x width bytes). A server that answers floats to a
base64 request (SGLang ignores the field) is accepted: each sample records how its vectors came back
(``Sample.reply_format``). A reply that breaks the rules is a ``protocol`` error naming the field.
"""

from __future__ import annotations

from typing import Any

import gevent

from bench_plugin.loadgen.state import ClassLoad
from bench_plugin.results.samples import Sample
from bench_plugin.scenario.request_sets import RequestItem
from bench_plugin.users.base import Prepared, RequestFailed, WorkloadUser, json_request, read_body
from bench_plugin.users.shapes import BASE64, EmbeddingsReply, ShapeError, decode_embeddings

PATH = "/v1/embeddings"


class EmbeddingUser(WorkloadUser):
    """Drives the embedding class."""

    workload = "embedding"

    def prepare(self, load: ClassLoad, item: RequestItem) -> Prepared:
        inputs = item["input"]
        sizes = {"inputs": len(inputs), "input_tokens": sum(len(text.split()) for text in inputs)}
        body = {"model": load.model, "input": inputs,
                "encoding_format": load.options.get("encoding_format", BASE64)}
        return json_request(load.url.rstrip("/") + PATH, PATH, body, sizes, inputs=len(inputs))

    def read(self, raw: Any, load: ClassLoad, prepared: Prepared, sample: Sample) -> None:
        body = read_body(raw, sample)
        try:  # a large reply in pieces, letting due sends go out between them
            reply = decode_embeddings(body, gevent.idle)
        except ShapeError as exc:
            raise RequestFailed(str(exc), kind="protocol") from None
        sample.reply_format = check_embeddings(reply, prepared.expect["inputs"])
        sample.ok = True


def check_embeddings(reply: EmbeddingsReply, wanted: int) -> str:
    """How the vectors came back (shapes.BASE64 or FLOAT); a protocol RequestFailed naming the field where
    ``reply`` is not ``wanted`` embeddings of one width."""
    data = reply.data
    if len(data) != wanted:
        raise RequestFailed(f"{len(data)} embeddings in 'data' for {wanted} inputs", kind="protocol")
    seen = bytearray(wanted)
    width: int | None = None
    for position, item in enumerate(data):
        where = f"data[{position}]"
        if item.object != "embedding":
            raise RequestFailed(f"{where}.object is {item.object!r}, not 'embedding'", kind="protocol")
        index = item.index
        if not 0 <= index < wanted or seen[index]:
            raise RequestFailed(f"{where}.index is {index!r}: each of 0-{wanted - 1} once", kind="protocol")
        seen[index] = 1
        size = item.width
        if not size:
            got = (f"base64 of {item.size} bytes, not whole float32 values"
                   if item.format == BASE64 and item.size else "empty")
            raise RequestFailed(f"{where}.embedding is {got}", kind="protocol")
        if width is not None and size != width:
            raise RequestFailed(f"{where}.embedding has {size} dimensions, data[0] {width}", kind="protocol")
        width = size
    formats = {item.format for item in data}
    return formats.pop() if len(formats) == 1 else "mixed"
