"""``bench-plugin report`` on a damaged results folder, fuzzed: it writes the reports or refuses in one line.

Hypothesis damages a copy of a real results folder (conftest.make_results: written through the Recorder and
the summary, as a campaign writes them) in the ways a disk, a copy or a hand edit do: a cell of any table set
to a value of another type (text where a number goes, NULL, JSON that is not, a number where JSON goes),
results.sqlite cut short or with bytes overwritten, summary.json or scenario.resolved.json replaced. Then
``bench-plugin report DIR`` runs in this process. It must return 0 (the damage did not matter) or 2 with
``bench-plugin: error:`` lines each naming the folder or file, and never raise. Derandomized: the same cases
on every machine.
"""

from __future__ import annotations

import contextlib
import io
import shutil
import sqlite3
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench_plugin.cli import main

pytestmark = pytest.mark.cpu_bound

FUZZ = settings(max_examples=20, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
TABLES = ("meta", "trials", "segments", "stages", "samples", "events", "telemetry")

values = st.one_of(st.none(), st.integers(min_value=-(2**63), max_value=2**63 - 1), st.floats(allow_nan=True),
                   st.text(max_size=12), st.binary(max_size=8),
                   st.sampled_from(["{", "[]", "{}", "null", '"x"', "NaN", "1e999", '{"a": 1}', "[1, 2]"]))


@pytest.fixture
def base(make_campaign: Callable[..., Path]) -> Path:
    """A small real results folder (this folder's conftest.py), without its reports (each example writes them);
    made once per test, copied for each example."""
    results = make_campaign(comparison="analysis")
    for name in ("report.html", "report.md"):
        (results / name).unlink(missing_ok=True)
    return results


def report(directory: Path) -> tuple[int, str]:
    """``bench-plugin report DIR`` in this process: its exit status and what it wrote to stderr."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(["report", str(directory)])
    return code, err.getvalue()


def judged(directory: Path) -> None:
    code, err = report(directory)
    if code == 0:
        return
    assert code == 2, err
    lines = err.splitlines()
    assert lines and all(line.startswith("bench-plugin: error: ") and str(directory) in line for line in lines), err


@contextlib.contextmanager
def copy_of(base: Path) -> Any:
    with tempfile.TemporaryDirectory() as scratch:
        target = Path(scratch) / "results"
        shutil.copytree(base, target)
        yield target


@FUZZ
@given(table=st.sampled_from(TABLES), pick=st.integers(min_value=0, max_value=10**6),
       column=st.integers(min_value=0, max_value=40), value=values)
def test_a_cell_of_another_type(base: Path, table: str, pick: int, column: int, value: Any) -> None:
    with copy_of(base) as results:
        db = sqlite3.connect(results / "results.sqlite")
        columns = [row[1] for row in db.execute(f"PRAGMA table_info({table})")]
        rowids = [rowid for (rowid,) in db.execute(f"SELECT rowid FROM {table}")]
        try:
            if rowids:
                db.execute(f"UPDATE {table} SET {columns[column % len(columns)]}=? WHERE rowid=?",
                           (value, rowids[pick % len(rowids)]))
                db.commit()
        except sqlite3.IntegrityError:  # the schema itself refuses this damage (a NOT NULL column): no case
            return
        finally:
            db.close()
        judged(results)


@FUZZ
@given(cut=st.floats(min_value=0, max_value=1), at=st.floats(min_value=0, max_value=1),
       junk=st.binary(min_size=1, max_size=64), truncate=st.booleans())
def test_a_store_cut_short_or_overwritten(base: Path, cut: float, at: float, junk: bytes, truncate: bool) -> None:
    with copy_of(base) as results:
        store = results / "results.sqlite"
        data = bytearray(store.read_bytes())
        if truncate:
            data = data[:int(len(data) * cut)]
        else:
            start = int(len(data) * at)
            data[start:start + len(junk)] = junk
        store.write_bytes(bytes(data))
        judged(results)


@FUZZ
@given(name=st.sampled_from(["summary.json", "scenario.resolved.json"]),
       text=st.one_of(st.text(max_size=60), st.sampled_from(["{}", "[]", "null", '{"schema": 1}', "{" * 5000])))
def test_a_summary_or_scenario_file_replaced(base: Path, name: str, text: str) -> None:
    with copy_of(base) as results:
        (results / name).write_text(text, encoding="utf-8", errors="surrogateescape")
        judged(results)
