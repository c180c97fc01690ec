"""LLMUser: streamed chat or text completions; TTFT, TPOT and every inter-token gap per request.

How a stream is read, per the OpenAI API and what vLLM, SGLang, TGI, llama.cpp's server and ``transformers
serve`` send (docs/servers.md):
- a chunk carries output when a choice's ``delta.content`` (chat; or ``delta.reasoning_content`` /
  ``delta.reasoning``, a reasoning model's thinking) or ``text`` (completions) is non-empty. The first such
  chunk's arrival is the first token (TTFT), the last one's the last token; each gap between two of them
  is one inter-token latency. A chunk that carries several tokens is one gap, as vLLM's benchmark counts
  it (``vllm bench serve``: one ITL value per chunk); TPOT spreads them: (last - first) / (tokens - 1),
  as vLLM's and guidellm's do. Tokens per chunk (output tokens / chunks) says which one a server's ITL is;
- the stream is complete at ``data: [DONE]``, or where the body ends after a chunk with a
  ``finish_reason``; a body that ends before either is a protocol error (``Sample.stream_end``);
- output tokens are the server's ``usage.completion_tokens`` where it sends usage (``stream_options.
  include_usage`` asks for it), else the chunks that carried output (``Sample.tokens_from``).
"""

from __future__ import annotations

import time
from typing import Any

from bench_plugin.loadgen.state import ClassLoad
from bench_plugin.results.samples import Sample, pack_gaps
from bench_plugin.scenario.request_sets import RequestItem
from bench_plugin.users.base import Prepared, RequestFailed, WorkloadUser, json_request
from bench_plugin.users.sse import DONE, StreamError, event_blocks

PATHS = {"chat": "/v1/chat/completions", "completions": "/v1/completions"}


def fixed_output_fields(n_out: int) -> dict[str, Any]:
    """What asks a server for exactly ``n_out`` tokens: vLLM's and SGLang's sampling extensions (neither is
    OpenAI's; a server may reject them, ignore them, or honour them, which readiness finds out)."""
    return {"ignore_eos": True, "min_tokens": n_out}


def request_body(load: ClassLoad, item: RequestItem) -> dict[str, Any]:
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
        body.update(fixed_output_fields(n_out))
    if load.options.get("api", "chat") == "chat":
        body["messages"] = [{"role": "user", "content": item["prompt"]}]
    else:
        body["prompt"] = item["prompt"]
    return body


class LLMUser(WorkloadUser):
    """Drives the llm class against POST /v1/chat/completions (or /v1/completions), streamed."""

    workload = "llm"

    def prepare(self, load: ClassLoad, item: RequestItem) -> Prepared:
        api = load.options.get("api", "chat")
        body = request_body(load, item)
        sizes = {"input_tokens": int(item.get("input_tokens") or 0) or None}
        fixed = bool(load.options.get("fixed_output", True))
        return json_request(load.url.rstrip("/") + PATHS[api], PATHS[api], body, sizes, api=api,
                            output_tokens=body["max_tokens"] if fixed else None)

    def read(self, raw: Any, load: ClassLoad, prepared: Prepared, sample: Sample) -> None:
        usage = self._read_stream(raw, prepared.expect["api"], sample)
        sample.end_s = time.time()
        completion = usage.get("completion_tokens") if usage else None
        if isinstance(completion, int) and not isinstance(completion, bool):
            sample.output_tokens, sample.tokens_from = completion, "usage"
        else:
            sample.output_tokens, sample.tokens_from = sample.chunks, "chunks"
        if sample.first_token_s is None:
            raise RequestFailed("no content token in the stream", kind="protocol")
        wanted = prepared.expect["output_tokens"]
        if wanted is not None and sample.output_tokens != wanted:
            raise RequestFailed(f"generated {sample.output_tokens} tokens, expected exactly {wanted}",
                                kind="output_length")
        sample.ok = True

    @staticmethod
    def _read_stream(raw: Any, api: str, sample: Sample) -> dict[str, Any] | None:
        """Read the stream to its end, stamping the sample's chunk times; the last ``usage`` seen.

        The events of one receive are stamped with the time it arrived (they arrived together). This runs
        once per event of every stream: a choice carries output where its ``delta.content`` (chat; or
        ``delta.reasoning_content`` / ``delta.reasoning``, a reasoning model's thinking) or ``text``
        (completions) is non-empty.
        """
        chat = api == "chat"
        chunks = 0
        gaps: list[float] = []
        first: float | None = None
        last = 0.0
        usage: dict[str, Any] | None = None
        finished = done = False
        try:
            for events in event_blocks(raw):
                now = time.time()
                for event in events:
                    if event is DONE:  # the last event: event_blocks ends with it
                        done = True
                        continue
                    assert not isinstance(event, str)
                    if event.error is not None:
                        raise RequestFailed(f"error event in stream: {event.error}", kind="server_error")
                    for choice in event.choices or ():
                        if chat:
                            delta = choice.delta
                            text = delta and (delta.content or delta.reasoning_content or delta.reasoning)
                        else:
                            text = choice.text
                        if text:
                            chunks += 1
                            if first is None:
                                first = now
                            else:
                                gaps.append(now - last)
                            last = now
                        if choice.finish_reason:
                            finished = True
                    if event.usage is not None:
                        usage = event.usage
            if not (done or finished):
                raise RequestFailed("stream ended without a finish_reason or data: [DONE]", kind="protocol")
            sample.stream_end = "done" if done else "finish"
        except StreamError as exc:
            raise RequestFailed(str(exc), kind="protocol") from None
        finally:
            sample.chunks = chunks
            sample.chunk_gaps = pack_gaps(gaps)
            if first is not None:
                sample.first_token_s, sample.last_token_s = first, last
        return usage
