"""Trial order: interleaved ABAB by default, AABB when sequential; ids and repeats follow the order."""

from __future__ import annotations

from pathlib import Path

import yaml

from bench_plugin.run.schedule import plan_trials
from bench_plugin.scenario import load_scenario

BASE = {
    "name": "t",
    "classes": {"llm": {"model": "m", "slo": {"p95_ms": 100}}},
    "arms": [{"name": "a", "control": True}, {"name": "b", "sharing": "time-slicing"},
             {"name": "c", "sharing": "mps"}],
    "stages": [{"duration_s": 1, "load": {"llm": 1}}],
    "repeats": 2,
}


def trials(tmp_path: Path, **changes: object) -> list[tuple[int, str, int]]:
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({**BASE, **changes}))
    return [(t.id, t.arm.name, t.repeat) for t in plan_trials(load_scenario(path))]


def test_interleaved_by_default(tmp_path: Path) -> None:
    assert trials(tmp_path) == [(1, "a", 1), (2, "b", 1), (3, "c", 1), (4, "a", 2), (5, "b", 2), (6, "c", 2)]


def test_sequential(tmp_path: Path) -> None:
    assert [arm for _, arm, _ in trials(tmp_path, order="sequential")] == ["a", "a", "b", "b", "c", "c"]
