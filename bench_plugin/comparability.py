"""Comparability of two campaigns: the same experiment, or not.

Two campaigns can be put side by side only when what the scenario calls fixed is the same in both:
each class's model, server and request set (by hash), the stages, and the versions of the software
that serves and measures. What may differ is what a comparison is for: the arms, the date, the host,
the GPU or its driver. Those differences are listed with the comparison; fixed-condition differences
refuse it, naming each one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bench_plugin.results.summary import Summary

VERSIONED = ("bench-plugin", "locust", "torch")
"""Packages whose version is part of the fixed conditions (the load generator and the servers)."""


@dataclass(frozen=True)
class Difference:
    """One condition that differs between campaign A and campaign B."""

    condition: str
    a: Any
    b: Any

    def __str__(self) -> str:
        return f"{self.condition}: {self.a!r} vs {self.b!r}"


@dataclass(frozen=True)
class Campaign:
    """What a results directory says about its campaign: its summary and its resolved scenario."""

    name: str
    summary: Summary
    scenario: dict[str, Any]


def fixed_conditions(campaign: Campaign) -> dict[str, Any]:
    """The conditions of a campaign that must match for a comparison, flattened to name -> value."""
    out: dict[str, Any] = {}
    summary = campaign.summary
    classes = campaign.scenario.get("classes") or {}
    for name, spec in classes.items():
        if not spec:
            continue
        out[f"classes.{name}.model"] = spec.get("model")
        out[f"classes.{name}.server"] = spec.get("server")
        out[f"classes.{name}.arrival"] = spec.get("arrival")
    for name, request_set in (summary.request_sets or {}).items():
        out[f"request_sets.{name}.sha256"] = request_set.get("sha256")
    out["stages"] = [{k: v for k, v in stage.items() if k != "name"} for stage in campaign.scenario.get("stages", [])]
    packages = (summary.conditions or {}).get("packages") or {}
    for name in VERSIONED:
        out[f"packages.{name}"] = packages.get(name)
    return out


def context_conditions(campaign: Campaign) -> dict[str, Any]:
    """Conditions that may legitimately differ (they are what a comparison looks at)."""
    conditions = campaign.summary.conditions or {}
    backend = conditions.get("backend") or {}
    return {
        "host": conditions.get("host"),
        "devices": [d.get("model") for d in backend.get("devices", [])],
        "driver": backend.get("driver"),
        "arms": [a.get("name") for a in campaign.scenario.get("arms", [])],
    }


def differences(a: Campaign, b: Campaign, context: bool = False) -> list[Difference]:
    """Fixed-condition differences between campaigns ``a`` and ``b`` (or context ones with ``context``)."""
    pick = context_conditions if context else fixed_conditions
    ca, cb = pick(a), pick(b)
    keys = sorted(set(ca) | set(cb))
    return [Difference(key, ca.get(key), cb.get(key)) for key in keys if ca.get(key) != cb.get(key)]
