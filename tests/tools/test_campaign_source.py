"""tools/campaign_source.py: the commit a campaign's recorded bench_plugin source digest belongs to."""

from __future__ import annotations

import subprocess
import sys
import tarfile
from pathlib import Path
from types import ModuleType

import pytest
from tools_testlib import load_tool

from bench_plugin.results.provenance import digest_sources, source_digest
from bench_plugin.results.recorder import Recorder

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "campaign_source.py"


def tool() -> ModuleType:
    return load_tool("campaign_source")


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout.strip()


def commit(repo: Path, files: dict[str, str], message: str) -> str:
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def campaign(directory: Path, digest: str, revision: str | None) -> Path:
    directory.mkdir(parents=True)
    rec = Recorder(directory / "results.sqlite")
    rec.set_meta("conditions", {"source_digest": digest, "source_revision": revision})
    rec.close()
    return directory


def run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(TOOL), *map(str, args)], capture_output=True, text=True, timeout=120,
                          check=False)


@pytest.fixture
def history(tmp_path: Path) -> tuple[Path, str, str, str]:
    """A repository with two commits of bench_plugin/: (repo, first commit, its digest, second commit)."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    first = {"bench_plugin/__init__.py": "", "bench_plugin/a-b.py": "x = 1\n", "bench_plugin/a/b.py": "y = 2\n",
             "README.md": "first\n"}
    one = commit(repo, first, "one")
    two = commit(repo, {"bench_plugin/a/b.py": "y = 3\n"}, "two")
    digest = digest_sources((name.removeprefix("bench_plugin/"), text.encode()) for name, text in first.items()
                            if name.endswith(".py"))
    return repo, one, digest, two


def test_the_recorded_digest_finds_its_commit_from_a_directory_or_its_tarball(
        history: tuple[Path, str, str, str], tmp_path: Path) -> None:
    repo, one, digest, two = history
    results = campaign(tmp_path / "device-campaign", digest, two)  # recorded at a later, changed revision
    with tarfile.open(tmp_path / "results.tar.gz", "w:gz") as tar:
        tar.add(results, arcname=results.name)
    for given in (results, tmp_path / "results.tar.gz"):
        done = run(given, "--repo", repo)
        assert done.returncode == 0, done.stderr
        assert done.stdout == f"{one} (bench_plugin source {digest})\n"


def test_export_writes_that_commits_tree(history: tuple[Path, str, str, str], tmp_path: Path) -> None:
    repo, _, digest, _ = history
    results = campaign(tmp_path / "results", digest, None)
    done = run(results, "--repo", repo, "--export", tmp_path / "source")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "source" / "bench_plugin" / "a" / "b.py").read_text() == "y = 2\n"
    assert (tmp_path / "source" / "README.md").read_text() == "first\n"
    again = run(results, "--repo", repo, "--export", tmp_path / "source")
    assert again.returncode == 2 and again.stderr.count("\n") == 1 and "not empty" in again.stderr


@pytest.mark.parametrize("case", ["uncommitted", "no digest", "no campaign", "not an archive"])
def test_what_cannot_be_found_is_said_in_one_line(history: tuple[Path, str, str, str], tmp_path: Path,
                                                  case: str) -> None:
    repo = history[0]
    given = {"uncommitted": lambda: campaign(tmp_path / "r", "0" * 12, None),
             "no digest": lambda: campaign(tmp_path / "r", "", None),
             "no campaign": lambda: tmp_path,
             "not an archive": lambda: TOOL}[case]()
    done = run(given, "--repo", repo)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("campaign_source: "), done.stderr
    assert {"uncommitted": "never committed", "no digest": "no bench_plugin source digest",
            "no campaign": "not a campaign", "not an archive": "not a results directory"}[case] in done.stderr


def test_a_commits_digest_is_the_one_a_campaign_of_its_checkout_records() -> None:
    if git(ROOT, "status", "--porcelain", "--", "bench_plugin"):
        pytest.skip("bench_plugin/ has uncommitted changes here: HEAD is not what runs")
    assert tool().digest_at(ROOT, "HEAD") == source_digest()
