"""Archive: a campaign's results directory, given as the directory itself or as a tarball of it.

A campaign that ran on another host comes back packed (``results.tar.gz`` or ``.tar.xz`` from the device
scripts, a published ``docs/results/*/results.tar.gz``). :func:`results_dir` yields the directory that
holds its ``results.sqlite``: the one given, or the tarball unpacked into a temporary directory for as long
as the ``with`` block runs (any compression tarfile reads; members that would land outside it refused, as
tarfile's ``data`` filter does). A published results directory may keep its store packed beside its reports
(``results.tar.xz``): :func:`unpack_store` puts its ``results.sqlite`` back where the commands look for it.
Whatever cannot serve raises :class:`ArchiveError` with one line.
"""

from __future__ import annotations

import shutil
import tarfile
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

STORE = "results.sqlite"


class ArchiveError(Exception):
    """A path that is neither a results directory nor a tarball holding one; the message is one line."""


def _reason(exc: BaseException) -> str:
    """Why tarfile or the OS could not read an archive, in a few words (its first line)."""
    return (str(exc).splitlines() or [type(exc).__name__])[0].rstrip(":") or type(exc).__name__


@contextmanager
def results_dir(path: Path) -> Iterator[Path]:
    """The results directory at ``path``, or in the tarball at ``path`` (unpacked while the block runs)."""
    if path.is_dir():
        if not (path / STORE).is_file():
            raise ArchiveError(f"{path}: no {STORE} here: not a campaign's results directory")
        yield path
        return
    if not path.is_file():
        raise ArchiveError(f"{path}: no such file or directory")
    with tempfile.TemporaryDirectory(prefix="bench-results-") as scratch:
        try:
            with tarfile.open(path) as tar:
                tar.extractall(scratch, filter="data")
        except (tarfile.TarError, OSError) as exc:
            raise ArchiveError(f"{path}: not a results directory or a readable tar archive ({_reason(exc)})") from None
        found = sorted(Path(scratch).rglob(STORE), key=lambda p: len(p.parts))
        if not found:
            raise ArchiveError(f"{path}: the archive holds no {STORE}")
        yield found[0].parent


PACKED = ("results.tar.xz", "results.tar.gz", "results.tar")
"""The names a results directory's packed store goes by (a published campaign keeps its store so: a third of
the size, and no binary file that changes with every write)."""


def unpack_store(directory: Path) -> Path | None:
    """``directory``'s results.sqlite unpacked from the one packed tarball beside it (:data:`PACKED`), where it has no
    results.sqlite yet; None where it has one already or nothing to unpack it from."""
    if (directory / STORE).exists():
        return None
    packed = [directory / name for name in PACKED if (directory / name).is_file()]
    if not packed:
        return None
    if len(packed) > 1:
        raise ArchiveError(f"{directory}: {' and '.join(p.name for p in packed)}: keep one packed store")
    partial = directory / f".{STORE}.unpacking"
    try:
        with tarfile.open(packed[0]) as tar:
            members = sorted((m for m in tar.getmembers() if m.isfile() and Path(m.name).name == STORE),
                             key=lambda m: len(Path(m.name).parts))
            if not members:
                raise ArchiveError(f"{packed[0]}: the archive holds no {STORE}")
            source = tar.extractfile(members[0])
            assert source is not None
            with source, partial.open("wb") as target:
                shutil.copyfileobj(source, target, 1 << 20)
    except (tarfile.TarError, OSError, EOFError) as exc:
        partial.unlink(missing_ok=True)
        raise ArchiveError(f"{packed[0]}: cannot unpack its {STORE} ({_reason(exc)})") from None
    partial.replace(directory / STORE)
    return packed[0]
