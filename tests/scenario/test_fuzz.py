"""The scenario loader, fuzzed: whatever a file holds, the answer is a Scenario or one ScenarioError naming the file.

Hypothesis writes files of four kinds and hands each to ``load_scenario``, as ``locust --scenario`` and
``bench-plugin validate`` do: any text; YAML documents built from the scenario's own keys with hostile values
(NaN, infinities, huge numbers, wrong types, deep nesting); the shipped scenarios with one value replaced or
one key dropped; and each of those wrapped in a ConfigMap, as ``kubectl`` would hold it. No other exception may
escape (a traceback, for the user), and every line of the error must name the file. The runs are derandomized,
so a failure here is the same failure on every machine.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench_plugin.scenario import Scenario, ScenarioError, load_scenario

pytestmark = pytest.mark.cpu_bound

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = {path.name: yaml.safe_load(path.read_text()) for path in sorted((ROOT / "scenarios").glob("*.yaml"))}
KEYS = sorted({"name", "classes", "arms", "stages", "search", "llm", "embedding", "asr", "model", "server", "slo",
               "p95_ms", "ttft_p95_ms", "tpot_p95_ms", "requests", "count", "input_tokens", "output_tokens", "seed",
               "duration_s", "load", "sharing", "control", "repeats", "mix", "start_scale", "max_scale", "precision",
               "warmup", "timeout_s", "rollback", "kind", "command", "url", "arrival", "max_in_flight",
               "error_budget", "request_timeout_s", "memory_fraction", "mps", "mig", "backend", "kubernetes",
               "disruption", "data", "scenario", "metadata", "baseline", "affinity", "priority"})

FUZZ = settings(max_examples=500, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([math.nan, math.inf, -math.inf, 1e308, -0.0]),
    st.text(max_size=20), st.sampled_from(["", "0", "1e9", ".inf", "llm", "exclusive", "time-slicing", "mps"]),
)
documents = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(st.one_of(st.sampled_from(KEYS), st.text(max_size=8)), inner, max_size=5)),
    max_leaves=30,
)


def paths(data: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value inside ``data`` (mapping keys and list indices)."""
    out = [prefix] if prefix else []
    if isinstance(data, dict):
        for key, value in data.items():
            out += paths(value, (*prefix, key))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            out += paths(value, (*prefix, index))
    return out


def mutated(data: Any, path: tuple[Any, ...], value: Any, drop: bool) -> Any:
    """A copy of ``data`` with the value at ``path`` replaced by ``value`` (or removed, where ``drop``)."""
    if not path:
        return value
    copy: Any = dict(data) if isinstance(data, dict) else list(data)
    head, rest = path[0], path[1:]
    if not rest and drop:
        del copy[head]
    else:
        copy[head] = mutated(data[head], rest, value, drop)
    return copy


@st.composite
def shipped_mutations(draw: st.DrawFn) -> Any:
    base = SHIPPED[draw(st.sampled_from(sorted(SHIPPED)))]
    path = draw(st.sampled_from(paths(base)))
    return mutated(base, path, draw(documents), draw(st.booleans()))


def configmap(scenario: Any, extra: dict[str, Any]) -> dict[str, Any]:
    text = scenario if isinstance(scenario, str) else yaml.safe_dump(scenario)
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "fuzzed"},
            "data": {"scenario": text, **extra}}


def check(tmp_path: Path, text: str) -> None:
    """``text`` as a scenario file: loads, or fails in ScenarioError lines that each name the file."""
    path = tmp_path / "fuzzed.yaml"
    path.write_text(text, encoding="utf-8", errors="surrogateescape")
    try:
        assert isinstance(load_scenario(path), Scenario)
    except ScenarioError as exc:
        lines = str(exc).splitlines()
        assert lines and all(line.startswith(str(path)) for line in lines), str(exc)


def dump(data: Any) -> str:
    return yaml.safe_dump(data, allow_unicode=True)


@FUZZ
@given(text=st.text(max_size=400))
def test_any_text(tmp_path: Path, text: str) -> None:
    check(tmp_path, text)


@FUZZ
@given(document=documents)
def test_documents_of_the_scenarios_keys_and_hostile_values(tmp_path: Path, document: Any) -> None:
    check(tmp_path, dump(document))


@FUZZ
@given(document=shipped_mutations())
def test_shipped_scenarios_with_one_value_changed(tmp_path: Path, document: Any) -> None:
    check(tmp_path, dump(document))


@FUZZ
@given(scenario=st.one_of(shipped_mutations(), documents, st.text(max_size=200)),
       extra=st.dictionaries(st.sampled_from(["change", "fixed", "metrics", "repeats", "other"]), scalars, max_size=3))
def test_configmaps(tmp_path: Path, scenario: Any, extra: dict[str, Any]) -> None:
    check(tmp_path, dump(configmap(scenario, extra)))
