"""The workloads of benchmarks/loadgen_capacity.py: realistic requests of each class, and their scenarios.

Each workload is one class of the plugin with the requests and replies that decide a load generator's
cost on a real server (the null server answers them in the real size and shape):

- ``embedding-base64``: 16 inputs of 64 or 256 words per request, ``encoding_format: base64`` (what
  OpenAI's SDK asks by default): 16 x 1,024 float32 come back as base64, about 88 KB;
- ``embedding-float``: the same requests asking ``encoding_format: float``: JSON floats, about 348 KB;
- ``llm``: chat prompts of 128 or 512 words, streamed, exactly 64 output tokens, one chunk each, 2 ms
  apart (about 130 ms a request);
- ``asr``: the packaged speech clips (100-420 KB of WAV each) as multipart uploads.

:func:`scenario` writes a one-class campaign of the manual backend at given stages; :func:`plugin_requests`
builds every request of a workload with the plugin's own user code, which is what bare Locust
(loadgen_bare.py) sends too.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import yaml
from loadgen_nullserver import MODEL
from loadgen_stages import SETTLE, WARM

from bench_plugin import ASRUser, EmbeddingUser, LLMUser
from bench_plugin.loadgen.state import ClassLoad
from bench_plugin.scenario import load_scenario
from bench_plugin.scenario.request_sets import build_request_sets
from bench_plugin.users.base import Prepared

SEED = 7
ARM = "null-server"
"""The arm every campaign of the benchmark names (manual backend: nothing is switched)."""
EMBEDDING_REQUESTS = {"count": 64, "batch_size": 16, "input_tokens": [64, 256], "seed": 1}
LLM_REQUESTS = {"count": 64, "input_tokens": [128, 512], "output_tokens": 64, "seed": 1}


@dataclass(frozen=True)
class Workload:
    """One class of the plugin with its request set and reply format, as the benchmark runs it."""

    name: str
    workload: str
    """The plugin's class: embedding, llm or asr."""
    rate: float
    """Default rate R (req/s) of the CPU-per-request rounds: one process keeps up with it comfortably."""
    bare: str
    """The bare-Locust user class of loadgen_bare.py that sends it."""
    latency_s: float
    """About how long one request takes against the null server (sizes bare Locust's user count)."""
    spec: dict[str, Any] = field(default_factory=dict)
    """The class's scenario entry, less its model."""

    def bare_users(self, rate: float) -> int:
        """Bare Locust's users for ``rate``: each paced at a period of at least 4 requests' time."""
        return max(8, math.ceil(rate * self.latency_s * 4))


WORKLOADS: dict[str, Workload] = {w.name: w for w in (
    Workload("embedding-base64", "embedding", 300.0, "BareEmbedding", 0.005,
             {"encoding_format": "base64", "requests": EMBEDDING_REQUESTS, "slo": {"p95_ms": 40}}),
    Workload("embedding-float", "embedding", 150.0, "BareEmbedding", 0.005,  # one process sustains about 250
             {"encoding_format": "float", "requests": EMBEDDING_REQUESTS, "slo": {"p95_ms": 40}}),
    Workload("llm", "llm", 150.0, "BareLLM", 0.15,
             {"api": "chat", "fixed_output": True, "requests": LLM_REQUESTS, "slo": {"p95_ms": 400}}),
    Workload("asr", "asr", 150.0, "BareASR", 0.01, {"slo": {"p95_ms": 40}}),
)}


SETTLE_S, WARM_S = 1.0, 2.0
"""The idle and the warm-up stage that start every campaign (loadgen_stages.SETTLE, WARM)."""


def scenario(w: Workload, stages: Sequence[tuple[float, float, str | None]]) -> dict[str, Any]:
    """A one-class, one-arm campaign of the manual backend; ``stages``: (rate, seconds, name) each, after an idle
    stage of SETTLE_S and a warm-up stage of WARM_S at the lowest rate or R, whichever is lower
    (loadgen_stages.SETTLE, WARM: not judged).

    The P95 SLO is loose for a null server (a few ms), and a stage is rolled back at 5x it: only a stage
    far behind is cut, and the higher ones are then skipped, which ends a sweep soon after its limit.
    No ``warmup:`` requests: the null server has nothing to warm, and the master sends them, which warms
    no worker; the warm stage does that. Its rate is one the sender surely holds: a warm stage rolled back
    would skip every stage after it.
    """
    spec = {"model": MODEL, **w.spec, "request_timeout_s": 10, "max_in_flight": 4096}
    warm = min([w.rate, *(rate for rate, _, _ in stages if rate > 0)])
    return {
        "name": f"loadgen-{w.name}", "description": "load-generator capacity against the null server",
        "repeats": 1, "seed": SEED, "backend": "manual", "readiness_timeout_s": 20, "drain_timeout_s": 10,
        "classes": {w.workload: spec}, "arms": [{"name": ARM, "control": True}],
        "rollback": {"max_p95_multiple": 5}, "warmup": {"requests": "none"},
        "stages": [{"duration_s": seconds, "load": {w.workload: round(rate, 1)}, **({"name": name} if name else {})}
                   for rate, seconds, name in [(0.0, SETTLE_S, SETTLE), (warm, WARM_S, WARM), *stages]],
    }


def write_scenario(path: Path, data: dict[str, Any]) -> Path:
    """Write ``data`` as YAML, checked by the plugin's own loader."""
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    load_scenario(path)
    return path


USERS = {"embedding": EmbeddingUser, "llm": LLMUser, "asr": ASRUser}


def class_options(spec: Any) -> dict[str, Any]:
    """The request options of a class as a campaign against the null server resolves them
    (bench_plugin/run/conductor.py, ``_class_load``; readiness finds that the null server honours fixed output)."""
    if hasattr(spec, "api"):
        return {"api": spec.api, "fixed_output": True}
    if hasattr(spec, "response_format"):
        return {"response_format": spec.response_format}
    if hasattr(spec, "encoding_format"):
        return {"encoding_format": spec.encoding_format}
    return {}


def plugin_requests(path: Path, workload: str) -> list[Prepared]:
    """Every request of ``workload``'s set in the scenario at ``path``, as the plugin's user builds it
    (its ``prepare``, on a stand-in that holds only the request sets: the one thing prepare reads of a user)."""
    spec = load_scenario(path)
    sets = build_request_sets(spec, path.parent)
    klass = spec.classes.get(workload)
    load = ClassLoad(url="", model=klass.model, arrival="poisson", load=1.0, timeout_s=10.0, max_in_flight=1,
                     options=class_options(klass))
    holder = SimpleNamespace(state=SimpleNamespace(request_sets=sets))
    return [USERS[workload].prepare(holder, load, item) for item in sets[workload].items]  # type: ignore[arg-type]


def request_summary(w: Workload, path: Path) -> dict[str, Any]:
    """What the plugin's requests of ``w`` are (the mean body size; what an embedding asks for), checked against
    the workload: RuntimeError where the plugin does not send what the class says."""
    requests = plugin_requests(path, w.workload)
    out: dict[str, Any] = {"items": len(requests),
                           "mean_body_bytes": round(sum(len(r.body) for r in requests) / len(requests))}
    if w.workload == "embedding":
        asked = {json.loads(r.body).get("encoding_format") for r in requests}
        out["encoding_format"] = sorted(str(a) for a in asked)
        if asked != {w.spec["encoding_format"]}:
            raise RuntimeError(f"{w.name}: the plugin's embedding requests ask encoding_format "
                               f"{sorted(map(str, asked))}, the class says {w.spec['encoding_format']!r}")
    return out
