"""launch/resume.py on stores written by the Recorder: what a directory must hold, what must match, what is kept.

The whole path through `locust --resume` (SIGINT, SIGKILL, an adaptive search, each refusal) is in
test_resume_e2e.py; these are the checks and the plan on their own, each a few milliseconds.
"""

from __future__ import annotations

import copy
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from bench_plugin.launch.resume import (
    Recorded,
    ResumeRefused,
    begin,
    confirm,
    differences,
    options_for,
    other_units,
    plan,
    prepare,
    provenance_differences,
    read_campaign,
)
from bench_plugin.results.placement import Placement
from bench_plugin.results.provenance import package_versions, source_digest
from bench_plugin.results.record import CampaignRecord
from bench_plugin.results.recorder import Recorder
from bench_plugin.results.store import STORE_VERSION
from bench_plugin.results.summary import Overrides, ProbeDecision, Provenance
from bench_plugin.results.timeline import SearchStep
from bench_plugin.run.schedule import Done, KeptProbe, plan_trials
from bench_plugin.scenario import Scenario

SHA = "5e" * 32
H200 = {"name": "cuda:0", "model": "NVIDIA H200", "uuid": "GPU-aaaa", "memory_mib": 143771}
CONDITIONS: dict[str, Any] = {
    "host": "gpu-box", "python": "3.11.2", "packages": {"locust": "2.47.0", "torch": "2.6.0"},
    "source_digest": "375b1b644aca", "command": ["locust"],
    "backend": {"backend": "local", "devices": [H200], "driver": "570.1", "cuda_driver": 12080},
}


def scenario(repeats: int = 2) -> Scenario:
    return Scenario.model_validate({
        "name": "s", "repeats": repeats,
        "classes": {"embedding": {"model": "m", "server": {"kind": "command", "command": ["x"]},
                                  "slo": {"p95_ms": 100}}},
        "arms": [{"name": "a", "control": True, "sharing": "time-slicing"}],
        "stages": [{"duration_s": 1, "load": {"embedding": 1}}, {"duration_s": 1, "load": {"embedding": 2}}],
    })


def store(directory: Path, *, status: str | None = None, trial_2: str = "cut") -> Path:
    """A campaign's directory: trial 1 ended; trial 2 ``cut`` in its segment's second stage, or ``ended``."""
    directory.mkdir(parents=True, exist_ok=True)
    rec = Recorder(directory / "results.sqlite")
    rec.set_meta("scenario", {"name": "s", "path": str(directory / "scenario.yaml"), "sha256": SHA})
    rec.set_meta("overrides", {"arm": None, "repeats": None, "stage_duration": 2.0})
    rec.set_meta("classes", ["embedding"])
    rec.set_meta("request_sets", {"embedding": {"workload": "embedding", "sha256": "ee" * 32, "count": 4,
                                                "source": "generated(seed=2)"}})
    rec.set_meta("conditions", CONDITIONS)
    for trial in plan_trials(scenario()):
        rec.add_trial(trial.id, trial.position, trial.arm, trial.repeat)
    for trial in (1, 2):
        rec.trial_started(trial)
        rec.segment_applied(trial, 0, ["embedding"], Placement({}))
        for stage in (0, 1):
            rec.stage_started(trial, 0, stage, None, {"embedding": 1.0}, {"embedding": "poisson"}, 1.0)
            if trial == 2 and trial_2 == "cut" and stage == 1:
                break  # killed in the middle of stage 1: it stays 'running'
            rec.stage_ended(trial, 0, stage, 2.0, "completed")
        if trial == 1 or trial_2 == "ended":
            rec.segment_released(trial, 0)
            rec.trial_ended(trial, "completed")
    if status is not None:
        rec.set_meta("status", {"status": status, "reason": None, "ended_s": 1_800_000_000.0})
    rec.close()
    (directory / "scenario.yaml").write_text("name: s\n")
    return directory


def refusal(exc: pytest.ExceptionInfo[ResumeRefused]) -> str:
    message = str(exc.value)
    assert "\n" not in message
    return message


