"""Comparability of two campaigns: the same experiment, or not.

Two campaigns can be put side by side only when what the scenario calls fixed is the same in both:
each class's model, server and request set (by hash), the stages, and the versions of the software
that serves and measures. What may differ is what a comparison is for: the arms, the date, the host,
the GPU or its driver, how many processes generated the load and how busy the host was with other
work. Those differences are listed with the comparison; fixed-condition differences refuse it, naming
each one as ``condition: A's value vs B's value``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from bench_plugin.results.facts import BackendFacts
from bench_plugin.results.summary import Provenance, Summary

VERSIONED = ("bench-plugin", "locust", "torch")
"""Packages whose version is part of the fixed conditions (the load generator and the servers)."""


@dataclass(frozen=True)
class Difference:
    """One condition that differs between campaign A and campaign B."""

    condition: str
    a: Any
    b: Any

    def __str__(self) -> str:
        return f"{self.condition}: {plain(self.a)} vs {plain(self.b)}"


def plain(value: Any) -> str:
    """A condition's value as a person reads it: text as is, "none", numbers short, the rest as compact JSON."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return f"{value:g}"
    return json.dumps(value, sort_keys=True, separators=(", ", ": "), default=str)


@dataclass(frozen=True)
class Campaign:
    """What a results directory says about its campaign: its summary and its resolved scenario."""

    name: str
    summary: Summary
    scenario: dict[str, Any]


def fixed_conditions(campaign: Campaign) -> dict[str, object]:
    """The conditions of a campaign that must match for a comparison, flattened to name -> value (JSON values,
    only compared and shown)."""
    out: dict[str, object] = {}
    summary = campaign.summary
    classes = campaign.scenario.get("classes") or {}
    for name, spec in classes.items():
        if not spec:
            continue
        out[f"classes.{name}.model"] = spec.get("model")
        out[f"classes.{name}.server"] = spec.get("server")
        out[f"classes.{name}.arrival"] = spec.get("arrival")
    for name, request_set in (summary.request_sets or {}).items():
        out[f"request_sets.{name}.sha256"] = request_set.sha256
    out["stages"] = [{k: v for k, v in stage.items() if k != "name"} for stage in campaign.scenario.get("stages", [])]
    packages = (summary.conditions.packages if summary.conditions else None) or {}
    for name in VERSIONED:
        out[f"packages.{name}"] = packages.get(name)
    return out


def context_conditions(campaign: Campaign) -> dict[str, object]:
    """Conditions that may legitimately differ (they are what a comparison looks at)."""
    conditions = campaign.summary.conditions or Provenance()
    backend = conditions.backend or BackendFacts()
    stages = [stage for trial in campaign.summary.trials for stage in trial.stages]
    others = [stage.host.others_cores for stage in stages if stage.host and stage.host.others_cores is not None]
    return {
        "host": conditions.host,
        "devices": [d.model for d in backend.devices or []],
        "driver": backend.driver,
        "arms": [a.get("name") for a in campaign.scenario.get("arms", [])],
        "load_generators": max((len(stage.generators) for stage in stages), default=None),
        "host.other_work_cores_max": round(max(others), 2) if others else None,
        "host.busy_stages": sum(1 for stage in stages if stage.host_busy),
    }


def differences(a: Campaign, b: Campaign, context: bool = False) -> list[Difference]:
    """Fixed-condition differences between campaigns ``a`` and ``b`` (or context ones with ``context``)."""
    pick = context_conditions if context else fixed_conditions
    ca, cb = pick(a), pick(b)
    keys = sorted(set(ca) | set(cb))
    return [Difference(key, ca.get(key), cb.get(key)) for key in keys if ca.get(key) != cb.get(key)]
