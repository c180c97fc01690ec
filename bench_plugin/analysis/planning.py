"""Warnings about a valid scenario: stages too short for a class's P95 to be bounded.

A scenario can validate and still measure little. A stage that gathers fewer samples of a class than
``samples_needed(0.95)`` (72 at 95% confidence) reports a P95 that no equal-tailed 95% order-statistic
interval bounds above (bench_plugin.analysis.intervals). The expected samples of an open-loop (Poisson)
class are its rate times the stage duration, every request counted as if it succeeded; idle classes
(rate 0) are left out. A closed-loop class's rate follows from its latency, which is not known before
the run, so it is not checked. For a search, its first stage is checked: each class's mix at
``start_scale`` for as long as its first probe runs (``stage_duration_s``, or as sized by
``stage_requests``; the lower scales it tries when the start fails gather fewer still). These are
warnings: the scenario still validates and runs.
"""

from __future__ import annotations

import math

from bench_plugin.analysis.intervals import CONFIDENCE, duration_needed_s, quantile_key, samples_needed
from bench_plugin.scenario.models import Scenario

CHECKED_QUANTILE: float = 0.95
"""The percentile every SLO is judged on, and so the one a stage must gather enough samples for."""


def sample_warnings(scenario: Scenario) -> list[str]:
    """One line per open-loop class and stage whose expected samples cannot bound its P95."""
    open_loop = [name for name in scenario.classes.names() if scenario.classes.get(name).arrival != "closed"]
    lines: list[str] = []
    for index, stage in enumerate(scenario.stages):
        where = f"stage {index}" + (f" '{stage.name}'" if stage.name else "")
        for name in open_loop:
            lines += _short(where, name, stage.load.get(name, 0.0), stage.duration_s)  # type: ignore[call-overload]
    if scenario.search is not None:
        search = scenario.search
        for ray, mix in search.rays().items():
            where = f"search start (scale {search.start_scale:g})" + (f", ray {ray}" if ray != "mix" else "")
            duration = search.probe_duration_s({name: rate * search.start_scale for name, rate in mix.items()})
            for name in open_loop:
                lines += _short(where, name, mix.get(name, 0.0) * search.start_scale, duration)
    return lines


def _short(where: str, name: str, rate: float, duration_s: float) -> list[str]:
    """The warning for one class in one stage, or none when it gathers enough samples (or is idle)."""
    needed = samples_needed(CHECKED_QUANTILE)
    enough_s = duration_needed_s(CHECKED_QUANTILE, rate)
    expected = rate * duration_s
    if enough_s is None or expected >= needed - 1e-9:
        return []
    percentile = quantile_key(CHECKED_QUANTILE).upper()
    return [f"{where} {name}: {rate:g} req/s x {duration_s:g} s gives {expected:g} samples; a {percentile} needs "
            f"{needed} to be bounded ({CONFIDENCE * 100:g}% order-statistic interval): "
            f"run it >= {_tenths_up(enough_s):g} s"]


def _tenths_up(seconds: float) -> float:
    """``seconds`` rounded up to a tenth, so that the duration given is always enough."""
    return math.ceil(round(seconds * 10, 6)) / 10