def test_a_cut_campaign_keeps_its_ended_segments_and_runs_the_rest(tmp_path: Path) -> None:
    recorded = read_campaign(str(store(tmp_path / "r")))
    assert recorded.status is None  # killed: it never said how it ended
    resume_plan = plan(recorded, plan_trials(scenario()))
    assert resume_plan.done == Done(frozenset({1}), frozenset({(1, 0)}))
    assert (resume_plan.kept, resume_plan.rerun) == ([(1, 0)], [(2, 0)])


def test_a_trial_whose_segments_all_ended_but_not_itself_runs_with_nothing_to_redo(tmp_path: Path) -> None:
    directory = store(tmp_path / "r", trial_2="ended")
    db = sqlite3.connect(directory / "results.sqlite")
    db.execute("UPDATE trials SET status='interrupted' WHERE id=2")  # stopped between its release and its end
    db.commit()
    db.close()
    resume_plan = plan(read_campaign(str(directory)), plan_trials(scenario()))
    assert resume_plan.done == Done(frozenset({1}), frozenset({(1, 0), (2, 0)})) and resume_plan.rerun == []


def test_a_store_of_other_trials_is_refused(tmp_path: Path) -> None:
    recorded = read_campaign(str(store(tmp_path / "r")))
    with pytest.raises(ResumeRefused) as exc:
        plan(recorded, plan_trials(scenario(repeats=1)))
    assert refusal(exc) == f"--resume {tmp_path / 'r'}: trial 2: arm a repeat 2 vs arm none repeat -"


def test_what_is_not_a_campaign_to_resume_is_refused_in_one_line(tmp_path: Path) -> None:
    cases = {
        "missing": "no such directory",
        "empty": "not a campaign's results directory (no results.sqlite)",
        "nometa": "not a campaign's results directory (results.sqlite records no scenario)",
        "v3": f"results.sqlite is store version 3, this bench-plugin writes {STORE_VERSION}: resume it with the "
              "bench-plugin that wrote it",
        "junk": "results.sqlite cannot be read: file is not a database",
        "completed": "the campaign completed at 2027-01-15 08:00:00 UTC: nothing to resume",
        "nostore": "results.sqlite: not a results store (no meta table)",
    }
    (tmp_path / "empty").mkdir()
    Recorder(tmp_path / "nometa" / "results.sqlite").close()
    store(tmp_path / "v3")
    db = sqlite3.connect(tmp_path / "v3" / "results.sqlite")
    db.execute("UPDATE meta SET value='3' WHERE key='store_version'")
    db.commit()
    db.close()
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "results.sqlite").write_bytes(b"x" * 4096)
    store(tmp_path / "completed", status="completed")
    (tmp_path / "nostore").mkdir()
    sqlite3.connect(tmp_path / "nostore" / "results.sqlite").execute("CREATE TABLE t (x)").connection.close()
    for name, why in cases.items():
        with pytest.raises(ResumeRefused) as exc:
            read_campaign(str(tmp_path / name))
        message = refusal(exc)
        assert message.startswith(f"--resume {tmp_path / name}: ") and message.endswith(why), message
    read_campaign(str(store(tmp_path / "interrupted", status="interrupted")))  # one to resume
    read_campaign(str(store(tmp_path / "failed", status="failed")))


def test_the_recorded_scenario_and_overrides_are_used_unless_given_and_the_same(tmp_path: Path) -> None:
    recorded = read_campaign(str(store(tmp_path / "r")))
    path, overrides = options_for(recorded, None, None, Overrides())
    assert path == tmp_path / "r" / "scenario.yaml" and overrides == Overrides(stage_duration=2.0)
    path, overrides = options_for(recorded, "other.yaml", str(tmp_path / "r"), Overrides(stage_duration=2))
    assert path == Path("other.yaml") and overrides.stage_duration == 2
    where = f"--resume {tmp_path / 'r'}: "
    for given, why in [({"stage_duration": 3.0}, "--stage-duration 3.0 vs 2.0 (recorded)"),
                       ({"repeats": 5}, "--repeats 5 vs not given (recorded)")]:
        with pytest.raises(ResumeRefused) as exc:
            options_for(recorded, None, None, Overrides(**given))
        assert refusal(exc) == where + why
    with pytest.raises(ResumeRefused) as exc:
        options_for(recorded, None, str(tmp_path / "elsewhere"), Overrides())
    assert refusal(exc) == where + f"--results-dir {tmp_path / 'elsewhere'} is another directory (a resumed " \
                                   "campaign writes into its own)"
    (tmp_path / "r" / "scenario.yaml").unlink()
    with pytest.raises(ResumeRefused) as exc:
        options_for(recorded, None, None, Overrides())
    assert refusal(exc) == where + f"the scenario it ran ({tmp_path / 'r' / 'scenario.yaml'}) is not there: " \
                                   "name it with --scenario"


