"""The "comparison" section of summary.json as typed records, and the words and numbers shown for them.

The section (each arm against the control: per-stage contention figures, the operating boundary and
the verdict) is produced by bench_plugin.analysis and may be absent: older summaries, or a campaign
without a control. Reports call :func:`read_comparison` and get ``None`` then, and say so. Parsing
is lenient on purpose: a missing figure becomes ``None`` and is shown as "-", never an exception,
so a report can always be written from whatever summary.json holds.

A *figure* is a spread over repeats, ``{"kind", "mean", "ci95", "lo", "hi", "n", "values", "note"}``;
a *significant figure* adds ``"no_change"``, ``"significant"`` and ``"call"`` ("higher", "lower",
"no significant difference"). Its ``kind`` says how it was summarised: a ``value`` or ``difference``
by its arithmetic mean and a 95% half-width ``ci95`` (shown ``1.60 ± 0.05``), a ``ratio`` by its
geometric mean and an asymmetric 95% interval [``lo``, ``hi``] with no half-width (shown
``1.71x [0.90, 3.20]``), a ``complement`` (1 - a ratio) by 1 - that mean and [``lo``, ``hi``].
Summaries written before figures had a kind have only ``mean`` and ``ci95``; they show as before.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bench_plugin.analysis.boundary import format_offered
from bench_plugin.analysis.statistics import fixed
from bench_plugin.analysis.verdict import INCONCLUSIVE, is_inconclusive

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


RATIO_UNIT = "x"
"""The unit shown after a ratio's mean: ``1.71x [0.90, 3.20]``."""


def interval(fig: Figure | None) -> tuple[float, float] | None:
    """A figure's 95% interval [lo, hi]: its own ends, else mean ± ci95; None without one."""
    if not fig or fig.get("mean") is None:
        return None
    lo, hi = fig.get("lo"), fig.get("hi")
    if isinstance(lo, int | float) and isinstance(hi, int | float):
        return float(lo), float(hi)
    ci = fig.get("ci95")
    if isinstance(ci, int | float):
        return float(fig["mean"]) - ci, float(fig["mean"]) + ci
    return None


def error_bars(fig: Figure | None) -> tuple[float, float]:
    """How far a figure's interval reaches below and above its mean (0, 0 without one): a ratio's differ."""
    ends = interval(fig)
    if fig is None or ends is None:
        return 0.0, 0.0
    mean = float(fig["mean"])
    return max(0.0, mean - ends[0]), max(0.0, ends[1] - mean)


def spread_text(fig: Figure | None, digits: int = 1, suffix: str = "") -> str:
    """``mean ± ci95`` for a value, ``1.71x [lo, hi]`` for a ratio; the mean alone with one repeat; ``-`` if missing.

    A ratio's interval is asymmetric (it is symmetric on the log scale), so it is given by its ends;
    ``suffix`` follows the mean there (``1.71x [0.90, 3.20]``) and the half-width elsewhere (``2.1 ± 0.3 ms``).
    """
    if not fig or fig.get("mean") is None:
        return "-"
    text = fixed(float(fig["mean"]), digits)
    if fig.get("ci95") is not None:
        return f"{text} ± {fixed(float(fig['ci95']), digits)}{suffix}"
    ends = interval(fig)
    if ends is not None:
        return f"{text}{suffix} [{fixed(ends[0], digits)}, {fixed(ends[1], digits)}]"
    return text + suffix


def ratio_text(fig: Figure | None, digits: int = 2) -> str:
    """A ratio with its unit and interval: ``1.71x [0.90, 3.20]``."""
    return spread_text(fig, digits, RATIO_UNIT)


def significance_text(fig: Figure | None, digits: int = 2, suffix: str = "") -> str:
    """A figure with its call against the control, e.g. ``0.82x [0.77, 0.88] (lower)``."""
    text = spread_text(fig, digits, suffix)
    if fig and fig.get("call"):
        text += f" ({fig['call']})"
    return text


def call_kind(call: str | None) -> str | None:
    """A verdict call without its count of repeats: ``inconclusive`` for ``inconclusive (1 repeat)``."""
    return INCONCLUSIVE if is_inconclusive(call) else call


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
