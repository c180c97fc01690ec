"""An arm's cpu_affinity in the scenario: cpulist syntax, its shortest form, and one variable per arm."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from bench_plugin.scenario import (
    CpuPlacement,
    ScenarioError,
    changed_variables,
    format_cpulist,
    load_scenario,
    parse_cpulist,
)

CLASSES = {"llm": {"model": "m", "slo": {"p95_ms": 100}}, "embedding": {"model": "e", "slo": {"p95_ms": 100}},
           "asr": {"model": "a", "slo": {"p95_ms": 100}}}


def load(tmp_path: Path, arms: list[dict[str, Any]]) -> Any:
    data = {"name": "t", "classes": CLASSES, "arms": arms,
            "stages": [{"duration_s": 1, "load": {"llm": 1, "embedding": 1, "asr": 1}}]}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_scenario(path)


def error(tmp_path: Path, arms: list[dict[str, Any]]) -> str:
    with pytest.raises(ScenarioError) as info:
        load(tmp_path, arms)
    return str(info.value)


@pytest.mark.parametrize(("text", "cores"), [
    ("0", {0}), ("0-3", {0, 1, 2, 3}), ("0-3,8", {0, 1, 2, 3, 8}), (" 8, 0-1 ", {0, 1, 8}), ("2,1-2", {1, 2}),
    ("5-5", {5}),
])
def test_cpulists_parse_as_linux_writes_them(text: str, cores: set[int]) -> None:
    assert parse_cpulist(text) == cores


@pytest.mark.parametrize(("text", "message"), [
    ("3-1", "range '3-1' runs backwards"),
    ("a", "'a' is not a core or a range"),
    ("", "an empty cpulist names no core"),
    ("  ", "an empty cpulist names no core"),
    ("0,,2", "'' in cpulist '0,,2' is not a core or a range"),
    ("-1", "'-1' is not a core or a range"),
    ("0-", "'0-' is not a core or a range"),
    ("0-7:2", "'0-7:2' is not a core or a range"),
    ("1 2", "'1 2' is not a core or a range"),
    ("0-3,9-8", "range '9-8' in cpulist '0-3,9-8' runs backwards"),
    ("9000", "core 9000 is past any Linux host's cores"),
    ("\u0663", "is not a core or a range"),  # an Arabic-Indic three is a digit to Python, not to the kernel
])
def test_malformed_cpulists_are_refused_naming_the_part(text: str, message: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_cpulist(text)
    assert message in str(info.value)


def test_the_shortest_form_is_stored_so_equal_sets_are_one_value() -> None:
    assert format_cpulist({8, 0, 1, 2, 3, 10, 11}) == "0-3,8,10-11"
    assert format_cpulist([4]) == "4" and format_cpulist([]) == ""
    assert CpuPlacement.model_validate("0,1,2,3").cpus == "0-3"
    assert CpuPlacement.model_validate(3) == CpuPlacement(cpus="3")
    assert CpuPlacement.model_validate({"numa_node": 1}).cores() is None
    assert CpuPlacement.model_validate({"cpus": "0-1", "numa_node": 0}).label() == "cpus 0-1 on numa node 0"


def test_a_bad_cpu_affinity_names_file_arm_class_and_value(tmp_path: Path) -> None:
    control = {"name": "c", "control": True}
    cases = [
        ({"llm": "3-1"}, "arms.1.cpu_affinity.llm.cpus: range '3-1' runs backwards; write it low-high (got '3-1')"),
        ({"llm": {"cpus": "a"}}, "arms.1.cpu_affinity.llm.cpus: 'a' is not a core or a range"),
        ({"llm": ""}, "arms.1.cpu_affinity.llm.cpus: an empty cpulist names no core"),
        ({"llm": {}}, "arms.1.cpu_affinity.llm: give cpus (a cpulist), numa_node, or both"),
        ({"llm": {"numa_node": -1}}, "arms.1.cpu_affinity.llm.numa_node: Input should be greater than or equal to 0"),
        ({"llm": {"cpus": "0", "numa": 0}}, "arms.1.cpu_affinity.llm.numa: unknown key"),
        ({"llm": True}, "arms.1.cpu_affinity.llm: Input should be a valid dictionary"),
        ({"gpu": "0"}, "arms.1.cpu_affinity.gpu"),
    ]
    for affinity, message in cases:
        text = error(tmp_path, [control, {"name": "p", "cpu_affinity": affinity}])
        assert f"s.yaml: {message}" in text, (affinity, text)
        assert len(text.splitlines()) == 1, text


def test_a_class_not_in_the_scenario_is_refused(tmp_path: Path) -> None:
    data = {"name": "t", "classes": {"llm": CLASSES["llm"]}, "stages": [{"duration_s": 1, "load": {"llm": 1}}],
            "arms": [{"name": "c", "control": True}, {"name": "p", "cpu_affinity": {"asr": "0"}}]}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ScenarioError, match="arm 'p': cpu_affinity names classes not in the scenario: asr"):
        load_scenario(path)


def test_the_core_layout_is_one_variable_however_many_classes_it_pins(tmp_path: Path) -> None:
    disjoint = {"llm": "0-7", "embedding": "8-11", "asr": "12-15"}
    arms = [
        {"name": "exclusive", "control": True, "sharing": "exclusive", "cpu_affinity": disjoint},
        {"name": "shared-disjoint", "sharing": "time-slicing", "cpu_affinity": disjoint},
        {"name": "shared-cores", "baseline": "shared-disjoint", "sharing": "time-slicing",
         "cpu_affinity": {"llm": "0-15", "embedding": "0-15", "asr": "0-15"}},
        {"name": "llm-on-node-0", "baseline": "shared-disjoint", "sharing": "time-slicing",
         "cpu_affinity": {**disjoint, "llm": {"cpus": "0,1,2,3,4,5,6,7", "numa_node": 0}}},
    ]
    scenario = load(tmp_path, arms)
    names = scenario.classes.names()
    by = {a.name: a for a in scenario.arms}
    assert changed_variables(by["exclusive"], by["shared-disjoint"], names) == ["sharing"]
    assert changed_variables(by["shared-disjoint"], by["shared-cores"], names) == ["cpu_affinity"]
    assert changed_variables(by["shared-disjoint"], by["llm-on-node-0"], names) == ["cpu_affinity"]
    assert by["shared-disjoint"].variables(names)["cpu_affinity"]["embedding"] == {"cpus": "8-11", "numa_node": None}
    # the same set written another way is the same arm
    again = [arms[1] | {"name": "again", "baseline": "shared-disjoint", "cpu_affinity": {**disjoint, "llm": "0-3,4-7"}}]
    assert "changes nothing against its baseline" in error(tmp_path, arms[:2] + again)
