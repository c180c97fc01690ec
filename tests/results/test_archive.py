"""A campaign's results directory given as itself or as a tarball of any compression; what cannot serve, in one line."""

from __future__ import annotations

import io
import sqlite3
import tarfile
from pathlib import Path
from typing import Literal

import pytest

from bench_plugin.results.archive import ArchiveError, results_dir, unpack_store


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


def test_a_published_directorys_packed_store_is_unpacked_beside_it_once(tmp_path: Path) -> None:
    made = campaign(tmp_path / "made")
    published = tmp_path / "published"
    published.mkdir()
    with tarfile.open(published / "results.tar.xz", "w:xz") as tar:
        tar.add(made, arcname="device-campaign")
    assert unpack_store(published) == published / "results.tar.xz"
    assert (published / "results.sqlite").read_bytes() == (made / "results.sqlite").read_bytes()
    assert sorted(p.name for p in published.iterdir()) == ["results.sqlite", "results.tar.xz"]
    assert unpack_store(published) is None  # there already: left as it is
    assert unpack_store(tmp_path / "made") is None  # nothing packed


def test_a_packed_store_that_cannot_serve_is_refused_in_one_line(tmp_path: Path) -> None:
    two = tmp_path / "two"
    two.mkdir()
    for name in ("results.tar.xz", "results.tar.gz"):
        (two / name).write_bytes(b"")
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "results.tar.gz").write_bytes(b"\\x1f\\x8b not gzip")
    empty = tmp_path / "empty"
    empty.mkdir()
    with tarfile.open(empty / "results.tar.gz", "w:gz") as tar:
        tar.addfile(tarfile.TarInfo("x/readme"), io.BytesIO(b""))
    cases = {two: f"{two}: results.tar.xz and results.tar.gz: keep one packed store",
             broken: f"{broken / 'results.tar.gz'}: cannot unpack its results.sqlite",
             empty: f"{empty / 'results.tar.gz'}: the archive holds no results.sqlite"}
    for directory, why in cases.items():
        with pytest.raises(ArchiveError) as caught:
            unpack_store(directory)
        assert str(caught.value).startswith(why) and "\n" not in str(caught.value), caught.value
        assert not (directory / "results.sqlite").exists()
