"""Adaptive boundary search through a real campaign, against a synthetic server of known capacity.

The server serves two requests at once, 20 ms each (100 req/s); beyond that requests queue and the
60 ms P95 SLO breaks. How close the search lands depends on this machine's load, so the test checks
what must hold whatever the noise: every probe was decided exactly as the probe rule says on its own
samples (extensions pooled), the stages followed bracket-then-bisect and the found boundary was held
for a longer stage, the search ended within its precision, below the server's capacity. A load generator
that falls behind from the second probe on leaves the probe that fails unjudged and the search stopped there.

Every test here runs in the serial phase (tools/run_tests.py), alone: each needs its probes judged, against a
server whose answers must come on time. Beside the suite's other lanes (a compose stack starting its servers,
Locust masters and workers) the host held the generator back stage after stage at 10 req/s, and the server
itself answered late: a search stopped unjudged, or failed a load it holds on a quiet host.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from harness import ROOT, holding_locustfile, run_locust, scenario_variant

from bench_plugin.analysis.objectives import ClassObjectives
from bench_plugin.analysis.probe import SET_ASIDE_LIMIT, decide, extension_futile, judge_lag, taken_as_passed
from bench_plugin.results.store import open_campaign
from bench_plugin.results.summary import ProbeDecision
from bench_plugin.results.words import Phase, ProbeOutcome
from bench_plugin.scenario import Slo

pytestmark = [pytest.mark.slow, pytest.mark.serial]

CAPACITY_SCALE = 10.0  # 100 req/s over a mix of 10 req/s


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    results = tmp_path_factory.mktemp("search") / "results"
    done = run_locust(["-f", "locustfiles/mixed.py", "--scenario", str(ROOT / "scenarios" / "search-calibration.yaml"),
                       "--results-dir", str(results)], timeout=600)
    assert done.returncode == 0, done.stdout[-3000:]
    return results, json.loads((results / "summary.json").read_text())


def events(results: Path, kind: str, trial: int) -> list[dict[str, Any]]:
    """The details of ``trial``'s timeline events of ``kind``, in time order."""
    with open_campaign(results / "results.sqlite") as reader:
        return [event.detail for event in reader.events(kind, trial)]


def test_each_probe_is_decided_by_its_own_samples(campaign: tuple[Path, dict[str, Any]]) -> None:
    """Every probe's decision is what the probe rule gives on the samples of its stages (first run and
    extensions), and the search took it for what the rule says: a decision, or the point estimate."""
    results, summary = campaign
    spec = ClassObjectives(Slo(p95_ms=60.0), 0.01)
    for trial in summary["trials"]:
        steps = events(results, "search_step", trial["id"])
        with open_campaign(results / "results.sqlite") as reader:
            samples = reader.samples(trial["id"])
        ran = [i for step in steps for i in step["decision"]["stages"] + step["decision"]["set_aside"]]
        assert sorted(ran) == list(range(len(trial["stages"]))), "every stage belongs to exactly one probe"
        for step in steps:
            decision = ProbeDecision.model_validate(step["decision"])
            mine = [s for s in samples if s.segment == step["segment"] and s.stage in decision.stages]
            if decision.note is None:  # a stage set aside (its load generator behind) is not among those pooled
                again = judge_lag(decide(mine, {"embedding": spec}, decision.confidence, decision.stages), None)
                assert again.model_copy(update={"set_aside": decision.set_aside}) == decision, step
                assert not set(decision.set_aside) & set(decision.stages)
            assert step["passed"] == taken_as_passed(decision)
            assert (len(decision.stages) == 1 or decision.outcome == ProbeOutcome.UNDECIDED
                    or decision.stages[-1] == step["stage"])
        probe_of = {i: p for p in trial["probes"] for i in p["stages"] + p["set_aside"]}
        for stage in trial["stages"]:
            assert stage["offered"] == {"embedding": pytest.approx(10.0 * probe_of[stage["index"]]["scale"])}


