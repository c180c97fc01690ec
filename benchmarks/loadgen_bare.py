"""The reference of benchmarks/loadgen_capacity.py: bare Locust FastHttpUsers in a closed loop, no plugin.

    BARE_SCENARIO=s.yaml locust --headless -f benchmarks/loadgen_bare.py -u 32 -r 32 -t 10s BareEmbedding

Each user posts the same request body, the one the plugin's user sends for request 0 of the
scenario's class (built here by the plugin's own code), as fast as replies come back: the rate one
Locust process reaches with nothing of the plugin in its request path.
BareEmbedding reads the whole reply (FastHttpUser's default); BareLLM streams and reads the SSE body
to its ``data: [DONE]``. Neither parses JSON: that is the least a Locust user can do per request.
"""

from __future__ import annotations

import json
import os
from functools import cache
from pathlib import Path

from locust import constant, task
from locust.contrib.fasthttp import FastHttpUser

from bench_plugin.loadgen.state import ClassLoad
from bench_plugin.scenario import load_scenario
from bench_plugin.scenario.request_sets import build_request_sets
from bench_plugin.users.llm import request_body

HEADERS = {"Content-Type": "application/json"}


def plugin_request(path: Path, workload: str) -> bytes:
    """The body the plugin's user sends for request 0 of ``workload`` in the scenario at ``path``."""
    spec = load_scenario(path)
    item = build_request_sets(spec, path.parent)[workload].items[0]
    model = spec.classes.get(workload).model
    if workload == "embedding":  # as users/embedding.py's prepare
        return json.dumps({"model": model, "input": item["input"], "encoding_format": "float"}).encode()
    load = ClassLoad(url="", model=model, arrival="poisson", load=1.0, timeout_s=10.0, max_in_flight=1,
                     options={"api": "chat", "fixed_output": True})
    return json.dumps(request_body(load, item)).encode()


@cache
def _body(workload: str) -> bytes:
    """The request every user of ``workload`` sends (built once per process)."""
    return plugin_request(Path(os.environ["BARE_SCENARIO"]), workload)


class BareEmbedding(FastHttpUser):
    """POST /v1/embeddings in a loop."""

    wait_time = constant(0)
    max_retries = 0

    def on_start(self) -> None:
        """Build the request before the first is sent."""
        self.body = _body("embedding")

    @task
    def embed(self) -> None:
        """One request; Locust reads the reply and times it."""
        # geventhttpclient sends bytes as they are; Locust's annotation says str or dict only.
        self.client.post("/v1/embeddings", data=self.body, headers=HEADERS)  # type: ignore[arg-type]


class BareLLM(FastHttpUser):
    """POST /v1/chat/completions (streamed) in a loop, reading the SSE body to its end."""

    wait_time = constant(0)
    max_retries = 0

    def on_start(self) -> None:
        """Build the request before the first is sent."""
        self.body = _body("llm")

    @task
    def chat(self) -> None:
        """One streamed request; a stream without ``data: [DONE]`` is a failure."""
        with self.client.post("/v1/chat/completions", data=self.body, headers=HEADERS,  # type: ignore[arg-type]
                              stream=True, catch_response=True) as resp:
            tail = b""
            for chunk in resp.iter_content(chunk_size=4096, decode_content=False):
                tail = (tail + chunk)[-32:]
            if b"data: [DONE]" not in tail:
                resp.failure("stream ended without data: [DONE]")
