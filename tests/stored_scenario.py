"""A scenario as a campaign stores it (meta ``scenario.resolved``), built from only what a test cares about.

The store's scenario is validated again when it is read back (results/record.py), so a hand-built
store must hold a whole, valid scenario. ``resolved`` fills in what a test leaves out: the campaign's
name, each class's model, and one fixed stage that offers every class some load (unless the test
gives ``stages`` or a ``search``).
"""

from __future__ import annotations

from typing import Any

from bench_plugin.scenario import Scenario


def resolved(arms: list[dict[str, Any]], classes: dict[str, dict[str, Any]], **rest: Any) -> dict[str, Any]:
    """The JSON of a valid scenario with these ``arms`` and ``classes`` (and any other top-level ``rest``)."""
    filled = {name: {"model": name, **spec} for name, spec in classes.items()}
    scenario: dict[str, Any] = {"name": "hand-built", "classes": filled, "arms": arms, **rest}
    if "stages" not in rest and "search" not in rest:
        scenario["stages"] = [{"duration_s": 10.0, "load": dict.fromkeys(classes, 1.0)}]
    return Scenario.model_validate(scenario).model_dump(mode="json")