def test_bracket_bisect_and_hold_to_the_stated_precision(campaign: tuple[Path, dict[str, Any]]) -> None:
    results, summary = campaign
    for trial in summary["trials"]:
        steps = events(results, "search_step", trial["id"])
        (result,) = events(results, "search_result", trial["id"])
        probes = [s for s in steps if s["phase"] == "probe"]
        holds = [s for s in steps if s["phase"] == "sustain"]
        assert probes[0]["scale"] == 1.0
        assert result["runs"] == len(trial["stages"]), "extensions and holds count as stage-runs"
        assert len(probes) < result["fixed_sweep_runs"], "fewer loads probed than an even sweep runs"
        if result["status"] != "found":
            continue
        assert result["lo"] < result["hi"] and (result["hi"] - result["lo"]) / result["hi"] <= 0.15
        assert result["lo"] <= result["estimate"] <= result["hi"]
        assert result["hi"] <= CAPACITY_SCALE * 1.1, "past the server's capacity the queue must break the SLO"
        assert holds, "a found boundary is held"
        assert result["sustain"] in ("confirmed", "undecided", "failed")
        assert (result["sustain"] != "failed") == holds[-1]["passed"]
        assert holds[-1]["scale"] == (result["hi"] if result["sustain"] == "failed" else result["lo"])
        last_hold = [p for p in trial["probes"] if p["phase"] == "sustain"][-1]  # after two failed holds, probes follow
        held_stage = trial["stages"][last_hold["stages"][0]]
        assert held_stage["duration_s"] == pytest.approx(9.0), "held for three stage durations"


def test_the_report_gives_the_boundary_and_the_cost(campaign: tuple[Path, dict[str, Any]]) -> None:
    _, summary = campaign
    arm = summary["comparison"]["arms"]["synthetic"]
    assert arm["search"]["scale"]["n"] == 2 and len(arm["search"]["per_repeat"]) == 2
    assert all(r["runs"] >= 2 for r in arm["search"]["per_repeat"])
    if arm["boundary"]["status"] == "found":
        assert arm["boundary"]["text"].startswith("boundary at embedding")