def recorded_with(conditions: dict[str, Any]) -> Recorded:
    embedding = {"workload": "embedding", "sha256": "ee" * 32, "count": 4, "source": "generated(seed=2)"}
    meta = {"scenario": {"sha256": SHA}, "classes": ["embedding"], "request_sets": {"embedding": embedding},
            "conditions": conditions}
    return Recorded(Path("r"), "r", CampaignRecord.model_validate(meta), [])


def compare(theirs: dict[str, Any], mine: dict[str, Any]) -> list[str]:
    """provenance_differences of two conditions given as the store keeps them."""
    return provenance_differences(Provenance.model_validate(theirs), Provenance.model_validate(mine))


def test_the_same_experiment_has_no_differences() -> None:
    assert differences(recorded_with(CONDITIONS), scenario_sha256=SHA, classes=["embedding"],
                       request_sets={"embedding": "ee" * 32}, provenance=Provenance.model_validate(CONDITIONS)) == []


def test_each_difference_is_named_recorded_vs_now() -> None:
    now = copy.deepcopy(CONDITIONS)
    now["packages"]["locust"] = "2.48.0"
    now["backend"]["devices"][0] = {**H200, "model": "NVIDIA H100 80GB HBM3", "memory_mib": 81559}
    now["backend"]["driver"] = "575.2"
    now["python"] = "3.12.1"
    now["source_digest"] = "0123456789ab"
    found = differences(recorded_with(CONDITIONS), scenario_sha256="ab" * 32, classes=["embedding", "asr"],
                        request_sets={"embedding": "ff" * 32, "asr": "aa" * 32},
                        provenance=Provenance.model_validate(now))
    assert found == [
        f"scenario sha256 {'5e' * 6}… vs {'ab' * 6}…",
        "classes embedding vs embedding, asr",
        f"request set asr: sha256 none vs {'aa' * 6}…",
        f"request set embedding: sha256 {'ee' * 6}… vs {'ff' * 6}…",
        "device cuda:0: NVIDIA H200 143771 MiB vs NVIDIA H100 80GB HBM3 81559 MiB",
        "driver 570.1 vs 575.2",
        "python 3.11.2 vs 3.12.1",
        "package locust: 2.47.0 vs 2.48.0",
        "bench_plugin source 375b1b644aca vs 0123456789ab",
    ]


def test_backends_cpus_and_cluster_nodes_are_compared() -> None:
    cpu = {"backend": {"backend": "local", "devices": [{"name": "cpu", "model": "Xeon"}], "cpu_count": 2}}
    assert compare(cpu, {"backend": {**cpu["backend"], "cpu_count": 4}}) == [
        "device cpu: Xeon (2 cores) vs Xeon (4 cores)"]
    assert compare(cpu, {"backend": {"backend": "manual"}}) == [
        "backend local vs manual", "device cpu: Xeon (2 cores) vs none"]
    node = {"backend": {"backend": "kubernetes", "nodes": [{"name": "g1", "gpu_product": "NVIDIA-H200",
                                                              "gpu_count": "8"}]}}
    other = json.loads(json.dumps(node))
    other["backend"]["nodes"][0]["gpu_count"] = "4"
    assert compare(node, other) == ["device node g1: NVIDIA-H200 x8 vs NVIDIA-H200 x4"]
    other["backend"]["nodes"][0].update(gpu_count="8", gpu_product="NVIDIA-H200-SHARED")  # a sharing config on
    assert compare(node, other) == []
    other["backend"]["server_version"] = "v1.32.0"
    assert compare(node, other) == ["Kubernetes None vs v1.32.0"]


