"""A campaign's results directory given as itself or as a tarball of any compression; what cannot serve, in one line."""

from __future__ import annotations

import io
import sqlite3
import tarfile
from pathlib import Path
from typing import Literal

import pytest

from bench_plugin.results.archive import ArchiveError, results_dir


def campaign(root: Path) -> Path:
    directory = root / "device-campaign"
    (directory / "logs").mkdir(parents=True)
    sqlite3.connect(directory / "results.sqlite").execute("create table t (x)").connection.commit()
    (directory / "summary.json").write_text("{}")
    return directory


@pytest.mark.parametrize("mode", ["w:gz", "w:xz", "w"])
def test_a_tarball_is_unpacked_while_in_use(tmp_path: Path, mode: Literal["w:gz", "w:xz", "w"]) -> None:
    directory = campaign(tmp_path / "made")
    packed = tmp_path / "results.tar"
    with tarfile.open(packed, mode) as tar:
        tar.add(directory, arcname="out/device-campaign")
    with results_dir(packed) as found:
        assert found.name == "device-campaign"
        assert (found / "results.sqlite").is_file() and (found / "summary.json").read_text() == "{}"
        scratch = found.parents[1]
    assert not scratch.exists()


def test_a_directory_is_given_back_as_it_is(tmp_path: Path) -> None:
    directory = campaign(tmp_path)
    with results_dir(directory) as found:
        assert found == directory


def test_what_cannot_serve_is_refused_in_one_line(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    text = tmp_path / "notes.txt"
    text.write_text("not a tarball")
    storeless = tmp_path / "storeless.tar.gz"
    with tarfile.open(storeless, "w:gz") as tar:
        tar.add(text, arcname="x/notes.txt")
    escaping = tmp_path / "escaping.tar"
    with tarfile.open(escaping, "w") as tar:
        info = tarfile.TarInfo("../results.sqlite")
        info.size = 3
        tar.addfile(info, io.BytesIO(b"abc"))
    cases = {empty: "no results.sqlite here", tmp_path / "absent": "no such file or directory",
             text: "not a results directory or a readable tar archive",
             storeless: "the archive holds no results.sqlite",
             escaping: "not a results directory or a readable tar archive"}
    for path, why in cases.items():
        with pytest.raises(ArchiveError) as caught, results_dir(path):
            pass
        assert str(caught.value).startswith(f"{path}: {why}") and "\n" not in str(caught.value)
    assert not (tmp_path.parent / "results.sqlite").exists()