def test_a_probe_its_load_generator_fell_behind_in_stops_the_search_unjudged(tmp_path: Path) -> None:
    """The first probe (30 req/s for 2 s: 60 requests, enough to show a pass) passes; from the second stage on, the
    generator's loop is busy 95% of the time, so requests leave and are read up to 95 ms late against a 60 ms SLO.
    Whatever it measures there, the first probe that does not pass sets its stage aside twice, runs again as late,
    and is not judged; the boundary is said to be at least the last load that passed (none, where a busy host left
    the first probe undecided or failed it, and the search went below it)."""
    locustfile = holding_locustfile(tmp_path, "hogged", "hog", from_stage=1)
    scenario = scenario_variant(tmp_path, "search-calibration", repeats=1, search={
        "mix": {"embedding": 30}, "start_scale": 1, "max_scale": 32, "precision": 0.15, "stage_duration_s": 2,
        "max_extensions": 0})
    results = tmp_path / "results"
    done = run_locust(["-f", str(locustfile), "--scenario", str(scenario), "--results-dir", str(results)],
                      timeout=300, report=True)
    assert done.returncode == 0, done.stdout[-3000:]
    summary = json.loads((results / "summary.json").read_text())
    (trial,) = summary["trials"]
    (result,) = trial["search"]
    probes = trial["probes"]
    *judged, last = probes
    assert judged and judged[0]["scale"] == 1.0, probes
    first = judged[0]
    # on a host busy enough (other processes at 1.7-1.8 of 2 cores, seen in CI) the first stage may decide nothing,
    # or fail, the server answering late too while its generator kept up: the search then goes down from x1, and the
    # probe below it is the one held up
    assert first["passed"] or trial["stages"][first["stages"][0]]["host_busy"], probes
    assert all(p["decision"]["lag_judged"] for p in probes)
    for probe in judged:  # judged: the generator kept up (or the selfcheck excused it), or it passed even so
        limited = any(trial["stages"][i]["generator_limited"] for i in probe["stages"])
        assert probe["decision"]["outcome"] != "generator-limited" and (probe["passed"] or not limited), probe
    assert last["decision"]["outcome"] == "generator-limited" and not last["passed"]
    assert last["scale"] > 1.0 if first["passed"] else last["scale"] < 1.0, last
    aside = last["set_aside"]
    assert len(aside) == SET_ASIDE_LIMIT and last["decision"]["set_aside"] == aside, "set aside twice"
    assert max(aside) < last["stages"][0], "and run again"
    # The hog wants its core: CPU-bound, where the process got (or its loop waited for) 0.9 of one. Where the
    # hypervisor took the core from it instead (steal is neither CPU time nor a wait the guest sees: 0.39 cores
    # measured once in a CI run), the stall monitor's blocks make it stalled, or, on a host busy over the stage,
    # held back: either way generator-limited.
    lapses = ("CPU-bound: ", "stalled: ", "held back: ")
    for i in aside:
        assert trial["stages"][i]["generator_limited"].startswith(lapses), trial["stages"][i]
    stage = trial["stages"][last["stages"][-1]]
    assert stage["generator_limited"].startswith(lapses), stage
    assert last["decision"]["note"] == stage["generator_limited"]
    fails = [p["scale"] for p in judged if not p["passed"]]
    hi = min(fails) if fails else None
    assert result["status"] == "generator-limited" and result["hi"] == hi
    assert result["lo"] == max((p["scale"] for p in judged if p["passed"] and (hi is None or p["scale"] < hi)),
                               default=None)
    assert result["stopped"] == f"the load generator fell behind at x{last['scale']:.4g} ({stage['generator_limited']})"
    assert sum(len(p["stages"]) + len(p["set_aside"]) for p in probes) == len(trial["stages"]), \
        "nothing ran after the unjudged probe"
    assert result["runs"] == len(trial["stages"]), "a stage set aside counts as a run"
    boundary = summary["comparison"]["arms"]["synthetic"]["boundary"]
    assert boundary["status"] == "generator-limited" and boundary["limiting"] == []
    markdown = (results / "report.md").read_text()
    assert "the load generator fell behind first" in markdown and "Next: rerun with more load generators" in markdown


