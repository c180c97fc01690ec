"""Readiness: an endpoint is ready when it has answered a real request, not when its process runs.

A Running process, an open port, even a 200 on /health do not mean a model is loaded and can serve.
Each class is probed with a small request of its own kind (a 2-token completion, one embedding, the
shortest clip of the request set) until one succeeds; the time it first answered goes on the timeline.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

import requests

from bench_plugin.inputs import RequestSet
from bench_plugin.scenario import LLMClass, Scenario
from bench_plugin.sharing.base import Placement
from bench_plugin.users.asr import PATH as ASR_PATH
from bench_plugin.users.asr import multipart_body
from bench_plugin.users.embedding import PATH as EMBEDDING_PATH
from bench_plugin.users.llm import PATHS as LLM_PATHS


class NotReady(Exception):
    """An endpoint that did not answer in time, or whose server died; the message says which and why."""


def probe(scenario: Scenario, name: str, url: str, request_set: RequestSet, timeout_s: float = 30.0) -> None:
    """Send one real request of class ``name`` to ``url``; raise on anything but a well-formed reply."""
    spec = scenario.classes.get(name)
    base = url.rstrip("/")
    if name == "llm":
        assert isinstance(spec, LLMClass)
        body: dict[str, Any] = {"model": spec.model, "max_tokens": 2, "stream": False}
        if spec.api == "chat":
            body["messages"] = [{"role": "user", "content": "ready"}]
        else:
            body["prompt"] = "ready"
        reply = requests.post(base + LLM_PATHS[spec.api], json=body, timeout=timeout_s)
        reply.raise_for_status()
        if not reply.json().get("choices"):
            raise ValueError("completion reply has no choices")
    elif name == "embedding":
        reply = requests.post(base + EMBEDDING_PATH, json={"model": spec.model, "input": ["ready"]}, timeout=timeout_s)
        reply.raise_for_status()
        if len(reply.json().get("data") or []) != 1:
            raise ValueError("embedding reply does not hold one vector")
    else:
        shortest = min(request_set.items, key=lambda item: item["audio_seconds"])
        audio = request_set.audio[shortest["file"]]
        data, content_type = multipart_body({"model": spec.model}, shortest["file"], audio)
        reply = requests.post(base + ASR_PATH, data=data, headers={"Content-Type": content_type}, timeout=timeout_s)
        reply.raise_for_status()
        if not isinstance(reply.json().get("text"), str):
            raise ValueError("transcription reply has no text")


def wrong_model(exc: Exception, url: str, model: str) -> str | None:
    """Why a 404 to a probe is final: the server lists the models it serves (``GET /v1/models``, as vLLM and
    the reference servers answer) and ``model`` is not among them. None when it is, or nothing says."""
    if not (isinstance(exc, requests.HTTPError) and exc.response is not None and exc.response.status_code == 404):
        return None
    try:
        reply = requests.get(url.rstrip("/") + "/v1/models", timeout=5)
        reply.raise_for_status()
        served = [str(item["id"]) for item in reply.json()["data"]]
    except (requests.RequestException, ValueError, KeyError, TypeError):
        return None
    if model in served:
        return None
    return f"serves {', '.join(served) or 'no model'}, not '{model}'"


def describe_error(exc: Exception) -> str:
    """A short, readable reason for a failed probe (requests' own messages nest several layers deep)."""
    if isinstance(exc, requests.ConnectionError):
        found = re.search(r"\[Errno -?\d+\] ([^'\")]+)", str(exc))
        return f"cannot connect ({found.group(1).strip() if found else 'connection failed'})"
    if isinstance(exc, requests.Timeout):
        return "no answer in time"
    if isinstance(exc, requests.HTTPError) and exc.response is not None:
        return f"HTTP {exc.response.status_code}: {exc.response.text[:120]}"
    return f"{type(exc).__name__}: {str(exc)[:160]}"


def wait_until_ready(
    scenario: Scenario,
    placement: Placement,
    request_sets: dict[str, RequestSet],
    timeout_s: float,
    died: Callable[[str], str | None] = lambda name: None,
    interval_s: float = 0.5,
) -> dict[str, float]:
    """Probe every class until each has answered once; returns class -> epoch seconds it first answered.

    ``died(name)`` returns a reason when the class's server has exited, which fails fast instead of
    waiting out the timeout.
    """
    deadline = time.time() + timeout_s
    ready: dict[str, float] = {}
    last_error: dict[str, str] = {}
    while True:
        for name, where in placement.classes.items():
            if name in ready:
                continue
            reason = died(name)
            if reason:
                raise NotReady(f"{name} endpoint {where.url}: server exited before it was ready: {reason}")
            try:
                probe(scenario, name, where.url, request_sets[name], timeout_s=max(1.0, deadline - time.time()))
                ready[name] = time.time()
            except (requests.RequestException, ValueError, KeyError) as exc:
                last_error[name] = describe_error(exc)
                refusal = wrong_model(exc, where.url, scenario.classes.get(name).model)
                if refusal:
                    raise NotReady(f"{name} endpoint {where.url}: {refusal} (classes.{name}.model)") from None
        if len(ready) == len(placement.classes):
            return ready
        if time.time() >= deadline:
            waiting = [n for n in placement.classes if n not in ready]
            details = "; ".join(f"{n} at {placement.classes[n].url}: {last_error.get(n, 'no answer')}" for n in waiting)
            raise NotReady(f"not ready after {timeout_s:g} s: {details}")
        time.sleep(interval_s)
