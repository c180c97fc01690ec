"""EmbeddingUser: batches of texts to POST /v1/embeddings; one vector must come back per input."""

from __future__ import annotations

from typing import Any

from bench_plugin.samples import Sample
from bench_plugin.users.base import Prepared, RequestFailed, WorkloadUser, json_request, read_json
from bench_plugin.users.state import ClassLoad

PATH = "/v1/embeddings"


class EmbeddingUser(WorkloadUser):
    """Drives the embedding class."""

    workload = "embedding"

    def prepare(self, load: ClassLoad, item: dict[str, Any]) -> Prepared:
        inputs = item["input"]
        sizes = {"inputs": len(inputs), "input_tokens": sum(len(text.split()) for text in inputs)}
        body = {"model": load.model, "input": inputs, "encoding_format": "float"}
        return json_request(load.url.rstrip("/") + PATH, PATH, body, sizes, inputs=len(inputs))

    def read(self, raw: Any, load: ClassLoad, prepared: Prepared, sample: Sample) -> None:
        reply = read_json(raw, sample)
        data = reply.get("data")
        wanted = prepared.expect["inputs"]
        if not isinstance(data, list) or len(data) != wanted:
            got = len(data) if isinstance(data, list) else "no"
            raise RequestFailed(f"{got} embeddings for {wanted} inputs", kind="protocol")
        sample.ok = True
