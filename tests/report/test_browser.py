"""report.html of a REAL short campaign, opened in headless Chromium as a person would open it.

The campaign runs once per module through the real `locust --headless` command with the reference
servers; the page is opened by tests/browser/check_report.mjs (playwright-core driving Debian's chromium,
never a downloaded browser), which records console errors, page errors and every network request,
counts the data marks in each plot, reads every percentile cell, and takes a full-page screenshot
and screenshots of the verdict section and of one plot. They are kept in tests/report/artifacts/
(report.png, verdict.png, plot-latency-<class>.png; git-ignored) and named in the test's
record_property, so CI and people can look at what the page looked like.

CI installs node, chromium and the npm package; a missing one FAILS the test, naming what to install.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from harness import Campaign, copy_of

from bench_plugin.report.html import write_report

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent
BROWSER = HERE.parent / "browser"
ARTIFACTS = HERE / "artifacts"
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
EXPECTED = ["answer-picture", "latency-llm", "latency-embedding", "latency-asr", "llm-streaming", "throughput",
            *[f"timeline-trial-{i}" for i in (1, 2, 3, 4)]]


def _tools() -> str:
    """The node binary; fails loudly, naming the install step, when a piece is missing."""
    node = shutil.which("node")
    missing = []
    if node is None:
        missing.append("node (apt-get install -y nodejs npm)")
    if not Path(CHROMIUM).exists():
        missing.append(f"chromium at {CHROMIUM} (apt-get install -y chromium)")
    if not (BROWSER / "node_modules" / "playwright-core").is_dir():
        missing.append(f"playwright-core (cd {BROWSER.relative_to(HERE.parent.parent)} && npm ci)")
    if missing:
        pytest.fail("the browser test needs: " + "; ".join(missing), pytrace=False)
    assert node is not None
    return node


@pytest.fixture(scope="module")
def report(short_campaign: Campaign, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_report(copy_of(short_campaign, tmp_path_factory.mktemp("browser")))


@pytest.fixture(scope="module")
def seen(report: Path) -> dict[str, Any]:
    node = _tools()
    shot = report.parent / "report.png"
    shots = report.parent / "shots"
    shots.mkdir()
    done = subprocess.run([node, str(BROWSER / "check_report.mjs"), str(report), str(shot), str(shots)], cwd=BROWSER,
                          capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, f"check_report.mjs failed ({done.returncode}):\n{done.stderr[-3000:]}"
    result: dict[str, Any] = json.loads(done.stdout)
    ARTIFACTS.mkdir(exist_ok=True)
    shutil.copyfile(shot, ARTIFACTS / "report.png")
    for name, path in (result.get("shots") or {}).items():
        kept = ARTIFACTS / Path(path).name
        shutil.copyfile(path, kept)
        result["shots"][name] = str(kept)
    (ARTIFACTS / "report.json").write_text(json.dumps(result, indent=2), encoding="utf-8")
    return result


def test_page_opens_without_errors_or_network(seen: dict[str, Any], record_property: pytest.RecordProperty) -> None:
    record_property("screenshot", str(ARTIFACTS / "report.png"))
    assert seen["consoleErrors"] == []
    assert seen["pageErrors"] == []
    assert seen["requests"] == [], "the page asked the network for something"
    assert seen["title"] == "GPU sharing report: short"
    assert seen["headings"][:3] == ["The answer", "Verdict", "Latency vs offered load"]  # the answer opens it
    assert {"Trial timelines", "Errors"} <= set(seen["headings"])


def test_every_expected_plot_is_drawn_with_data(seen: dict[str, Any]) -> None:
    plots = {p["id"]: p for p in seen["plots"]}
    missing = [p for p in EXPECTED if p not in plots]
    assert not missing, f"plots missing: {missing}; the page has {list(plots)}"
    for plot_id in EXPECTED:
        plot = plots[plot_id]
        assert plot["marks"] > 0, f"{plot_id} draws no data"
        assert plot["width"] > 600 and plot["height"] > 200, (plot_id, plot["width"], plot["height"])
        assert plot["caption"], f"{plot_id} has no sentence saying what to read in it"
    # Every request of the short campaign is drawn in its trial's timeline: dozens of points each.
    for trial in (1, 2, 3, 4):
        assert plots[f"timeline-trial-{trial}"]["marks"] >= 20


def test_screenshot_is_kept_as_an_artifact(seen: dict[str, Any]) -> None:
    shot = ARTIFACTS / "report.png"
    assert shot.stat().st_size > 50_000
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_every_p95_cell_shows_its_sample_count(seen: dict[str, Any]) -> None:
    cells = [c for c in seen["p95Cells"] if c["text"] != "-"]
    assert len(cells) >= 20, "the page shows fewer P95 cells than the short campaign has"
    missing = [c for c in cells if not re.search(r"n=\d+", c["text"])]
    assert not missing, f"P95 cells without a sample count: {missing[:5]}"
    marked = seen["percentiles"]
    assert {c["pct"] for c in marked} >= {"P50", "P95", "TTFT P95", "TPOT P95"}
    assert all(re.search(r"n=\d+", c["text"]) and c["n"] and c["title"] for c in marked)
    # One from too few samples to be bounded is in italics, marked and explained; a bounded one is not.
    for cell in marked:
        assert (cell["style"] == "italic") == cell["low"] == ("\u2020" in cell["text"]), cell
        if cell["low"]:
            assert "to be bounded" in cell["title"], cell


def test_screenshots_of_the_verdict_and_a_plot_are_kept(seen: dict[str, Any],
                                                        record_property: pytest.RecordProperty) -> None:
    shots = seen["shots"]
    assert set(shots) == {"verdict", "plot"}
    assert Path(shots["verdict"]).name == "verdict.png" and Path(shots["plot"]).name.startswith("plot-latency-")
    for name, path in shots.items():
        record_property(f"screenshot_{name}", path)
        data = Path(path).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5_000, (name, len(data))