def test_a_stage_its_load_generator_fell_behind_in_is_set_aside_and_run_again(tmp_path: Path) -> None:
    """The generator's loop is busy 95% of the time in the second stage only (a lapse, as a stalled virtual machine
    makes): the probe that stage belongs to (x2, 30 req/s for 4 s against a server of 100 req/s; or x1's extension,
    where a busy host left x1 undecided) fails on the generator's delays, so its stage is set aside and run again;
    the rerun, sent on time, passes, and the search goes on past it as if the lapse had not happened. The set-aside
    stage stays on record, flagged, and counts as a run. (Where the host held the generator back in a stage beside
    the lapse too, the probe may have set aside all it may before its rerun: a late rerun is then pooled, and its
    pass stands, as the rule says.)"""
    locustfile = holding_locustfile(tmp_path, "lapse", "hog", from_stage=1, until_stage=2)
    scenario = scenario_variant(tmp_path, "search-calibration", repeats=1, search={
        "mix": {"embedding": 15}, "start_scale": 1, "max_scale": 3, "precision": 0.5, "stage_duration_s": 4,
        "max_extensions": 1, "sustain_s": 0})
    results = tmp_path / "results"
    done = run_locust(["-f", str(locustfile), "--scenario", str(scenario), "--results-dir", str(results)],
                      timeout=300)
    assert done.returncode == 0, done.stdout[-3000:]
    summary = json.loads((results / "summary.json").read_text())
    (trial,) = summary["trials"]
    (result,) = trial["search"]
    probes = trial["probes"]
    # the lapse's probe; on a busy host (the suite's lanes side by side) another stage's generator may fall behind
    # too, and that stage is set aside by the same rule: allowed, where the stage is flagged for it
    (lapsed,) = [p for p in probes if 1 in p["set_aside"]]
    others = [i for p in probes if p is not lapsed for i in p["set_aside"]]
    assert all(trial["stages"][i]["generator_limited"] for i in others), others
    # the lapse is one of its probe's set-asides: a stage before or after it at the same load may be one the busy
    # host made, flagged as well
    assert lapsed["scale"] in (1.0, 2.0) and 1 in lapsed["set_aside"] and 1 not in lapsed["stages"], lapsed
    assert all(trial["stages"][i]["generator_limited"] for i in lapsed["set_aside"]), lapsed
    # the rerun came after it at the same load (an extension may follow where a busy host left the rerun undecided;
    # where the lapse was x1's extension, x1's own first stage, before it, is one of the probe's too)
    assert lapsed["stages"] and max(lapsed["stages"]) > 1 and lapsed["passed"], lapsed
    assert lapsed["decision"]["set_aside"] == lapsed["set_aside"], lapsed
    # the hog's loop is busy 95% of the stage: CPU-bound where it got its core, stalled or held back where the
    # host took it (as in the test above)
    lapse = trial["stages"][1]["generator_limited"] or ""
    assert lapse.startswith(("CPU-bound: ", "stalled: ", "held back: ")), lapse
    # a stage pooled with the generator behind is one the rule kept: run after the probe had set aside all it may
    # (the probe taken as passed stands, as asserted above)
    for i in lapsed["stages"]:
        if trial["stages"][i]["generator_limited"]:
            assert len(lapsed["set_aside"]) == SET_ASIDE_LIMIT and max(lapsed["set_aside"]) < i, (i, lapsed)
    later = probes[probes.index(lapsed) + 1:]
    assert later and later[0]["scale"] == min(2 * lapsed["scale"], 3.0), "the search went on past the lapse"
    assert result["status"] != "generator-limited" and result["runs"] == len(trial["stages"]), result
    with open_campaign(results / "results.sqlite") as reader:
        (step,) = [e.detail for e in reader.events("search_step", trial["id"]) if e.detail["scale"] == lapsed["scale"]]
    assert step["decision"]["set_aside"] == lapsed["set_aside"]


def search_campaign(tmp_path: Path, repeats: int, search: dict[str, Any], *args: str,
                    **changes: Any) -> tuple[Path, list[Any]]:
    """A variant of search-calibration with ``search`` (and other top-level ``changes``) run to its end, with more
    command-line ``args``: its results directory and its summary's trials."""
    scenario = scenario_variant(tmp_path, "search-calibration", repeats=repeats, search=search, **changes)
    results = tmp_path / "results"
    done = run_locust(["-f", "locustfiles/mixed.py", "--scenario", str(scenario), "--results-dir", str(results),
                       *args], timeout=300)
    assert done.returncode == 0, done.stdout[-3000:]
    return results, json.loads((results / "summary.json").read_text())["trials"]


def test_a_probe_sized_by_requests_runs_as_long_as_its_rate_needs(tmp_path: Path) -> None:
    """``stage_requests: 60`` with 2-s stages and a 6-s hold: the probe at 15 req/s runs 4 s (60 requests), those at
    30 and 60 req/s the 2-s floor, the hold its 6 s; every stage is planned, and ran, that long. A P95 SLO of 2 s,
    which the server (20 ms a request, 100 req/s) keeps at every load probed even on a host the suite's other lanes
    keep busy, makes every probe pass, so the search doubles to its maximum whatever the host's noise."""
    data = yaml.safe_load((ROOT / "scenarios" / "search-calibration.yaml").read_text())
    data["classes"]["embedding"]["slo"] = {"p95_ms": 2000}
    _, (trial,) = search_campaign(tmp_path, 1, {
        "mix": {"embedding": 15}, "start_scale": 1, "max_scale": 4, "precision": 0.5, "stage_duration_s": 2,
        "stage_requests": 60, "max_extensions": 0, "sustain_s": 6}, classes=data["classes"])
    planned = {stage["index"]: stage["planned_s"] for stage in trial["stages"]}
    ran = {stage["index"]: stage["duration_s"] for stage in trial["stages"]}
    seen = []
    for probe in trial["probes"]:
        want = 6.0 if probe["phase"] == "sustain" else min(max(60 / (15 * probe["scale"]), 2.0), 6.0)
        for index in probe["stages"]:
            assert planned[index] == pytest.approx(want) and ran[index] == pytest.approx(want, abs=0.5), (probe, index)
        seen.append((probe["phase"], probe["scale"], want))
    assert seen[:3] == [("probe", 1.0, 4.0), ("probe", 2.0, 2.0), ("probe", 4.0, 2.0)], seen


