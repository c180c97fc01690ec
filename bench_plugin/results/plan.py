"""plan.json: the capacity plans `bench-plugin plan` made from a campaign's envelopes, their one reader and writer.

The document carries the arguments it was made with (traffic, headroom, GPU cost) beside every plan, so a
plan can be read without the command line that made it. A file of another schema version is refused with
one line rather than read as something it is not.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator

from bench_plugin.results.limits import AndLimits
from bench_plugin.results.summary import Model, PerClass, SummaryError, first_problem

SCHEMA: Literal["bench_plugin.plan/2"] = "bench_plugin.plan/2"
"""The schema this code writes: ``plan/1`` held ``first_limit`` as one string (" and " between the criteria),
/2 as a list of results/limits.Limit items. A /1 file reads into the same items, and renders as it did."""
READS = ("bench_plugin.plan/1", SCHEMA)
FILENAME = "plan.json"


class GroupPlan(Model):
    """GPUs that carry the same classes, the same share of each on every one of them."""

    classes: list[str]
    gpus: int
    load: PerClass
    """Class -> the req/s the group carries, over its GPUs."""
    used: float
    """On each GPU, the largest u_j / U_j over the criteria of its classes: how much of the load at which the
    first of them reaches its SLO it carries (at most 1 / (1 + headroom))."""
    limited_by: str
    """That criterion (``embedding p95``)."""
    floor: float | None = None
    """req/s: for a class alone whose search held even the search's maximum (its boundary above it, unknown), that
    load: the GPUs are counted as if it were the most one GPU holds (at most as many as it needs), and ``used`` is
    of it."""


class ArmPlan(Model):
    """How one arm holds the traffic: its GPUs, how the classes are packed on them, and what it costs and saves."""

    arm: str
    sharing: str | None
    gpus: int | None
    """None: no plan (``note`` says why)."""
    groups: list[GroupPlan] = Field(default_factory=list)
    cost: float | None = None
    saved_gpus: int | None = None
    """GPUs fewer than the control's plan (each class on GPUs of its own); negative: more."""
    saved_cost: float | None = None
    growth: float | None = None
    """The factor by which every class's traffic can grow before this plan needs another GPU (1.3: +30%)."""
    first_limit: AndLimits = Field(default_factory=list)
    """The criteria that break first when the traffic grows past ``growth`` (a class held alone: the class, at its
    highest load tried); empty without a growth."""
    extrapolation: list[str] = Field(default_factory=list)
    """Why the plan rests on the model outside where it was validated; empty when it does not."""
    note: str | None = None


class TrafficPlan(Model):
    """Every arm's plan for one traffic."""

    traffic: PerClass
    """Class -> req/s to hold."""
    arms: list[ArmPlan]
    best: str | None
    """The arm with the fewest GPUs (of equals: the most growth), among plans that are not extrapolations."""


class PlanDocument(Model):
    """plan.json."""

    schema_: Literal["bench_plugin.plan/1", "bench_plugin.plan/2"] = Field(default=SCHEMA, alias="schema")
    campaign: str
    headroom: float
    """Each GPU is loaded to at most its boundary / (1 + headroom)."""
    gpu_cost: float | None
    """Cost of one GPU (per hour, or any unit), or None."""
    method: str
    plans: list[TrafficPlan]

    @field_validator("schema_", mode="after")
    @classmethod
    def _now(cls, schema: str) -> Literal["bench_plugin.plan/2"]:
        """A /1 file's ``first_limit`` was read into /2's form: it is now a /2 document."""
        return SCHEMA


def write_plan(path: Path, document: PlanDocument) -> None:
    """Write plan.json (every field, by its name in the file)."""
    path.write_text(json.dumps(document.model_dump(mode="json", by_alias=True), indent=2) + "\n", encoding="utf-8")


def read_plan(path: Path) -> PlanDocument:
    """Read a plan.json; SummaryError (one line) when it is unreadable or of another schema version."""
    try:
        data: Any = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise SummaryError(f"{path}: cannot read it: {exc}") from None
    if not isinstance(data, dict) or data.get("schema") not in READS:
        schema = data.get("schema") if isinstance(data, dict) else None
        raise SummaryError(f"{path}: schema {schema!r} is not one this bench-plugin reads "
                           f"({', '.join(map(repr, READS))})")
    try:
        return PlanDocument.model_validate(data)
    except ValidationError as exc:
        raise SummaryError(f"{path}: {first_problem(exc)}") from None
