"""The "comparison" section of summary.json as typed records, and the words and numbers shown for them.

The section (each arm against the control: per-stage contention figures, the operating boundary and
the verdict) is produced by bench_plugin.analysis and may be absent: older summaries, or a campaign
without a control. Reports call :func:`read_comparison` and get ``None`` then, and say so. Parsing
is lenient on purpose: a missing figure becomes ``None`` and is shown as "-", never an exception,
so a report can always be written from whatever summary.json holds.

A *figure* is a spread over repeats, ``{"mean", "ci95", "n", "values"}``; a *significant figure*
adds ``"significant"`` and ``"call"`` ("higher", "lower", "no significant difference").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bench_plugin.analysis.boundary import format_offered

Figure = dict[str, Any]
"""A spread over repeats as it appears in summary.json."""


@dataclass(frozen=True)
class Boundary:
    """An arm's operating boundary: the highest stage where every class meets its SLOs and error budget."""

    status: str
    """``reached``, ``not reached`` (every stage passed) or ``below the lowest stage``."""
    text: str
    stage_position: Figure | None
    offered: dict[str, float]
    limiting: str | None


@dataclass(frozen=True)
class StageComparison:
    """One stage of one arm against the control."""

    index: int
    offered: dict[str, float]
    classes: dict[str, dict[str, Figure]]
    consolidation_gain: Figure | None
    fairness: Figure | None
    goodput_per_device: Figure | None
    goodput_per_device_ratio: Figure | None
    verdict: str | None
    reasons: list[str]


@dataclass(frozen=True)
class ArmComparison:
    """One arm's verdict, boundary and per-stage comparison."""

    name: str
    sharing: str | None
    is_control: bool
    call: str | None
    text: str | None
    worth_it_up_to_stage: int | None
    conditions: dict[str, Any]
    boundary: Boundary | None
    stages: list[StageComparison] = field(default_factory=list)


@dataclass(frozen=True)
class Comparison:
    """Every arm against the control arm."""

    control: str | None
    arms: dict[str, ArmComparison]


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _figure(value: Any) -> Figure | None:
    return value if isinstance(value, dict) and "mean" in value else None


def _boundary(raw: Any) -> Boundary | None:
    if not isinstance(raw, dict):
        return None
    offered = {str(k): float(v) for k, v in _dict(raw.get("offered")).items() if isinstance(v, int | float)}
    return Boundary(status=str(raw.get("status", "unknown")), text=str(raw.get("text") or ""),
                    stage_position=_figure(raw.get("stage_position")), offered=offered,
                    limiting=raw.get("limiting"))


def _stage(raw: dict[str, Any], position: int) -> StageComparison:
    classes = {name: {key: fig for key, value in _dict(figs).items() if (fig := _figure(value)) is not None}
               for name, figs in _dict(raw.get("classes")).items()}
    return StageComparison(
        index=int(raw.get("index", position)), offered=_dict(raw.get("offered")), classes=classes,
        consolidation_gain=_figure(raw.get("consolidation_gain")), fairness=_figure(raw.get("fairness")),
        goodput_per_device=_figure(raw.get("goodput_per_device")),
        goodput_per_device_ratio=_figure(raw.get("goodput_per_device_ratio")),
        verdict=raw.get("verdict"), reasons=[str(r) for r in raw.get("reasons") or []],
    )


def read_comparison(summary: dict[str, Any]) -> Comparison | None:
    """The summary's comparison section, or None when it has none."""
    raw = summary.get("comparison")
    if not isinstance(raw, dict):
        return None
    arms = {}
    for name, arm in _dict(raw.get("arms")).items():
        verdict = _dict(arm.get("verdict"))
        upto = verdict.get("worth_it_up_to_stage")
        arms[name] = ArmComparison(
            name=name, sharing=arm.get("sharing"), is_control=bool(arm.get("is_control")),
            call=verdict.get("call"), text=verdict.get("text"),
            worth_it_up_to_stage=upto if isinstance(upto, int) else None,
            conditions=_dict(verdict.get("conditions")), boundary=_boundary(arm.get("boundary")),
            stages=[_stage(s, i) for i, s in enumerate(arm.get("stages") or []) if isinstance(s, dict)],
        )
    return Comparison(control=raw.get("control") or summary.get("control"), arms=arms)


NO_COMPARISON = ("The comparison with the control (verdict, operating boundary, fairness) is not available: "
                 "summary.json has no \"comparison\" section.")
"""What a report says in place of the verdict when summary.json has no comparison."""


def spread_text(fig: Figure | None, digits: int = 1, suffix: str = "") -> str:
    """``mean ± ci95`` (just the mean with one repeat; ``-`` when missing)."""
    if not fig or fig.get("mean") is None:
        return "-"
    text = f"{fig['mean']:.{digits}f}"
    if fig.get("ci95") is not None:
        text += f" ± {fig['ci95']:.{digits}f}"
    return text + suffix


def significance_text(fig: Figure | None, digits: int = 2, suffix: str = "") -> str:
    """A figure with its call against the control, e.g. ``0.82 ± 0.05x (lower)``."""
    text = spread_text(fig, digits, suffix)
    if fig and fig.get("call"):
        text += f" ({fig['call']})"
    return text


offered_text = format_offered
"""``llm 2 req/s, embedding 4 req/s`` (``users`` for a closed-loop class): the analysis's own wording."""


def boundary_text(boundary: Boundary | None) -> str:
    """An arm's boundary in full: the analysis's sentence, or its status and offered load."""
    if boundary is None:
        return "-"
    return boundary.text or boundary_short(boundary)


def boundary_short(boundary: Boundary | None) -> str:
    """An arm's boundary in a table cell: where it is and what limits it."""
    if boundary is None:
        return "-"
    limit = f"; limited by {boundary.limiting}" if boundary.limiting else ""
    if boundary.status == "reached" and boundary.offered:
        about = ", ".join(f"{name} {load:.3g}" for name, load in boundary.offered.items())
        return f"reached at about {about}{limit}"
    if boundary.status == "not reached":
        return "not reached: above the highest load measured"
    if boundary.status == "below the lowest stage":
        return f"below the lowest stage measured{limit}"
    return boundary.status + limit
