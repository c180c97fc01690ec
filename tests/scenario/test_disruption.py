"""The scenario's ``disruption:`` block (or list): each kind on the backends that can do it, strictly checked, one line
per problem."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from bench_plugin.scenario import ScenarioError, load_scenario

BASE: dict[str, Any] = {
    "name": "t", "backend": "kubernetes",
    "classes": {"llm": {"model": "m", "slo": {"p95_ms": 100}}, "embedding": {"model": "m", "slo": {"p95_ms": 100}}},
    "arms": [{"name": "a", "control": True}, {"name": "b", "sharing": "time-slicing"}],
    "stages": [{"duration_s": 10, "load": {"llm": 1, "embedding": 1}},
               {"duration_s": 20, "load": {"llm": 2, "embedding": 1}}],
}
FAIL = {"kind": "node-failure", "at_s": 2, "command": ["stop-vm", "n1"], "rejoin_command": ["start-vm", "n1"],
        "rejoin_after_s": 30}


def load(tmp_path: Path, disruption: dict[str, Any] | list[dict[str, Any]], **top: Any) -> Any:
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({**BASE, **top, "disruption": disruption}))
    return load_scenario(path)


def error(tmp_path: Path, disruption: dict[str, Any] | list[dict[str, Any]], **top: Any) -> str:
    with pytest.raises(ScenarioError) as info:
        load(tmp_path, disruption, **top)
    message = str(info.value)
    assert "\n" not in message and "Traceback" not in message
    return message


def test_defaults_and_a_node_failure(tmp_path: Path) -> None:
    spec = load(tmp_path, {"kind": "drain", "at_s": 3}).disruption
    assert (spec.stage, spec.classes, spec.arms, spec.eviction_timeout_s) == (0, None, None, 30.0)
    assert spec.hits("a") and spec.hits("b")
    spec = load(tmp_path, {**FAIL, "stage": 1, "arms": ["b"], "classes": ["llm"]}).disruption
    assert spec.command == ["stop-vm", "n1"] and spec.rejoin_after_s == 30 and not spec.hits("a")


@pytest.mark.parametrize(("disruption", "top", "expected"), [
    ({"kind": "drain", "at_s": 1}, {"backend": "local"},
     "disruption (kind drain) needs backend: kubernetes, not local"),
    ({"kind": "reboot", "at_s": 1}, {}, "disruption.kind"),
    ({"kind": "drain", "at_s": 10}, {}, "disruption.at_s 10 is not within stage 0 (10 s long)"),
    ({"kind": "drain", "at_s": 1, "stage": 2}, {}, "disruption.stage 2 is not a stage (the scenario has 2)"),
    ({"kind": "drain", "at_s": 1, "classes": ["asr"]}, {}, "disruption.classes names classes not in the scenario: asr"),
    ({"kind": "drain", "at_s": 1, "arms": ["zz"]}, {}, "disruption.arms names arms not in the scenario: zz"),
    ({"kind": "drain", "at_s": 1, "arms": []}, {}, "disruption.arms is empty; leave it out for all"),
    ({**FAIL, "command": None}, {}, "disruption.command is required for kind node-failure"),
    ({**FAIL, "rejoin_command": []}, {}, "disruption.rejoin_command must be a non-empty argv list"),
    ({"kind": "rollout-restart", "at_s": 1, "rejoin_after_s": 5}, {},
     "disruption.rejoin_after_s is only for kind node-failure, not rollout-restart"),
    ({"kind": "drain", "at_s": 1, "grace": 5}, {}, "disruption.grace: unknown key"),
    ({"kind": "kill", "at_s": 1}, {}, "disruption (kind kill) needs backend: local, not kubernetes"),
    ({"kind": "restart", "at_s": 1, "grace_s": 0}, {"backend": "local"}, "disruption.grace_s"),
    ([], {"backend": "local"}, "disruption is an empty list; leave it out for none"),
    ([{"kind": "kill", "at_s": 1}, {"kind": "restart", "at_s": 2}], {"backend": "local"},
     "disruption: two disruptions in stage 0; one stage has at most one"),
])
def test_bad_disruptions_are_refused_in_one_line(tmp_path: Path, disruption: dict[str, Any] | list[dict[str, Any]],
                                                 top: dict[str, Any], expected: str) -> None:
    assert expected in error(tmp_path, disruption, **top)


def test_the_local_backend_restarts_kills_and_rolls_one_per_stage(tmp_path: Path) -> None:
    scenario = load(tmp_path, [{"kind": "restart", "at_s": 2, "classes": ["embedding"]},
                               {"kind": "rollout-restart", "at_s": 3, "stage": 1, "grace_s": 10}], backend="local")
    first, second = scenario.disruptions
    assert (first.kind, first.grace_s, second.kind, second.grace_s) == ("restart", 30.0, "rollout-restart", 10.0)
    assert scenario.disruption_of(0) is first and scenario.disruption_of(1) is second
    assert first.backends() == ["local"] and second.backends() == ["local", "kubernetes"]
    single = load(tmp_path, {"kind": "kill", "at_s": 1}, backend="local")
    assert [spec.kind for spec in single.disruptions] == ["kill"] and single.disruption_of(1) is None
