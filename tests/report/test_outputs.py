"""The files derived from a store are all of this write, or none: a failed write leaves nothing stale beside it."""

from __future__ import annotations

from pathlib import Path

import pytest
from harness import search_campaign_store

from bench_plugin.report.outputs import DERIVED, write_outputs


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return search_campaign_store(tmp_path)


def test_a_failed_write_leaves_no_derived_file_of_before_or_of_now(store: Path) -> None:
    for name in DERIVED:  # what an earlier slice of a resumed campaign wrote
        (store / name).write_text("an earlier slice's\n")
    (store / "report.md").unlink()
    (store / "report.md").mkdir()  # where report.md goes, a directory: the report cannot be written
    with pytest.raises(IsADirectoryError):
        write_outputs(store)
    assert [name for name in DERIVED if (store / name).is_file()] == []
    assert (store / "results.sqlite").is_file()


def test_a_write_without_the_report_removes_an_earlier_report(store: Path) -> None:
    (store / "report.html").write_text("an earlier slice's\n")
    (store / "report.md").write_text("an earlier slice's\n")
    write_outputs(store, report=False)
    assert [name for name in DERIVED if (store / name).is_file()] == ["summary.json", "summary.md"]


def test_a_whole_write_writes_every_derived_file(store: Path) -> None:
    write_outputs(store)
    assert all((store / name).stat().st_size > 0 for name in DERIVED)
