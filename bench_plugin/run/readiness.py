"""Readiness: an endpoint is ready when it has answered the class's own request, not when its process runs.

A Running process, an open port, even a 200 on /health do not mean a model is loaded and can serve, nor
that it accepts what the class will send. Each class is probed with the request it will send in the
stages (its user's ``prepare``: the same path, body fields, streaming and reader), built from its
smallest request-set item, and the reply is judged by the same rules as a sample. Until one succeeds:

- no connection, a timeout, a 5xx, or a status a server also gives while it loads (404, 408, 409, 425,
  429: samples.RETRYABLE_STATUSES) mean "not yet": it is probed again until ``readiness_timeout_s``.
  A 404 is final when the server's ``GET /v1/models`` lists other models (a wrong ``model``); a
  /v1/models that fails (``transformers serve`` answers 500 for a local model path) decides nothing;
- any other 4xx, or a reply the class cannot read, is final: the campaign stops before any load with one
  line naming the class, the status, the server's own message and what to change;
- ``fixed_output`` (llm): ``true`` sends vLLM's ``ignore_eos``/``min_tokens`` and requires exactly
  ``output_tokens`` tokens; ``false`` sends neither and lets the model stop; ``auto`` (the default) sends
  them, and when the server rejects them (a 4xx that their absence cures) or ignores them (a reply of
  another length), goes on without, labelling the results "output lengths set by the model";
- ``encoding_format`` (embedding): a server that answers another format than the one asked (SGLang answers
  floats to base64) is ready all the same; the note says so.

The time each class first answered goes on the timeline, and what it resolved (``Readiness.options``)
is what the stages send.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import requests

from bench_plugin.loadgen.state import ClassLoad
from bench_plugin.results.placement import Placement
from bench_plugin.results.samples import RETRYABLE_STATUSES, Sample
from bench_plugin.scenario.request_sets import RequestItem, RequestSet
from bench_plugin.users.llm import fixed_output_fields

Prober = Callable[[ClassLoad, dict[str, Any]], Sample]
"""Sends one request of a class for a request-set item, now, the way its user sends a stage's (not reported
to Locust's statistics), and returns its sample."""

EXACT = "exact"
MODEL = "model"
"""``Readiness.output_lengths`` of an llm class: the server honoured the fixed lengths, or the model set them."""

FIXED_FIELDS = ", ".join(fixed_output_fields(1))


class NotReady(Exception):
    """An endpoint that did not answer in time, refused the class's request, or whose server died; one line."""


@dataclass
class Readiness:
    """What readiness found: when each class first answered, and how its requests are to be sent."""

    ready: dict[str, float] = field(default_factory=dict)
    """Class -> epoch seconds it first answered its own request."""
    options: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Class -> its request options as resolved (ClassLoad.options; llm: fixed_output now true or false)."""
    output_lengths: dict[str, str] = field(default_factory=dict)
    """llm -> EXACT or MODEL."""
    notes: dict[str, str] = field(default_factory=dict)
    """Class -> what the probe found about the server's protocol, for the timeline and the reports."""


def probe_item(name: str, request_set: RequestSet) -> RequestItem:
    """The class's cheapest request-set item: fewest output then input tokens, fewest inputs, shortest clip."""
    def cost(item: RequestItem) -> tuple[float, ...]:
        if name == "llm":
            return (float(item.get("output_tokens") or 0), float(item.get("input_tokens") or 0))
        if name == "embedding":
            return (float(len(item.get("input") or ())), float(item.get("input_tokens") or 0))
        return (float(item.get("audio_seconds") or 0.0),)
    return min(request_set.items, key=cost)


def wrong_model(url: str, model: str) -> str | None:
    """Why a 404 to a probe is final: the server lists the models it serves (``GET /v1/models``, as vLLM and
    the reference servers answer) and ``model`` is not among them. None when it is, or nothing says."""
    try:
        reply = requests.get(url.rstrip("/") + "/v1/models", timeout=5)
        reply.raise_for_status()
        served = [str(item["id"]) for item in reply.json()["data"]]
    except (requests.RequestException, ValueError, KeyError, TypeError):
        return None
    if model in served:
        return None
    return f"serves {', '.join(served) or 'no model'}, not '{model}'"


def describe(sample: Sample) -> str:
    """A short, readable reason for a failed probe."""
    detail = sample.detail or sample.error or "failed"
    if sample.error == "connection":
        found = re.search(r"\[Errno -?\d+\] ([^'\")]+)", detail)
        return f"cannot connect ({found.group(1).strip() if found else detail[:120]})"
    if sample.error == "timeout":
        return "no answer in time"
    return detail[:200]


def waiting(sample: Sample) -> bool:
    """Whether a failed probe means "not yet" (see the module docstring) rather than "never like this"."""
    if sample.error in ("connection", "timeout", "server_error", "cancelled"):
        return True
    status = sample.status or 0
    return status >= 500 or status in RETRYABLE_STATUSES


