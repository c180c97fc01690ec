"""summary.json's operating envelope: each ray's boundary over repeats and the model fit on them."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, Field

from bench_plugin.results.limits import CommaLimits
from bench_plugin.results.spread import Model, Spread
from bench_plugin.results.summary.classes import PerClass


class RayRepeat(Model):
    """One trial's boundary along one ray of the envelope (composed over its segments; analysis/envelope.py)."""

    repeat: int
    status: str
    scale: float | None
    """The estimate: the bracket's midpoint (scale of the ray's mix)."""
    lo: float | None
    """The highest scale that passed (held, where a sustain confirmed it)."""
    hi: float | None
    sustain: str | None
    runs: int
    undecided: int = 0
    stopped: str | None = None


def _joined(value: Any) -> Any:
    """A ray's statuses as a file before ``summary/4`` held them: one string, joined with ", "."""
    return value.split(", ") if isinstance(value, str) else value


RayStatuses = Annotated[list[str], BeforeValidator(_joined)]
"""A ray's statuses over its repeats; an older file's joined string reads into the list."""


class EnvelopeRay(Model):
    """The arm's boundary along one ray (load mix) over its repeats: one point of its envelope's frontier."""

    name: str
    mix: PerClass
    """Class -> req/s at scale 1 (classes it leaves idle absent)."""
    held_out: bool = False
    """Searched to test the envelope model's prediction, and kept out of its fit."""
    status: RayStatuses
    """The search statuses of its repeats, each once, sorted: one where they agree (``found``). Files before
    ``summary/4`` joined them into one string (``found, generator-limited``), read into the same list."""
    scale: Spread
    """The boundary's scale over repeats (each repeat's estimate)."""
    lo: Spread
    """The highest passing scale over repeats: the load shown to keep every SLO."""
    boundary: PerClass
    """Class -> its load at the mean scale."""
    limit: CommaLimits = Field(default_factory=list)
    """What breaks first beyond it: the criterion (``embedding p95``) most repeats name, or the classes of the
    lowest boundary where no probe named one; empty where nothing broke."""
    per_repeat: list[RayRepeat] = Field(default_factory=list)

    @property
    def agreed(self) -> str | None:
        """The status every repeat ended with; None where they differ."""
        return self.status[0] if len(self.status) == 1 else None


class CriterionFit(Model):
    """One latency criterion in the envelope model: P95 = a + b / (1 - u), u = Σ_k w_k λ_k (analysis/envelope_model)."""

    workload: str
    slo_ms: float
    a: float
    """ms: what the class takes with its device idle."""
    b: float
    """ms: how much it suffers as the device's work for it nears saturation."""
    weights: PerClass
    """Class k -> w_k: the share of this criterion's device one request/s of k takes (its interference row)."""
    limit: float
    """U = 1 - b / (SLO - a): the u at which it reaches its SLO (0 when even idle it does not)."""
    measured: float
    """The highest u of any stage it was fit on: beyond it the model's answer is an extrapolation."""
    points: int
    fit_error: float | None
    """Root mean square relative error of its P95s on its points."""


class EnvelopeFit(Model):
    """The envelope model of one arm (analysis/envelope_model.py): its parameters, fit and validation."""

    form: str
    """The model in words, with its formula."""
    fitted_on: list[str]
    """The rays whose probes it was fit on (the held-out ones are not)."""
    devices: list[list[str]]
    """The classes that share a device in this arm (one list per device: each class alone where exclusive)."""
    criteria: dict[str, CriterionFit]
    """Criterion (``llm p95``, ``llm ttft p95``) -> its fit."""
    points: int
    """Probe measurements it was fit on."""
    fit_error: float | None
    """Root mean square relative error of its P95s on those points."""
    rays: dict[str, float | None]
    """Ray -> predicted boundary scale; the held-out ones were not fit."""
    held_out_error: dict[str, float | None] = Field(default_factory=dict)
    """Held-out ray -> (predicted - measured) / measured boundary scale."""
    validated: str
    """Where its predictions may be used: the cone of the fit rays and the loads measured, in words."""


class Envelope(Model):
    """An arm's operating envelope: its boundary along every ray searched, and its model where one was fit."""

    rays: list[EnvelopeRay]
    model: EnvelopeFit | None = None
