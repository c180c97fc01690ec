"""benchmarks/loadgen_capacity.py, the load generator against bare Locust: it still runs, both senders send
Poisson arrivals at the rate asked, and a variant reaches the plugin's worker. How fast either is, is the
benchmark's to say (docs/benchmarks.md), not this test's."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import loadgen_cpu  # noqa: E402
import loadgen_variants  # noqa: E402


def test_bunched_counts_completions_within_a_millisecond_of_the_one_before() -> None:
    done = [5.0, 0.0, 0.0004, 0.0104, 0.0109, 0.05, 9.0]  # unsorted; 5.0 and 9.0 outside the window
    assert loadgen_cpu.bunched(done, 0.0, 1.0) == pytest.approx(2 / 4)
    assert loadgen_cpu.bunched([0.1], 0.0, 1.0) is None


def test_an_unknown_variant_is_refused_by_name() -> None:
    listed = "no-alarm, lead-20ms, alarm-default-priority, whole-read"
    with pytest.raises(SystemExit, match=rf"'no-such' is not one of {listed}$"):
        loadgen_variants.apply("no-such")


def test_the_whole_read_variant_reads_a_reply_of_floats_whole() -> None:
    """In its own process (a variant changes the process it is applied in): the reply reads the same, whole."""
    code = ("import loadgen_variants\n"
            "from bench_plugin.users import shapes\n"
            "body = b'{\"data\": [{\"index\": 0, \"embedding\": [1, 2]}]}'\n"
            "assert shapes._by_vector(body, None) is not None\n"
            "loadgen_variants.apply('whole-read')\n"
            "assert shapes._by_vector(body, None) is None\n"
            "print(shapes.decode_embeddings(body, lambda: None).data[0].size)\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT / "benchmarks", capture_output=True, text=True,
                          timeout=60)
    assert (done.returncode, done.stdout) == (0, "2\n"), done.stderr


def test_the_load_generator_benchmark_still_runs(tmp_path: Path) -> None:
    out = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "loadgen_capacity.py"), "--quick", "--parts", "cpu", "--only", "asr",
         "--rounds", "1", "--rate", "asr=50", "--variant", "no-alarm", "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    found = json.loads((out / "loadgen_capacity.json").read_text())
    assert found["errors"] == {}
    assert found["settings"]["bare_arrivals"] == "poisson" and found["settings"]["variant"] == "no-alarm"
    [asr] = found["cpu_per_request"]
    assert (asr["workload"], asr["bare_arrivals"], asr["variant"]) == ("asr", "poisson", "no-alarm")
    for side in ("bare", "plugin"):
        [window] = asr[side]
        expected = 50 * window["seconds"]
        # Poisson at 50/s over the window (about 1.7 s, so about 85 requests, spread about 9): both senders
        # complete what they were asked, neither closed-loop flat out nor stalled
        assert 0.5 * expected <= window["requests"] <= 1.5 * expected, (side, window)
        assert window["failed"] == 0 and 0.0 <= window["bunched"] <= 1.0
    report = (out / "loadgen_capacity.md").read_text()
    assert "bunched (bare / plugin)" in report and "plugin variant no-alarm" in report
    assert "one Poisson stream at R, as the plugin's arrivals" in report