def test_a_warm_repeat_holds_the_earlier_lo_first_and_never_holds_a_scale_twice(tmp_path: Path) -> None:
    """Two repeats with holds and warm start: repeat 2's first stage is the hold of repeat 1's lo, and no scale is held
    twice; where repeat 2 ends at that lo, the opening hold is its hold: that scale ran once, as the hold."""
    _, (one, two) = search_campaign(tmp_path, 2, {
        "mix": {"embedding": 30}, "start_scale": 1, "max_scale": 8, "precision": 0.5, "stage_duration_s": 2,
        "sustain_s": 4, "max_extensions": 1, "warm_start": True})
    (first,), (second,) = one["search"], two["search"]
    assert first["status"] in ("found", "above the maximum") and first["lo"] is not None, first
    opening = two["probes"][0]
    assert (opening["phase"], opening["scale"]) == ("sustain", first["lo"]), two["probes"]
    assert two["stages"][opening["stages"][0]]["planned_s"] == 4.0
    held = [p["scale"] for p in two["probes"] if p["phase"] == "sustain"]
    assert len(held) == len(set(held)), "no scale is held twice"
    if second["lo"] == first["lo"] and second["status"] == first["status"]:  # it ended where repeat 1 did
        assert second["sustain"] == ("confirmed" if opening["decision"]["outcome"] == "pass" else "undecided"), two
        assert [p for p in two["probes"] if p["scale"] == first["lo"]] == [opening], "its lo run once: as the hold"


