"""The commit whose bench_plugin source a campaign was recorded with, found in a repository's history.

    python tools/campaign_source.py RESULTS [--export DIR] [--repo DIR]

RESULTS is a results directory or a results.tar.gz holding one (as benchmarks/device_day19.sh packs
it). A resume (``--resume``) refuses any other bench_plugin source than the one the campaign started
with, by its digest (bench_plugin.results.provenance.source_digest), so a campaign that spans device
calls must run every slice from that source, whatever the checkout has become since. This prints the
commit whose ``bench_plugin/`` has the recorded digest (the recorded revision is tried first, then
every commit, newest first) and, with ``--export``, writes that commit's tree into DIR (``git
archive``), ready to carry to the GPU host beside the results. Exit status 2, with one line, when
RESULTS holds no campaign, records no digest, or no commit has that source (the campaign ran from
uncommitted changes).
"""

from __future__ import annotations

import argparse
import io
import sqlite3
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench_plugin.results.archive import STORE, ArchiveError, results_dir  # noqa: E402 (the checkout's own package)
from bench_plugin.results.provenance import digest_sources  # noqa: E402
from bench_plugin.results.store import StoreError, open_store, read_record  # noqa: E402
from bench_plugin.results.summary import Provenance  # noqa: E402


class Refused(Exception):
    """What stops the lookup, in one line."""


def recorded(results: Path) -> tuple[str, str | None]:
    """(source digest, git revision or None) that the campaign under ``results`` recorded."""
    try:
        with results_dir(results) as directory, open_store(directory / STORE) as db:
            conditions = read_record(db).conditions or Provenance()
    except ArchiveError as exc:
        raise Refused(str(exc)) from None
    except (StoreError, sqlite3.DatabaseError) as exc:
        raise Refused(f"{results}: {exc}") from None
    digest = conditions.source_digest
    if not digest:
        raise Refused(f"{results}: the campaign recorded no bench_plugin source digest (conditions.source_digest)")
    return digest, conditions.source_revision


def git(repo: Path, *args: str, data: bytes | None = None) -> bytes:
    done = subprocess.run(["git", "-C", str(repo), *args], input=data, capture_output=True, check=False)
    if done.returncode != 0:
        raise Refused(f"git {' '.join(args[:2])} in {repo}: {done.stderr.decode(errors='replace').strip()}")
    return done.stdout


def commits(repo: Path, first: str | None) -> Iterator[str]:
    """``first`` (when it names a commit here), then every commit of the repository, newest first."""
    seen: set[str] = set()
    if first:
        try:
            head = git(repo, "rev-parse", "--verify", f"{first}^{{commit}}").decode().strip()
        except Refused:  # a revision this repository never had (another clone's commit): search the history
            head = ""
        if head:
            seen.add(head)
            yield head
    for rev in git(repo, "rev-list", "--all").decode().split():
        if rev not in seen:
            yield rev


def digest_at(repo: Path, rev: str) -> str:
    """The bench_plugin source digest of commit ``rev``."""
    listing = git(repo, "ls-tree", "-r", rev, "--", "bench_plugin").decode().splitlines()
    blobs = [(line.split("\t", 1)[1], line.split()[2]) for line in listing if line.endswith(".py")]
    out = git(repo, "cat-file", "--batch", data="".join(f"{sha}\n" for _, sha in blobs).encode())
    stream, files = io.BytesIO(out), []
    for path, _ in blobs:
        size = int(stream.readline().split()[2])
        files.append((path.removeprefix("bench_plugin/"), stream.read(size)))
        stream.read(1)  # the newline after each object
    return digest_sources(files)


def find(repo: Path, digest: str, revision: str | None) -> str:
    """The commit of ``repo`` whose bench_plugin source has ``digest``."""
    for rev in commits(repo, revision):
        if digest_at(repo, rev) == digest:
            return rev
    raise Refused(f"no commit of {repo} has the bench_plugin source {digest} (recorded at revision "
                  f"{revision or 'unknown'}): the campaign ran from changes that were never committed")


def export(repo: Path, rev: str, into: Path) -> None:
    """Commit ``rev``'s tree written into ``into`` (created; it must be empty if it exists)."""
    if into.exists() and any(into.iterdir()):
        raise Refused(f"--export {into}: not empty (the source is written into an empty folder)")
    into.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(git(repo, "archive", rev))) as tar:
        tar.extractall(into, filter="data")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path, help="a results directory, or a results.tar.gz holding one")
    parser.add_argument("--export", type=Path, metavar="DIR", help="write that commit's tree into DIR")
    parser.add_argument("--repo", type=Path, default=ROOT, help="the repository to search (default: this one)")
    args = parser.parse_args(argv)
    try:
        digest, revision = recorded(args.results)
        rev = find(args.repo, digest, revision)
        if args.export:
            export(args.repo, rev, args.export)
    except Refused as exc:
        print(f"campaign_source: {exc}", file=sys.stderr)
        return 2
    print(f"{rev} (bench_plugin source {digest})" + (f", written into {args.export}" if args.export else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
