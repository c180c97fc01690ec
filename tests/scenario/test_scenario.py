"""Scenario loading and validation: every file in scenarios/ loads, and bad ones fail naming file/key/value."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from bench_plugin.scenario import ScenarioError, changed_variables, load_scenario, scenario_sha256

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = sorted((ROOT / "scenarios").glob("*.yaml"))

MINIMAL = {
    "name": "t",
    "classes": {"llm": {"model": "m", "slo": {"p95_ms": 100}}},
    "arms": [{"name": "a", "control": True}, {"name": "b", "sharing": "time-slicing"}],
    "stages": [{"duration_s": 1, "load": {"llm": 1}}],
}


def write(tmp_path: Path, data: object, name: str = "s.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data) if not isinstance(data, str) else data)
    return path


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.name for p in SCENARIOS])
def test_every_shipped_scenario_validates(path: Path) -> None:
    scenario = load_scenario(path)
    assert scenario.control in scenario.arms


def test_minimal_scenario_defaults(tmp_path: Path) -> None:
    scenario = load_scenario(write(tmp_path, MINIMAL))
    assert scenario.repeats == 3
    assert scenario.order == "interleaved"
    assert scenario.control.name == "a"
    assert scenario.classes.names() == ["llm"]


def _error(tmp_path: Path, data: object) -> str:
    with pytest.raises(ScenarioError) as info:
        load_scenario(write(tmp_path, data))
    return str(info.value)


def test_unknown_key_is_named_with_its_path(tmp_path: Path) -> None:
    data = {**MINIMAL, "classes": {"llm": {"model": "m", "slo": {"p95_ms": 100, "p99_ms": 5}}}}
    message = _error(tmp_path, data)
    assert "s.yaml" in message and "classes.llm.slo.p99_ms: unknown key" in message


def test_wrong_type_names_key_and_value(tmp_path: Path) -> None:
    data = {**MINIMAL, "repeats": "many"}
    message = _error(tmp_path, data)
    assert "repeats" in message and "'many'" in message


def test_arm_changing_two_variables_is_refused_naming_them(tmp_path: Path) -> None:
    arms = [{"name": "a", "control": True},
            {"name": "b", "sharing": "time-slicing", "classes": {"llm": {"priority": "high"}}}]
    message = _error(tmp_path, {**MINIMAL, "arms": arms})
    assert "arm 'b' changes 2 variables" in message
    assert "sharing" in message and "classes.llm.priority" in message


def test_allow_multiple_changes_lets_it_through(tmp_path: Path) -> None:
    arms = [{"name": "a", "control": True},
            {"name": "b", "sharing": "time-slicing", "classes": {"llm": {"priority": "high"}}}]
    scenario = load_scenario(write(tmp_path, {**MINIMAL, "arms": arms, "allow_multiple_changes": True}))
    assert changed_variables(scenario.arms[0], scenario.arms[1], ["llm"]) == ["sharing", "classes.llm.priority"]


def test_baseline_lets_an_arm_differ_from_another_arm_by_one_variable(tmp_path: Path) -> None:
    arms = [{"name": "excl", "control": True},
            {"name": "mps", "sharing": "mps"},
            {"name": "mps-capped", "baseline": "mps", "sharing": "mps", "classes": {"llm": {"thread_percentage": 50}}}]
    scenario = load_scenario(write(tmp_path, {**MINIMAL, "arms": arms}))
    assert [a.name for a in scenario.arms] == ["excl", "mps", "mps-capped"]


def test_arm_identical_to_its_baseline_is_refused(tmp_path: Path) -> None:
    arms = [{"name": "a", "control": True}, {"name": "b"}]
    assert "changes nothing" in _error(tmp_path, {**MINIMAL, "arms": arms})


def test_exactly_one_control(tmp_path: Path) -> None:
    arms = [{"name": "a"}, {"name": "b", "sharing": "time-slicing"}]
    assert "exactly one arm must have control: true" in _error(tmp_path, {**MINIMAL, "arms": arms})


def test_stage_must_give_every_class_a_load(tmp_path: Path) -> None:
    data = {**MINIMAL, "classes": {**MINIMAL["classes"], "embedding": {"model": "e", "slo": {"p95_ms": 5}}}}
    assert "stages[0].load has no load for: embedding" in _error(tmp_path, data)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="scenario file not found"):
        load_scenario(tmp_path / "nope.yaml")


def test_empty_file(tmp_path: Path) -> None:
    assert "scenario file is empty" in _error(tmp_path, "   \n")


def test_truncated_file_names_the_line(tmp_path: Path) -> None:
    text = yaml.safe_dump(MINIMAL)
    message = _error(tmp_path, text[: text.index("stages") + 12] + "{duration_s: [1,")
    assert "not valid YAML at line" in message


def test_configmap_form_loads_and_fills_the_experiment_fields(tmp_path: Path) -> None:
    inner = {k: v for k, v in MINIMAL.items() if k != "name"}
    cm = {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "day19-experiment", "namespace": "ai-lab"},
        "data": {"change": "compare", "fixed": "image, model, input", "metrics": "aggregate throughput",
                 "repeats": "3", "scenario": yaml.safe_dump(inner)},
    }
    scenario = load_scenario(write(tmp_path, cm))
    assert scenario.name == "day19-experiment"
    assert scenario.repeats == 3 and scenario.change == "compare"


def test_configmap_conflicting_fields_are_refused(tmp_path: Path) -> None:
    inner = {**MINIMAL, "repeats": 5}
    cm = {"kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"repeats": "3", "scenario": yaml.safe_dump(inner)}}
    assert "data.repeats is 3 but data.scenario.repeats is 5" in _error(tmp_path, cm)


def test_overrides_narrow_the_run(tmp_path: Path) -> None:
    path = write(tmp_path, MINIMAL)
    scenario = load_scenario(path, arm="b", repeats=1, stage_duration=0.5)
    assert [a.name for a in scenario.arms] == ["b"] and scenario.repeats == 1
    assert scenario.stages[0].duration_s == 0.5
    assert scenario_sha256(scenario) != scenario_sha256(load_scenario(path))
    with pytest.raises(ScenarioError, match="--arm 'zz' is not an arm"):
        load_scenario(path, arm="zz")


def test_a_key_given_twice_is_refused_naming_the_key_and_both_lines(tmp_path: Path) -> None:
    text = yaml.safe_dump(MINIMAL) + "repeats: 1\nseed: 4\nrepeats: 1000\n"
    message = _error(tmp_path, text)
    lines = text.splitlines()
    first, second = (i + 1 for i, line in enumerate(lines) if line.startswith("repeats:"))
    assert message == (f"{tmp_path / 's.yaml'}: not valid YAML at line {second}, column 1: key 'repeats' is given "
                       f"twice (first at line {first}): keep one")


def test_a_nested_key_given_twice_is_refused_too(tmp_path: Path) -> None:
    text = ("name: t\nclasses:\n  llm:\n    model: m\n    slo: {p95_ms: 100, p95_ms: 9}\n"
            "arms: [{name: a, control: true}]\nstages: [{duration_s: 1, load: {llm: 1}}]\n")
    assert "key 'p95_ms' is given twice (first at line 5)" in _error(tmp_path, text)


def test_a_merged_key_may_still_be_overridden(tmp_path: Path) -> None:
    text = ("name: t\nslo: &slo {p95_ms: 100, ttft_p95_ms: 50}\nclasses:\n  llm:\n    model: m\n"
            "    slo: {<<: *slo, p95_ms: 200}\narms: [{name: a, control: true}]\n"
            "stages: [{duration_s: 1, load: {llm: 1}}]\n")
    with pytest.raises(ScenarioError, match="slo: unknown key"):  # the anchor's own key, not a duplicate
        load_scenario(write(tmp_path, text))
    text = text.replace("slo: &slo {p95_ms: 100, ttft_p95_ms: 50}\n", "").replace(
        "    slo: {<<: *slo, p95_ms: 200}\n", "    slo: &slo {p95_ms: 100, ttft_p95_ms: 50}\n").replace(
        "arms:", "  embedding: {model: e, slo: {<<: *slo, p95_ms: 200}}\narms:").replace(
        "load: {llm: 1}", "load: {llm: 1, embedding: 1}")
    scenario = load_scenario(write(tmp_path, text))
    assert scenario.classes.get("embedding").slo.p95_ms == 200
    assert scenario.classes.get("embedding").slo.ttft_p95_ms == 50


@pytest.mark.parametrize(("where", "value"), [("rate", ".inf"), ("rate", ".nan"), ("duration", ".inf"),
                                              ("slo", ".nan")])
def test_a_number_that_is_not_finite_is_refused_naming_its_key(tmp_path: Path, where: str, value: str) -> None:
    rate, duration, slo = ("1", "1", "100")
    rate, duration, slo = (value if where == "rate" else rate, value if where == "duration" else duration,
                           value if where == "slo" else slo)
    text = (f"name: t\nclasses: {{llm: {{model: m, slo: {{p95_ms: {slo}}}}}}}\narms: [{{name: a, control: true}}]\n"
            f"stages: [{{duration_s: {duration}, load: {{llm: {rate}}}}}]\n")
    message = _error(tmp_path, text)
    key = {"rate": "stages.0.load.llm", "duration": "stages.0.duration_s", "slo": "classes.llm.slo.p95_ms"}[where]
    assert f"{key}: Input should be a finite number" in message, message
    assert len(message.splitlines()) == 1


def test_a_document_nested_too_deeply_is_refused_in_one_line(tmp_path: Path) -> None:
    assert _error(tmp_path, "x: " + "[" * 100_000 + "]" * 100_000 + "\n") == (
        f"{tmp_path / 's.yaml'}: nested too deeply to be a scenario")


def test_a_configmap_scenario_with_a_key_given_twice_is_refused(tmp_path: Path) -> None:
    inner = yaml.safe_dump(MINIMAL) + "repeats: 2\nrepeats: 5\n"
    text = yaml.safe_dump({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "t"},
                           "data": {"scenario": inner}})
    message = _error(tmp_path, text)
    assert "data.scenario is not valid YAML" in message and "key 'repeats' is given twice" in message
    assert "\n" not in message


@pytest.mark.parametrize("name", ["../../x", "/abs/x", "a/b", ".hidden", "x" * 101, "with space"])
def test_a_name_that_is_not_a_plain_directory_name_is_refused(tmp_path: Path, name: str) -> None:
    message = _error(tmp_path, {**MINIMAL, "name": name})
    assert message.startswith(f"{tmp_path / 's.yaml'}: name: String should ") and repr(name) in message
    assert "\n" not in message


@pytest.mark.parametrize(("stage", "says"), [
    ({"duration_s": 10, "load": {"llm": 1e9}},
     "stages[0].load.llm: 1e+09 req/s for 10 s is 10,000,000,000 arrivals; a stage plans at most 1,000,000"),
    ({"duration_s": 1e9, "load": {"llm": 1}}, "stages.0.duration_s: Input should be less than or equal to 604800"),
])
def test_a_stage_of_absurd_size_is_refused_naming_the_key(tmp_path: Path, stage: dict[str, Any], says: str) -> None:
    message = _error(tmp_path, {**MINIMAL, "stages": [stage]})
    assert says in message and "\n" not in message, message


def test_closed_loop_users_and_a_search_are_bounded_too(tmp_path: Path) -> None:
    closed = {**MINIMAL, "classes": {"llm": {"model": "m", "slo": {"p95_ms": 100}, "arrival": "closed"}},
              "stages": [{"duration_s": 1, "load": {"llm": 100_000}}]}
    assert "stages[0].load.llm: 100,000 closed-loop users; a class has at most 10,000" in _error(tmp_path, closed)
    search = {**{k: v for k, v in MINIMAL.items() if k != "stages"},
              "search": {"mix": {"llm": 1000}, "max_scale": 1000, "stage_duration_s": 10}}
    # its hold (three stage durations) runs at max_scale too
    assert "search: mix.llm x max_scale: 1e+06 req/s for 30 s is 30,000,000 arrivals" in _error(tmp_path, search)


def test_a_probe_sized_by_requests_runs_until_its_least_loaded_class_is_offered_them(tmp_path: Path) -> None:
    """``stage_requests`` N: a probe lasts N over its lowest class rate, within stage_duration_s and the hold."""
    base = {**{k: v for k, v in MINIMAL.items() if k != "stages"}}
    search = {"mix": {"llm": 1}, "stage_duration_s": 6, "sustain_s": 24, "stage_requests": 60}
    sized = load_scenario(write(tmp_path, {**base, "search": search})).search
    assert sized is not None and sized.longest_probe_s == 24
    assert sized.probe_duration_s({"llm": 3.0, "embedding": 45.0}) == 20  # 60 llm requests at 3/s
    assert sized.probe_duration_s({"llm": 30.0, "embedding": 0.0}) == 6  # 2 s would do: the floor
    assert sized.probe_duration_s({"llm": 1.0}) == 24  # 60 s would do: capped at the hold
    assert sized.stage_length_s({"llm": 3.0}, hold=False) == 20 and sized.stage_length_s({"llm": 3.0}, hold=True) == 24
    fixed = load_scenario(write(tmp_path, {**base, "search": {**search, "stage_requests": None}})).search
    assert fixed is not None and fixed.probe_duration_s({"llm": 1.0}) == 6 and fixed.longest_probe_s == 6
    no_hold = load_scenario(write(tmp_path, {**base, "search": {**search, "sustain_s": 0}})).search
    assert no_hold is not None and no_hold.longest_probe_s == 18  # three stage durations
    # the arrivals a stage may plan are bounded at the longest a probe or a hold runs, not at stage_duration_s
    big = {**base, "search": {"mix": {"llm": 1000}, "max_scale": 20, "stage_duration_s": 10, "sustain_s": 60}}
    for sizing in ({}, {"stage_requests": 100_000}):
        message = _error(tmp_path, {**big, "search": {**big["search"], **sizing}})
        assert "search: mix.llm x max_scale: 20000 req/s for 60 s is 1,200,000 arrivals" in message