class _Class:
    """One class's probing: what it sends next, and what it has found."""

    def __init__(self, name: str, url: str, load: ClassLoad, item: RequestItem, prober: Prober) -> None:
        self.name, self.url, self.item, self.prober = name, url, item, prober
        self.options = dict(load.options)
        self.load = load
        self.mode = self.options.get("fixed_output") if name == "llm" else None
        """llm: the scenario's fixed_output (True, False or "auto"), while the probe is deciding."""
        if name == "llm":
            self.options["fixed_output"] = self.mode is not False  # auto starts with the fields
        self.note: str | None = None
        self.last_error = "no answer"

    def send(self, timeout_s: float) -> Sample:
        load = ClassLoad(url=self.url, model=self.load.model, arrival=self.load.arrival, load=0.0,
                         timeout_s=min(self.load.timeout_s, timeout_s), max_in_flight=1, options=self.options)
        return self.prober(load, self.item)

    def judge(self, sample: Sample, timeout_s: float) -> bool:
        """True when ready; False to probe again; NotReady when this can never work."""
        if sample.ok:
            asked = self.options.get("encoding_format")
            if self.name == "embedding" and asked and sample.reply_format and sample.reply_format != asked:
                self.note = (f"the server answers encoding_format {asked} with {sample.reply_format} vectors: "
                             f"each sample records what came back")
            return True
        self.last_error = describe(sample)
        if waiting(sample):
            if sample.status == 404 and (why := wrong_model(self.url, self.load.model)):
                raise NotReady(f"{self.name} endpoint {self.url}: {why} (classes.{self.name}.model)")
            return False
        if self.name == "llm" and self.options.get("fixed_output"):
            return self._without_fixed_fields(sample, timeout_s)
        raise NotReady(self._refusal(sample))

    def _without_fixed_fields(self, sample: Sample, timeout_s: float) -> bool:
        """The server refused or ignored ignore_eos/min_tokens: try once without, then decide by the mode."""
        self.options["fixed_output"] = False
        plain = self.send(timeout_s)
        if not plain.ok:
            if waiting(plain):
                self.options["fixed_output"] = True  # not settled: the next round asks again with the fields
                self.last_error = describe(plain)
                return False
            raise NotReady(self._refusal(plain))  # it fails without them too: they are not the problem
        if sample.error == "output_length":
            found = f"the server ignores {FIXED_FIELDS} ({sample.detail})"
        else:
            found = f"the server rejects {FIXED_FIELDS} ({_status(sample)}: {_message(sample)})"
        if self.mode is True:
            raise NotReady(f"llm endpoint {self.url}: {found}: set `fixed_output: false` (output lengths set by "
                           "the model), or `fixed_output: auto` (classes.llm.fixed_output)")
        self.note = f"{found}: output lengths set by the model"
        return True

    def _refusal(self, sample: Sample) -> str:
        """The one line for a probe that can never succeed as sent."""
        where = f"{self.name} endpoint {self.url}"
        if sample.error == "protocol" or sample.error == "output_length":
            return (f"{where}: its reply cannot be read as the {self.name} class reads it ({_message(sample)}): "
                    "the server does not follow the OpenAI API as the class sends it (see docs/servers.md)")
        return (f"{where}: the server rejects the {self.name} request ({_status(sample)}: {_message(sample)}): "
                f"check classes.{self.name} (model, api, request options) against what the server accepts")


def _status(sample: Sample) -> str:
    return f"HTTP {sample.status}" if sample.status else (sample.error or "failed")


def _message(sample: Sample) -> str:
    """The server's own message: the error body's ``message``/``detail`` where it is JSON, else the text."""
    text = (sample.detail or "").removeprefix(f"HTTP {sample.status}: ").strip()
    found = re.search(r'"(?:message|detail|error)"\s*:\s*"((?:[^"\\]|\\.)*)"', text)
    return (found.group(1) if found else text)[:200] or "no message"


def wait_until_ready(
    placement: Placement,
    loads: Mapping[str, ClassLoad],
    request_sets: Mapping[str, RequestSet],
    probers: Mapping[str, Prober],
    timeout_s: float,
    died: Callable[[str], str | None] = lambda name: None,
    interval_s: float = 0.5,
) -> Readiness:
    """Probe every class with its own request until each has answered once (see the module docstring).

    ``loads``: class -> the ClassLoad its stages will send (its options as the scenario states them).
    ``died(name)`` returns a reason when the class's server has exited, which fails fast instead of
    waiting out the timeout.
    """
    deadline = time.time() + timeout_s
    found = Readiness()
    probing = {name: _Class(name, where.url, loads[name], probe_item(name, request_sets[name]), probers[name])
               for name, where in placement.classes.items()}
    while True:
        for name, one in probing.items():
            if name in found.ready:
                continue
            reason = died(name)
            if reason:
                raise NotReady(f"{name} endpoint {one.url}: server exited before it was ready: {reason}")
            left = max(1.0, deadline - time.time())
            if one.judge(one.send(left), left):
                found.ready[name] = time.time()
                found.options[name] = one.options
                if name == "llm":
                    found.output_lengths[name] = EXACT if one.options.get("fixed_output") else MODEL
                if one.note:
                    found.notes[name] = one.note
        if len(found.ready) == len(probing):
            return found
        if time.time() >= deadline:
            waiting_for = [n for n in probing if n not in found.ready]
            details = "; ".join(f"{n} at {probing[n].url}: {probing[n].last_error}" for n in waiting_for)
            raise NotReady(f"not ready after {timeout_s:g} s: {details}")
        time.sleep(interval_s)