def test_another_unit_of_the_same_device_is_a_warning_not_a_difference() -> None:
    now = copy.deepcopy(CONDITIONS)
    now["backend"]["devices"][0]["uuid"] = "GPU-bbbb"
    assert compare(CONDITIONS, now) == []
    assert other_units(Provenance.model_validate(CONDITIONS), Provenance.model_validate(now)) == [
        "device cuda:0 is another unit of the same model (GPU-aaaa vs GPU-bbbb)"]


def test_this_process_matches_its_own_record() -> None:
    here = {"packages": package_versions(), "source_digest": source_digest()}
    assert compare(here, copy.deepcopy(here)) == []


def test_beginning_a_resume_supersedes_records_and_drops_the_old_status(tmp_path: Path) -> None:
    directory = store(tmp_path / "r", status="interrupted")
    recorded = read_campaign(str(directory))
    resume_plan = plan(recorded, plan_trials(scenario()))
    rec = Recorder(directory / "results.sqlite")
    record = begin(recorded, resume_plan, rec, Provenance(host="h2", command=["locust", "--resume", "r"]))
    rec.close()
    assert (record.number, record.previous_status, record.kept, record.rerun) == (1, "interrupted", [(1, 0)], [(2, 0)])
    assert record.superseded == {"stages": 2, "segments": 1}
    again = read_campaign(str(directory))
    assert again.status is None and again.resumes == [record]  # a second resume numbers itself 2
    assert [(t.id, [s.index for s in t.stages]) for t in again.trials] == [(1, [0, 1]), (2, [])]


def test_a_plan_made_stale_by_another_resume_is_refused(tmp_path: Path) -> None:
    directory = store(tmp_path / "r", status="interrupted")
    mine = prepare(read_campaign(str(directory)), trials=plan_trials(scenario()), scenario_sha256=SHA,
                   classes=["embedding"], request_sets={"embedding": "ee" * 32},
                   provenance=Provenance.model_validate(CONDITIONS))
    confirm(mine)  # nothing happened in between
    other = read_campaign(str(directory))
    rec = Recorder(directory / "results.sqlite")
    # another process resumed it first
    begin(other, plan(other, plan_trials(scenario())), rec, Provenance.model_validate(CONDITIONS))
    rec.close()
    with pytest.raises(ResumeRefused) as exc:
        confirm(mine)
    assert refusal(exc) == (f"--resume {directory}: the campaign changed since this process read it (another "
                            "process resumed it): run --resume again")


def test_a_kept_probe_keeps_the_stages_it_set_aside(tmp_path: Path) -> None:
    """Trial 2 cut in its third stage: its one decided probe set stage 0 aside (its load generator behind) and
    pooled stage 1. A resume keeps the probe with both stages, counted as its runs, and supersedes stage 2 alone."""
    directory = store(tmp_path / "r", status="interrupted", trial_2="ended")
    rec = Recorder(directory / "results.sqlite")
    rec.reopen()
    rec.trial_started(2)
    with sqlite3.connect(directory / "results.sqlite") as db:  # trial 2 did not end: its segment is cut
        db.execute("UPDATE segments SET released_s = NULL WHERE trial = 2")
        db.execute("UPDATE trials SET status = 'running' WHERE id = 2")
    rec.stage_started(2, 0, 2, None, {"embedding": 2.0}, {"embedding": "poisson"}, 1.0)
    decision = ProbeDecision(outcome="pass", point=True, confidence=0.95, stages=[1], set_aside=[0], lag_judged=True)
    rec.note(SearchStep(segment=0, stage=1, scale=1.0, passed=True, decision=decision), 2)
    rec.close()
    recorded = read_campaign(str(directory))
    resume_plan = plan(recorded, plan_trials(scenario()))
    assert resume_plan.rerun == [(2, 0)]
    assert resume_plan.done.probes[(2, 0)] == (KeptProbe(ray="mix", scale=1.0, passed=True, decided=True,
                                                          stages=(0, 1)),)
    rec = Recorder(directory / "results.sqlite")
    begin(recorded, resume_plan, rec, Provenance(host="h2", command=["locust", "--resume", "r"]))
    rec.close()
    again = read_campaign(str(directory))
    assert [s.index for s in next(t for t in again.trials if t.id == 2).stages] == [0, 1]
