"""EmbeddingUser: batches of texts to POST /v1/embeddings; one vector must come back per input.

The reply is read as OpenAI's API defines it and vLLM, TEI and infinity send it: ``{"object": "list",
"data": [{"object": "embedding", "embedding": [floats], "index": i}, ...], "model", "usage"}``, with
one item per input, each ``index`` once, every vector a non-empty list of numbers of one length
(``encoding_format: float`` is what the class asks for; a base64 string is accepted too, as OpenAI's
``encoding_format: base64`` returns). A reply that breaks it is a ``protocol`` error naming the field.
"""

from __future__ import annotations

from typing import Any

from bench_plugin.loadgen.state import ClassLoad
from bench_plugin.results.samples import Sample
from bench_plugin.scenario.request_sets import RequestItem
from bench_plugin.users.base import Prepared, RequestFailed, WorkloadUser, json_request, read_json

PATH = "/v1/embeddings"


class EmbeddingUser(WorkloadUser):
    """Drives the embedding class."""

    workload = "embedding"

    def prepare(self, load: ClassLoad, item: RequestItem) -> Prepared:
        inputs = item["input"]
        sizes = {"inputs": len(inputs), "input_tokens": sum(len(text.split()) for text in inputs)}
        body = {"model": load.model, "input": inputs, "encoding_format": "float"}
        return json_request(load.url.rstrip("/") + PATH, PATH, body, sizes, inputs=len(inputs))

    def read(self, raw: Any, load: ClassLoad, prepared: Prepared, sample: Sample) -> None:
        check_embeddings(read_json(raw, sample), prepared.expect["inputs"])
        sample.ok = True


def check_embeddings(reply: dict[str, Any], wanted: int) -> None:
    """Raise a protocol RequestFailed naming the field where ``reply`` is not ``wanted`` embeddings."""
    data = reply.get("data")
    if not isinstance(data, list):
        raise RequestFailed(f"reply has no 'data' list (keys: {', '.join(sorted(reply)) or 'none'})", kind="protocol")
    if len(data) != wanted:
        raise RequestFailed(f"{len(data)} embeddings in 'data' for {wanted} inputs", kind="protocol")
    seen: set[int] = set()
    width: int | None = None
    for position, item in enumerate(data):
        where = f"data[{position}]"
        if not isinstance(item, dict):
            raise RequestFailed(f"{where} is not an object", kind="protocol")
        if item.get("object", "embedding") != "embedding":
            raise RequestFailed(f"{where}.object is {item.get('object')!r}, not 'embedding'", kind="protocol")
        index = item.get("index")
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < wanted or index in seen:
            raise RequestFailed(f"{where}.index is {index!r}: each of 0-{wanted - 1} once", kind="protocol")
        seen.add(index)
        vector = item.get("embedding")
        if isinstance(vector, str) and vector:  # encoding_format base64
            continue
        if not isinstance(vector, list) or not vector or not isinstance(vector[0], int | float):
            raise RequestFailed(f"{where}.embedding is not a non-empty list of numbers", kind="protocol")
        if width is not None and len(vector) != width:
            raise RequestFailed(f"{where}.embedding has {len(vector)} dimensions, data[0] {width}", kind="protocol")
        width = len(vector)