@pytest.mark.parametrize("holds", [False, True], ids=["probes", "holds-too"])
def test_an_extension_not_expected_to_decide_its_probe_is_skipped(tmp_path: Path, holds: bool) -> None:
    """A server that makes 5% of its requests slow at any load: each probe's P95 sits on its allowance, which no
    number of extensions can decide. With ``skip_futile_extensions`` such a probe runs once and is decided on its
    point estimate, marked ``futile``; every probe is decided and skipped exactly as the rule says on its samples.
    The boundary's hold runs its extensions whatever they promise, unless ``skip_futile_holds`` (``holds``) puts it
    under the same rule."""
    data = yaml.safe_load((ROOT / "scenarios" / "search-calibration.yaml").read_text())
    embedding = data["classes"]["embedding"]
    embedding["server"]["command"] = [*embedding["server"]["command"][:-4], "--latency-ms", "5", "--max-concurrency",
                                      "8", "--slow-fraction", "0.05", "--slow-extra-ms", "300", "--seed", "3"]
    embedding["slo"] = {"p95_ms": 100}
    results, (trial,) = search_campaign(tmp_path, 1, {
        "mix": {"embedding": 20}, "start_scale": 1, "max_scale": 8, "precision": 0.5, "stage_duration_s": 3,
        "max_extensions": 2, "sustain_s": 3, "skip_futile_extensions": True, "skip_futile_holds": holds},
        classes=data["classes"])
    with open_campaign(results / "results.sqlite") as reader:
        samples = reader.samples(trial["id"])
    spec = {"embedding": ClassObjectives(Slo(p95_ms=100.0), 0.01)}
    futile = 0
    for probe in trial["probes"]:
        decision = ProbeDecision.model_validate(probe["decision"])
        if decision.note is not None:  # rolled back, or its load generator fell behind: not the rule's to judge
            continue
        mine = [s for s in samples if s.stage in decision.stages]
        again = judge_lag(decide(mine, spec, decision.confidence, decision.stages), None)
        hold = probe["phase"] == Phase.SUSTAIN
        expected = (holds or not hold) and again.outcome == ProbeOutcome.UNDECIDED and len(decision.stages) <= 2 \
            and extension_futile(again, len(decision.stages), 3 - len(decision.stages))
        if hold and not holds and again.outcome == ProbeOutcome.UNDECIDED:
            assert len(decision.stages) == 3, ("an undecided hold runs both its extensions", probe)
        assert decision.futile == expected, probe
        assert again.model_copy(update={"futile": expected, "set_aside": decision.set_aside}) == decision, probe
        assert probe["passed"] == taken_as_passed(decision)
        for ran in range(1, len(decision.stages)):  # each extension run: the runs before it left it undecided, and
            before = [s for s in samples if s.stage in decision.stages[:ran]]  # (where the rule applies) not futile
            earlier = decide(before, spec, decision.confidence, decision.stages[:ran])
            assert earlier.outcome == ProbeOutcome.UNDECIDED, (ran, probe)
            assert not ((holds or not hold) and extension_futile(earlier, ran, 3 - ran)), ("extended, futile", probe)
        futile += decision.futile
        assert not decision.futile or len(decision.stages) < 3, "a futile probe ran fewer than its three runs"
    assert futile >= 1, trial["probes"]
    assert any(p["phase"] == Phase.SUSTAIN for p in trial["probes"]), "the boundary was held"


def test_a_campaign_started_from_an_earlier_ones_brackets_holds_their_lo_first(tmp_path: Path) -> None:
    """``--warm-start-from``: a second campaign's first repeat starts each ray at the bracket the first campaign left
    it in (with holds: the hold of its ``lo`` first), records where it started, says so in summary.md, and is
    refused in one line where the earlier campaign has no store or no search of the same ray and rates."""
    search = {"mix": {"embedding": 30}, "start_scale": 1, "max_scale": 8, "precision": 0.5, "stage_duration_s": 2,
              "sustain_s": 4, "max_extensions": 1}
    for name in ("first", "second", "other"):
        (tmp_path / name).mkdir()
    first, (one,) = search_campaign(tmp_path / "first", 1, search)
    (ended,) = one["search"]
    assert ended["lo"] is not None, ended
    results, (trial,) = search_campaign(tmp_path / "second", 1, search, "--warm-start-from", str(first))
    opening = trial["probes"][0]
    assert (opening["phase"], opening["scale"]) == ("sustain", ended["lo"]), trial["probes"]
    summary = json.loads((results / "summary.json").read_text())
    assert summary["warm_start_from"]["directory"] == str(first)
    assert summary["warm_start_from"]["brackets"] == [{"arm": "synthetic", "classes": ["embedding"], "ray": "mix",
                                                       "mix": {"embedding": 30.0}, "lo": ended["lo"],
                                                       "hi": ended["hi"]}]
    assert "searches started from campaign search-calibration" in (results / "summary.md").read_text()

    refused = [(tmp_path, "no results.sqlite there"),
               (first, "none of its searches is one of this scenario's")]
    for given, why in refused:
        other = scenario_variant(tmp_path / "other", "search-calibration", repeats=1,
                                 search={**search, "mix": {"embedding": 40}})
        done = run_locust(["-f", "locustfiles/mixed.py", "--scenario", str(other), "--results-dir",
                           str(tmp_path / "refused"), "--warm-start-from", str(given)], timeout=120)
        assert done.returncode == 2 and why in done.stdout, done.stdout[-2000:]
        assert f"--warm-start-from {given}: " in done.stdout and "Traceback" not in done.stdout

