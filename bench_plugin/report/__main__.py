"""``python -m bench_plugin.report RESULTS_DIR``: (re)write report.html and report.md from a results folder.

A folder this bench-plugin cannot report (no summary.json or results.sqlite, a summary.json of
another schema version, a store of an unknown version) ends it with one line on stderr and exit
status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from bench_plugin.report.html import write_report
from bench_plugin.results.store import StoreError
from bench_plugin.results.summary import SummaryError


def main(argv: list[str] | None = None) -> int:
    """Write the report of each results folder given; print where it went and how long it took."""
    parser = argparse.ArgumentParser(prog="python -m bench_plugin.report", description=__doc__)
    parser.add_argument("results_dir", nargs="+", type=Path, help="folder holding results.sqlite and summary.json")
    args = parser.parse_args(argv)
    for folder in args.results_dir:
        start = time.perf_counter()
        try:
            path = write_report(folder)
        except (SummaryError, StoreError, FileNotFoundError) as exc:
            print(f"bench_plugin: error: {exc}", file=sys.stderr)
            return 2
        print(f"{path} ({time.perf_counter() - start:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
