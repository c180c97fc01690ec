"""Loading a scenario file: YAML or the seed's ConfigMap, validated, with one clear line per problem.

Two file forms load: the plain scenario mapping, and the seed's Kubernetes ConfigMap, whose
``data.change / fixed / metrics / repeats`` keys describe the experiment and whose ``data.scenario``
key holds the full scenario as a YAML string. Every problem is reported as ``file: key: message (got
value)``; the overrides of a quick run (one arm, fewer repeats, shorter stages) are applied here.

The YAML is read more strictly than ``yaml.safe_load`` reads it: a key given twice in one mapping is
an error naming the key and both lines (YAML forbids it; PyYAML keeps the last one silently, so
``repeats: 1`` ... ``repeats: 1000`` ran 1000 repeats), and a document nested deeper than Python's
stack allows is refused in one line instead of a RecursionError.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from bench_plugin.scenario.disruption import UNION_TAGS
from bench_plugin.scenario.models import Scenario, ScenarioError


class _Loader(yaml.SafeLoader):
    """yaml.SafeLoader refusing a key given twice in one mapping (see the module)."""


def _unique_keys(loader: _Loader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    first: dict[Any, yaml.Node] = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":  # '<<': merged keys may be overridden, as YAML says
            continue
        key = loader.construct_object(key_node, deep=True)
        try:
            earlier = first.setdefault(key, key_node)
        except TypeError:  # an unhashable key: construct_mapping refuses it in its own words
            continue
        if earlier is not key_node:
            raise yaml.constructor.ConstructorError(
                None, None, f"key {key!r} is given twice (first at line {earlier.start_mark.line + 1}): keep one",
                key_node.start_mark)
    return loader.construct_mapping(node, deep=deep)


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _unique_keys)


def _yaml(text: str) -> Any:
    """The document in ``text``, read with :class:`_Loader`; yaml.YAMLError, or RecursionError when too deep."""
    return yaml.load(text, Loader=_Loader)  # a SafeLoader: builds plain data only


def load_scenario(path: str | Path, **overrides: Any) -> Scenario:
    """Load, validate and return the scenario in ``path``; raises ScenarioError naming file, key and value.

    ``overrides`` (``arm``, ``repeats``, ``stage_duration``) narrow the experiment for quick runs; they
    are recorded with the results so a shortened run is never mistaken for the full one.
    """
    path = Path(path)
    data = _read_mapping(path)
    data = _unwrap_configmap(path, data)
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as exc:
        raise ScenarioError(_format_validation_error(path, exc)) from None
    return apply_overrides(scenario, path, **overrides)


def apply_overrides(
    scenario: Scenario,
    path: Path,
    arm: str | None = None,
    repeats: int | None = None,
    stage_duration: float | None = None,
) -> Scenario:
    """Return ``scenario`` narrowed to one arm, another repeat count, or shorter stages."""
    update: dict[str, Any] = {}
    if arm is not None:
        names = [a.name for a in scenario.arms]
        if arm not in names:
            raise ScenarioError(f"{path}: --arm {arm!r} is not an arm of this scenario (arms: {', '.join(names)})")
        chosen = scenario.arm(arm)
        update["arms"] = [chosen.model_copy(update={"control": True, "baseline": None})]
    if repeats is not None:
        if repeats < 1:
            raise ScenarioError(f"{path}: --repeats must be at least 1, got {repeats}")
        update["repeats"] = repeats
    if stage_duration is not None:
        if stage_duration <= 0:
            raise ScenarioError(f"{path}: --stage-duration must be positive, got {stage_duration}")
        update["stages"] = [s.model_copy(update={"duration_s": stage_duration}) for s in scenario.stages]
        if scenario.search is not None:
            update["search"] = scenario.search.model_copy(update={"stage_duration_s": stage_duration})
    return scenario.model_copy(update=update) if update else scenario


def scenario_sha256(scenario: Scenario) -> str:
    """A stable hash of the validated scenario (after overrides), for every result it produces."""
    canonical = json.dumps(scenario.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def _read_mapping(path: Path) -> dict[str, Any]:
    if not path.exists():
        raise ScenarioError(f"{path}: scenario file not found")
    if path.is_dir():
        raise ScenarioError(f"{path}: is a directory, not a scenario file")
    text = path.read_text(encoding="utf-8", errors="replace")
    if not text.strip():
        raise ScenarioError(f"{path}: scenario file is empty")
    try:
        data = _yaml(text)
    except RecursionError:
        raise ScenarioError(f"{path}: nested too deeply to be a scenario") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ScenarioError(f"{path}: not valid YAML{where}: {shown(problem)}") from None
    if not isinstance(data, dict):
        raise ScenarioError(f"{path}: expected a mapping at the top level, got {type(data).__name__}")
    return data


def _unwrap_configmap(path: Path, data: dict[str, Any]) -> dict[str, Any]:
    if data.get("kind") != "ConfigMap":
        return data
    cm = data.get("data")
    if not isinstance(cm, dict):
        raise ScenarioError(f"{path}: ConfigMap has no 'data' mapping")
    metadata = data.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise ScenarioError(f"{path}: ConfigMap metadata must be a mapping, got {type(metadata).__name__}")
    name = metadata.get("name")
    inner: dict[str, Any] = {}
    if "scenario" in cm:
        if not isinstance(cm["scenario"], str):
            raise ScenarioError(f"{path}: data.scenario must be a string holding the scenario's YAML, got "
                                f"{type(cm['scenario']).__name__}")
        try:
            inner = _yaml(cm["scenario"]) or {}
        except RecursionError:
            raise ScenarioError(f"{path}: data.scenario is nested too deeply to be a scenario") from None
        except yaml.YAMLError as exc:
            problem = shown(" ".join(str(exc).split()))
            raise ScenarioError(f"{path}: data.scenario is not valid YAML: {problem}") from None
        if not isinstance(inner, dict):
            raise ScenarioError(f"{path}: data.scenario must hold a mapping")
    unknown = sorted(set(cm) - {"scenario", "change", "fixed", "metrics", "repeats"})
    if unknown:
        raise ScenarioError(f"{path}: data.{shown(str(unknown[0]))}: unknown ConfigMap key (known: change, fixed, "
                            "metrics, repeats, scenario)")
    for key in ("change", "fixed", "metrics", "repeats"):
        if key not in cm:
            continue
        value: Any = cm[key]
        if key == "repeats":
            try:
                value = int(str(value))
            except ValueError:
                raise ScenarioError(f"{path}: data.repeats: not a whole number: {value!r}") from None
        if key in inner and inner[key] != value:
            raise ScenarioError(
                f"{path}: data.{key} is {value!r} but data.scenario.{key} is {inner[key]!r}; keep one"
            )
        inner[key] = value
    if "name" not in inner and isinstance(name, str) and name:
        inner["name"] = name
    return inner


def _format_validation_error(path: Path, exc: ValidationError) -> str:
    lines = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"] if not str(p).startswith("function-after") and p not in UNION_TAGS)
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            problem = f"{loc}: unknown key"
        elif err["type"] == "missing":
            problem = f"{loc}: required key is missing"
        elif "input" in err and not isinstance(err["input"], dict | list):
            problem = f"{loc or '(top level)'}: {msg} (got {err['input']!r})"
        else:
            problem = f"{loc or '(top level)'}: {msg}"
        lines.append(f"{path}: {shown(problem)}")
    return "\n".join(lines)


def shown(text: str) -> str:
    """``text`` with every character that is not printable (a line break, a control character) escaped, so that
    one problem stays one line whatever keys and values the file holds."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)
