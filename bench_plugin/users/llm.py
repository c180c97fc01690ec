"""LLMUser: streamed chat or text completions with fixed output lengths; TTFT and TPOT per request."""

from __future__ import annotations

import time
from typing import Any

from bench_plugin.samples import Sample
from bench_plugin.users.base import Prepared, RequestFailed, WorkloadUser, json_request
from bench_plugin.users.sse import DONE, StreamError, iter_events
from bench_plugin.users.state import ClassLoad

PATHS = {"chat": "/v1/chat/completions", "completions": "/v1/completions"}


def request_body(load: ClassLoad, item: dict[str, Any]) -> dict[str, Any]:
    """The JSON body for one prompt, per the OpenAI API (plus vLLM's ignore_eos/min_tokens when fixed)."""
    n_out = int(item["output_tokens"])
    body: dict[str, Any] = {
        "model": load.model,
        "max_tokens": n_out,
        "stream": True,
        "stream_options": {"include_usage": True},
        "temperature": 0.0,
    }
    if load.options.get("fixed_output", True):
        body["ignore_eos"] = True
        body["min_tokens"] = n_out
    if load.options.get("api", "chat") == "chat":
        body["messages"] = [{"role": "user", "content": item["prompt"]}]
    else:
        body["prompt"] = item["prompt"]
    return body


class LLMUser(WorkloadUser):
    """Drives the llm class against POST /v1/chat/completions (or /v1/completions), streamed."""

    workload = "llm"

    def prepare(self, load: ClassLoad, item: dict[str, Any]) -> Prepared:
        api = load.options.get("api", "chat")
        body = request_body(load, item)
        sizes = {"input_tokens": int(item.get("input_tokens") or 0) or None}
        fixed = bool(load.options.get("fixed_output", True))
        return json_request(load.url.rstrip("/") + PATHS[api], PATHS[api], body, sizes, api=api,
                            output_tokens=body["max_tokens"] if fixed else None)

    def read(self, raw: Any, load: ClassLoad, prepared: Prepared, sample: Sample) -> None:
        chunks, usage = self._read_stream(raw, prepared.expect["api"], sample)
        sample.end_s = time.time()
        sample.output_tokens = int(usage["completion_tokens"]) if usage else chunks
        if sample.first_token_s is None:
            raise RequestFailed("no content token in the stream", kind="protocol")
        wanted = prepared.expect["output_tokens"]
        if wanted is not None and sample.output_tokens != wanted:
            raise RequestFailed(f"generated {sample.output_tokens} tokens, expected exactly {wanted}",
                                kind="output_length")
        sample.ok = True

    def reported(self, sample: Sample) -> None:
        self.report_extra("TTFT", sample.ttft_ms or 0.0)
        if sample.tpot_ms is not None:
            self.report_extra("TPOT", sample.tpot_ms)

    @staticmethod
    def _read_stream(raw: Any, api: str, sample: Sample) -> tuple[int, dict[str, Any] | None]:
        chunks = 0
        usage: dict[str, Any] | None = None
        try:
            for event in iter_events(raw):
                if event == DONE:
                    return chunks, usage
                assert isinstance(event, dict)
                if "error" in event:
                    raise RequestFailed(f"error event in stream: {event['error']}", kind="server_error")
                for choice in event.get("choices") or []:
                    text = (choice.get("delta") or {}).get("content") if api == "chat" else choice.get("text")
                    if text:
                        chunks += 1
                        if sample.first_token_s is None:
                            sample.first_token_s = time.time()
                if event.get("usage"):
                    usage = event["usage"]
        except StreamError as exc:
            raise RequestFailed(str(exc), kind="protocol") from None
        raise RequestFailed("stream ended without data: [DONE]", kind="protocol")
