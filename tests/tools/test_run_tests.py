"""tools/run_tests.py: which test files a run takes, and how they are spread over lanes."""

from __future__ import annotations

import subprocess
import sys
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
