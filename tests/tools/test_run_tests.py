"""tools/run_tests.py: which test files a run takes, and how they are spread over lanes."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest
from tools_testlib import load_tool

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "run_tests.py"


@pytest.fixture(scope="module")
def tool() -> ModuleType:
    return load_tool("run_tests")


def test_only_takes_the_files_at_or_under_each_path(tool: ModuleType) -> None:
    files = tool.test_files()
    tools_dir = ROOT / "tests" / "tools"
    picked = tool.select(files, [tools_dir, ROOT / "tests" / "test_cli.py"])
    assert ROOT / "tests" / "test_cli.py" in picked
    assert Path(__file__).resolve() in picked
    assert all(f.parent == tools_dir or f.name == "test_cli.py" for f in picked)
    assert tool.select(files, []) == files


@pytest.mark.parametrize(("path", "problem"), [("tests/no-such-dir", "no such file or directory"),
                                               ("bench_plugin", "holds no test file")])
def test_only_names_a_path_that_selects_nothing(tool: ModuleType, path: str, problem: str,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # a relative path is taken from the working directory, as on the command line
    with pytest.raises(ValueError, match=f"--only {path}: {problem}"):
        tool.select(tool.test_files(), [Path(path)])
    done = subprocess.run([sys.executable, str(TOOL), "--only", path], cwd=ROOT, capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 2
    assert f"--only {path}: {problem}" in done.stderr
    assert "Traceback" not in done.stderr


def test_no_lane_is_left_without_files(tool: ModuleType) -> None:
    one = [ROOT / "tests" / "test_cli.py"]
    lanes = tool.plan(one, 3)
    assert [lane.files for lane in lanes] == [one]
    every = tool.test_files()
    lanes = tool.plan(every, 3)
    assert len(lanes) == 3
    assert sorted(f for lane in lanes for f in lane.files) == every


SERIAL_TEST = ("tests.test_selfcheck",
               "test_a_cpu_bound_load_generator_marks_its_stages_generator_limited_and_asks_for_more_processes")
"""A test that ran in a lane until it was marked ``serial``: earlier runs' reports still hold its time."""


def write_run(work: Path, lanes: dict[int, list[tuple[str, str, float]]]) -> Path:
    """A run's directory as the tool leaves it: a JUnit report (xunit1, as it asks pytest for) per lane."""
    work.mkdir()
    for index, cases in lanes.items():
        rows = "".join(f'<testcase classname="{module}" name="{name}" time="{seconds}" />'
                       for module, name, seconds in cases)
        (work / f"lane-{index}.xml").write_text(
            f'<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">{rows}</testsuite>'
            "</testsuites>", encoding="utf-8")
    return work


def test_record_from_writes_the_mean_of_earlier_runs_lanes_without_the_tests_now_serial(
        tool: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    durations = tmp_path / "durations.json"
    durations.write_text(json.dumps({"tests/test_cli.py": 9.0, "tests/test_interrupt.py": 200.0}), encoding="utf-8")
    monkeypatch.setattr(tool, "DURATIONS", durations)
    lane = ("tests.tools.test_run_tests", "test_no_lane_is_left_without_files")
    first = write_run(tmp_path / "bench-tests-a", {
        1: [(*lane, 2.0), ("tests.test_cli", "test_validate_ok_and_bad", 1.0),
            ("tests.test_cli", "test_validate_warns_of_a_stage_too_short_to_bound_a_p95", 3.0)],
        2: [(*SERIAL_TEST, 40.0), ("tests.test_selfcheck", "test_a_loop_stalled_by_a_c_call_marks_its_stage_stalled"
                                   "_names_the_call_and_says_more_processes_will_not_help", 10.0)]})
    second = write_run(tmp_path / "bench-tests-b", {3: [(*lane, 6.0), (*SERIAL_TEST, 38.0)]})
    assert tool.main(["--record-from", str(first), "--record-from", str(second)]) == 0
    assert f"wrote {durations}" in capsys.readouterr().out
    assert json.loads(durations.read_text(encoding="utf-8")) == {
        "tests/tools/test_run_tests.py": 4.0,  # (2 + 6) / 2
        "tests/test_selfcheck.py": 10.0,  # measured in one run, and without the test now serial
        "tests/test_cli.py": 4.0,  # one run, two tests: a file's time in a run is the sum of its tests
        "tests/test_interrupt.py": 200.0,  # in neither run: its recorded figure stays
    }


@pytest.mark.parametrize(("make", "problem"), [
    (lambda d: None, "no lane-*.xml in it"),
    (lambda d: (d.mkdir(), (d / "lane-1.xml").write_text("<testsuites>", encoding="utf-8")),
     "lane-1.xml is not a JUnit XML report"),
])
def test_record_from_names_a_directory_it_cannot_read_and_writes_nothing(
        make: Callable[[Path], object], problem: str, tmp_path: Path) -> None:
    work = tmp_path / "bench-tests-x"
    make(work)
    before = (ROOT / "tests" / "durations.json").read_bytes()
    done = subprocess.run([sys.executable, str(TOOL), "--record-from", str(work)], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 2, done.stderr
    assert f"--record-from {work}: {problem}" in done.stderr
    assert "Traceback" not in done.stderr
    assert (ROOT / "tests" / "durations.json").read_bytes() == before


def test_record_from_runs_no_test_so_takes_no_other_option(tool: ModuleType, tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(TOOL), "--record-from", str(tmp_path), "--only", "tests/tools"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2 and "--record-from runs no test: give it alone" in done.stderr
