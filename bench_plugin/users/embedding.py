"""EmbeddingUser: batches of texts to POST /v1/embeddings; one vector must come back per input."""

from __future__ import annotations

import json
import time
from typing import Any

from bench_plugin.samples import Sample
from bench_plugin.users.base import RequestFailed, WorkloadUser
from bench_plugin.users.state import ClassLoad

PATH = "/v1/embeddings"


class EmbeddingUser(WorkloadUser):
    """Drives the embedding class."""

    workload = "embedding"

    def send(self, load: ClassLoad, item: dict[str, Any], sample: Sample) -> None:
        inputs = item["input"]
        body = {"model": load.model, "input": inputs, "encoding_format": "float"}
        sample.inputs = len(inputs)
        sample.input_tokens = sum(len(text.split()) for text in inputs)
        with self.exchange(load.url.rstrip("/") + PATH, PATH, sample, json=body) as resp:
            raw = resp._response.read()  # FastResponse keeps geventhttpclient's response here
            sample.end_s = time.time()
            try:
                reply = json.loads(raw)
            except json.JSONDecodeError:
                raise RequestFailed(f"reply is not JSON: {raw[:80]!r}", kind="protocol") from None
            data = reply.get("data") if isinstance(reply, dict) else None
            if not isinstance(data, list) or len(data) != len(inputs):
                got = len(data) if isinstance(data, list) else "no"
                raise RequestFailed(f"{got} embeddings for {len(inputs)} inputs", kind="protocol")
            sample.ok = True
