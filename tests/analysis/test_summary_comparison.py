"""summary.json from a hand-written results store: goodput, devices charged and the comparison section.

The store is written with the real Recorder; every sample is chosen so the figures are known by hand:
the control ("exclusive") measures llm and embedding alone in turn on cuda:0 (two devices charged), the
shared arm runs both at once on cuda:0 (one device), two identical repeats each.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from stored_scenario import resolved

from bench_plugin.analysis.summary import devices_charged
from bench_plugin.report.outputs import summarise
from bench_plugin.results.placement import ClassPlacement, Placement
from bench_plugin.results.recorder import Recorder
from bench_plugin.results.samples import Sample
from bench_plugin.results.store import open_store, read_trials
from bench_plugin.scenario import Arm

SCENARIO = {
    "name": "hand", "sha256": "0" * 64, "path": "hand.yaml",
    "resolved": resolved(
        [{"name": "exclusive", "control": True, "sharing": "exclusive", "classes": {}},
         {"name": "shared", "control": False, "sharing": "time-slicing", "classes": {}}],
        {"llm": {"slo": {"p95_ms": 1000.0, "ttft_p95_ms": 200.0, "tpot_p95_ms": 50.0}, "error_budget": 0.1},
         "embedding": {"slo": {"p95_ms": 500.0, "ttft_p95_ms": None, "tpot_p95_ms": None}, "error_budget": 0.1}},
    ),
}
CONDITIONS = {"backend": {"backend": "local", "driver": "550.54.15",
                          "devices": [{"name": "cuda:0", "model": "NVIDIA H200"}]}}
START = 1000.0
DURATION = 10.0


def llm(trial: int, segment: int, seq: int, latency_ms: float, ok: bool = True) -> Sample:
    t0 = START + seq * 0.5
    return Sample("llm", trial, segment, 0, seq, 0, t0, t0, t0 + latency_ms / 1000, ok, first_token_s=t0 + 0.1,
                  output_tokens=9, error=None if ok else "http_500")


def embedding(trial: int, segment: int, seq: int, latency_ms: float) -> Sample:
    t0 = START + seq * 0.25
    return Sample("embedding", trial, segment, 0, seq, 0, t0, t0, t0 + latency_ms / 1000, True, inputs=4)


def segment(rec: Recorder, trial: int, seg: int, samples: list[Sample]) -> None:
    classes = sorted({s.workload for s in samples}, key=["llm", "embedding"].index)
    rec.segment_applied(trial, seg, classes, Placement(
        {name: ClassPlacement(url="http://x", device="cuda:0") for name in classes}))
    rec.stage_started(trial, seg, 0, "only", {n: {"llm": 1.0, "embedding": 2.0}[n] for n in classes},
                      {n: "poisson" for n in classes}, START)
    rec.add_samples(samples)
    rec.stage_ended(trial, seg, 0, START + DURATION, "completed")


@pytest.fixture
def summary(tmp_path: Path) -> dict[str, Any]:
    rec = Recorder(tmp_path / "results.sqlite")
    rec.set_meta("scenario", SCENARIO)
    rec.set_meta("conditions", CONDITIONS)
    position = 0
    for repeat in (1, 2):
        for arm in ("exclusive", "shared"):
            trial = position + 1
            rec.add_trial(trial, position, Arm(name=arm), repeat)
            rec.trial_started(trial)
            if arm == "exclusive":
                # llm: 10 requests, all 500 ms (TPOT 400/8 = 50 ms: at its limit); embedding: 20 x 100 ms
                segment(rec, trial, 0, [llm(trial, 0, i, 500.0) for i in range(10)])
                segment(rec, trial, 1, [embedding(trial, 1, i, 100.0) for i in range(20)])
            else:
                # llm: 8 within SLO, 1 slow (1500 ms), 1 error; embedding: 15 x 100 ms, 5 x 600 ms
                llms = [llm(trial, 0, i, 500.0) for i in range(8)] + [llm(trial, 0, 8, 1500.0),
                                                                      llm(trial, 0, 9, 500.0, ok=False)]
                embs = [embedding(trial, 0, i, 100.0 if i < 15 else 600.0) for i in range(20)]
                segment(rec, trial, 0, llms + embs)
            rec.trial_ended(trial, "completed")
            position += 1
    rec.set_meta("status", {"status": "completed", "reason": None})
    rec.close()
    out = json.loads(summarise(tmp_path).to_json())
    json.dumps(out, allow_nan=False)  # strict JSON: no NaN or Infinity anywhere
    return out


def test_goodput_and_slo_attainment_per_trial(summary: dict[str, Any]) -> None:
    shared = summary["trials"][1]["stages"][0]["classes"]
    assert (shared["llm"]["slo_met"], shared["llm"]["slo_attainment"]) == (8, 0.8)
    assert shared["llm"]["goodput_rps"] == pytest.approx(0.8)
    assert shared["embedding"]["goodput_rps"] == pytest.approx(1.5)
    assert summary["trials"][0]["stages"][0]["classes"]["llm"]["slo_attainment"] == 1.0


def test_devices_charged_per_trial(summary: dict[str, Any]) -> None:
    assert [(t["arm"], t["devices_charged"]) for t in summary["trials"]] == [
        ("exclusive", 2), ("shared", 1), ("exclusive", 2), ("shared", 1)]


def test_existing_keys_are_kept(summary: dict[str, Any]) -> None:
    assert list(summary) == ["schema", "scenario", "status", "overrides", "classes", "control", "request_sets",
                             "conditions", "slo", "embedding_format", "trials", "arms", "comparison",
                             "load_generators", "warm_start_from"]
    norm = summary["arms"]["shared"]["stages"][0]["classes"]["llm"]["normalised_throughput"]
    assert (norm["kind"], norm["mean"], norm["ci95"], norm["lo"], norm["hi"], norm["n"]) == ("ratio", 0.9, None, 0.9,
                                                                                          0.9, 2)
    latency = summary["arms"]["shared"]["stages"][0]["classes"]["llm"]["latency_p95_ms"]
    assert latency["kind"] == "value" and latency["lo"] == latency["hi"] == latency["mean"]


def test_comparison_figures_by_hand(summary: dict[str, Any]) -> None:
    comparison = summary["comparison"]
    assert comparison["control"] == "exclusive" and set(comparison["method"]) >= {"pairing", "boundary", "verdict"}
    shared = comparison["arms"]["shared"]
    assert shared["sharing"] == "time-slicing" and shared["is_control"] is False
    assert shared["devices_charged"]["mean"] == 1.0
    s = shared["stages"][0]
    llm, emb = s["classes"]["llm"], s["classes"]["embedding"]
    assert llm["normalised_throughput"]["mean"] == pytest.approx(0.9)
    assert llm["throughput_loss"]["mean"] == pytest.approx(0.1)
    assert llm["slowdown_p95"]["mean"] == pytest.approx(1100 / 500)  # P95 of 8 x 500 and 1 x 1500 ms
    assert llm["slowdown_ttft_p95"]["mean"] == pytest.approx(1.0)
    assert emb["slowdown_ttft_p95"] is None
    assert s["consolidation_gain"]["mean"] == pytest.approx(1.9)
    assert s["fairness"]["mean"] == pytest.approx(1.9**2 / (2 * (0.81 + 1.0)))
    assert s["goodput_per_device"]["mean"] == pytest.approx(2.3)
    assert s["control_goodput_per_device"]["mean"] == pytest.approx(1.5)
    assert s["goodput_per_device_ratio"]["mean"] == pytest.approx(2.3 / 1.5)
    assert s["goodput_per_device_ratio"]["call"] == "higher"
    kinds = {key: s[key]["kind"] for key in ("consolidation_gain", "fairness", "goodput_per_device",
                                             "control_goodput_per_device", "goodput_per_device_ratio")}
    assert kinds == {"consolidation_gain": "ratio", "fairness": "value", "goodput_per_device": "value",
                     "control_goodput_per_device": "value", "goodput_per_device_ratio": "ratio"}
    assert [llm[k]["kind"] for k in ("normalised_throughput", "throughput_loss", "slowdown_p95")] == [
        "ratio", "complement", "ratio"]
    assert s["paired_repeats"] == 2 and "geometric mean" in comparison["method"]["spread"]
    assert "inconclusive" in comparison["method"]["verdict"]
    assert (llm["meets_slo"], llm["within_error_budget"]) == (False, True)
    assert (emb["meets_slo"], emb["within_error_budget"]) == (False, True)
    assert s["verdict"] == "trade-off"
    assert shared["verdict"]["call"] == "trade-off" and shared["verdict"]["worth_it_up_to_stage"] is None
    assert shared["verdict"]["conditions"]["devices"] == ["cuda:0 (NVIDIA H200)"]
    assert shared["boundary"]["status"] == "below the lowest stage"


def test_the_control_carries_only_its_own_figures(summary: dict[str, Any]) -> None:
    control = summary["comparison"]["arms"]["exclusive"]
    assert control["is_control"] is True and control["verdict"] is None
    assert control["devices_charged"]["values"] == [2.0, 2.0]
    s = control["stages"][0]
    assert s["verdict"] is None and s["goodput_per_device_ratio"] is None and s["reasons"] == []
    assert {k for k, v in s["classes"]["llm"].items() if v is not None} == {
        "slo_attainment", "goodput_rps", "meets_slo", "within_error_budget", "breaches"}
    assert s["goodput_per_device"]["mean"] == pytest.approx(1.5)
    assert control["boundary"]["status"] == "not reached"


def test_mig_slices_of_one_gpu_are_charged_once_and_unnamed_devices_as_one(tmp_path: Path) -> None:
    rec = Recorder(tmp_path / "r.sqlite")
    rec.add_trial(1, 0, Arm(name="mig"), 1)
    rec.segment_applied(1, 0, ["llm", "embedding", "asr"], Placement({
        "llm": ClassPlacement(url="u", device="MIG-a", gpu="cuda:0"),
        "embedding": ClassPlacement(url="u", device="MIG-b", gpu="cuda:0"),
        "asr": ClassPlacement(url="u", device="cuda:1")}))
    rec.trial_started(1)
    rec.add_trial(2, 1, Arm(name="manual"), 1)
    rec.trial_started(2)
    rec.segment_applied(2, 0, ["llm", "asr"], Placement({"llm": ClassPlacement(url="u"),
                                                          "asr": ClassPlacement(url="v")}))
    rec.close()
    with open_store(tmp_path / "r.sqlite") as db:
        trials = {t.id: t for t in read_trials(db)}
    assert (devices_charged(trials[1]), devices_charged(trials[2])) == (2, 1)
