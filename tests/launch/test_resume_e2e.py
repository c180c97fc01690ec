"""--resume through the real `locust --headless`: a campaign stopped by SIGINT or SIGKILL between stages
continues in its own directory, and ends with the summary its recorded samples give.

The campaign: synthetic servers (scenarios/calibration.yaml) for llm and embedding, 1 arm x 2 repeats x 2
stages (1 s and 2 s), the embedding request set read from a file (so a request set can change while
the scenario does not). It is run once uninterrupted, once stopped by SIGINT and once by SIGKILL, each
time once trial 2's first stage has ended (between its stages), then resumed. Live timings differ
between runs, so the resumed campaign's figures are checked against the figures the analysis gives
for the same recorded samples, as if one uninterrupted process had recorded them, and against the
uninterrupted run only in what does not depend on the clock: the trials, stages, statuses and the
exact (seeded) request count of every stage and class. A search campaign is killed twice, and
resumed twice; another is cut ten times in turn, at every kind of point of its schedule, by Ctrl-C and by a
kill, and resumed each time. Each refusal is one line, exit status 2, no traceback, and leaves the directory as it was.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import shutil
import signal
import sqlite3
import subprocess
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml
from harness import ROOT, run_locust, scenario_variant, start_locust, stop_process

from bench_plugin.report.envelope import envelopes
from bench_plugin.report.markdown import render_report, render_summary
from bench_plugin.report.outputs import summarise
from bench_plugin.results.recorder import Recorder
from bench_plugin.results.store import (
    STORE_VERSION,
    CampaignReader,
    StoreError,
    open_campaign,
    open_store,
    read_samples,
    store_version,
)
from bench_plugin.results.summary import Summary, load_summary

pytestmark = pytest.mark.slow

STAGES = [{"duration_s": 1, "load": {"llm": 6, "embedding": 6}},
          {"duration_s": 2, "load": {"llm": 8, "embedding": 8}}]
LOCUSTFILE = ["-f", "locustfiles/mixed.py"]

T = TypeVar("T")


def write_texts(directory: Path, first: str = "a first text") -> None:
    """The embedding request set as a file: 8 batches of 2 texts (``first`` opens the first one)."""
    lines = [json.dumps({"input": [first if i == 0 else f"text {i} one", f"text {i} two"]}) for i in range(8)]
    (directory / "texts.jsonl").write_text("\n".join(lines) + "\n")


def write_scenario(directory: Path, **changes: Any) -> Path:
    """The campaign's scenario in ``directory`` (with its texts.jsonl), with top-level keys changed."""
    directory.mkdir(parents=True, exist_ok=True)
    write_texts(directory)
    base = scenario_variant(directory, "calibration", repeats=2, stages=STAGES)
    data = yaml.safe_load(base.read_text())
    data["classes"]["embedding"]["requests"] = {"file": "texts.jsonl"}
    data.update(changes)
    base.write_text(yaml.safe_dump(data, sort_keys=False))
    return base


def store_rows(results: Path, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Rows of a read-only query of the campaign's store ([] while it has no such table yet).

    Only for what no reader reads, by design: what a resume set aside (``superseded_*``) and whether a
    refusal wrote a ``resumes`` key at all. Everything else is read as the package reads it (open_campaign).
    """
    path = results / "results.sqlite"
    if not path.is_file():
        return []
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return db.execute(sql, params).fetchall()
    except sqlite3.OperationalError:
        return []
    finally:
        db.close()


def read_now(results: Path, read: Callable[[CampaignReader], T], otherwise: T) -> T:
    """``read`` of the campaign's store as it stands while a campaign writes it; ``otherwise`` before it can be read."""
    path = results / "results.sqlite"
    if not path.is_file():
        return otherwise
    try:
        with open_campaign(path) as reader:
            return read(reader)
    except (StoreError, sqlite3.OperationalError):  # the store is still being created
        return otherwise


def stop_when(args: list[str], log: Path, results: Path, ready: Callable[[], bool], sig: signal.Signals) -> int:
    """Start locust with ``args``, send ``sig`` once ``ready()`` holds; its exit status."""
    proc = start_locust(args, log)
    try:
        deadline = time.monotonic() + 180
        while not ready():
            assert proc.poll() is None, f"the campaign ended before it could be stopped: {log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.05)
        proc.send_signal(sig)
        if sig != signal.SIGKILL:  # a campaign that froze itself (FREEZE) takes its signal as it goes on
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGCONT)
        return proc.wait(timeout=120)
    finally:
        stop_process(proc)


def between_trial_2_stages(results: Path) -> Callable[[], bool]:
    """Trial 2's first stage has ended (its second is about to start or running)."""
    return lambda: read_now(results, lambda reader: any(
        t.id == 2 and s.index == 0 and s.status == "completed" for t in reader.trials() for s in t.stages), False)


def resume(results: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return run_locust([*LOCUSTFILE, "--resume", str(results), *extra], timeout=300, report=True)


def one_error_line(done: subprocess.CompletedProcess[str]) -> str:
    """The single bench_plugin error line of a refused run (exit status 2, no traceback)."""
    assert done.returncode == 2, done.stdout[-3000:]
    assert "Traceback" not in done.stdout, done.stdout
    errors = [line for line in done.stdout.splitlines() if line.startswith("bench_plugin: error:")]
    assert len(errors) == 1, done.stdout
    return errors[0]


def as_one_run(results: Path, where: Path) -> Summary:
    """The summary the analysis gives for the samples stored in ``results``, as if one process had recorded
    them: a copy of the store without any trace of the resumes (superseded tables, resume records)."""
    where.mkdir()
    for name in ("results.sqlite", "results.sqlite-wal"):  # a killed campaign's last commits are in its log
        if (results / name).is_file():
            shutil.copy(results / name, where / name)
    db = sqlite3.connect(where / "results.sqlite")
    for (table,) in db.execute("SELECT name FROM sqlite_master WHERE type='table' AND name LIKE 'superseded_%'"
                               ).fetchall():
        db.execute(f"DROP TABLE {table}")
    db.execute("DELETE FROM meta WHERE key='resumes'")
    db.execute("DELETE FROM events WHERE kind='resumed'")
    db.commit()
    db.close()
    return summarise(where)


def shape(summary: Summary) -> list[Any]:
    """What does not depend on the clock: trials, stages, statuses, and every stage's request count per class."""
    return [(t.id, t.arm, t.repeat, t.status,
             [(s.index, s.status, s.offered, s.arrivals, {n: c.requests for n, c in s.classes.items()})
              for s in t.stages]) for t in summary.trials]


def without_resumes(summary: Summary) -> dict[str, Any]:
    data = summary.model_dump(mode="json")
    data["status"]["resumed"] = []
    return data


def check_resumed(results: Path, uninterrupted: Summary, before: Summary, tmp_path: Path, *,
                  resumes: int, previous: str) -> Summary:
    """What every resumed campaign must show; returns its summary."""
    summary = load_summary(results / "summary.json")
    assert summary.status.status == "completed" and len(summary.status.resumed) == resumes
    last = summary.status.resumed[-1]
    assert last.previous_status == previous and last.kept == [(1, 0)] and last.rerun == [(2, 0)]
    # The same summary as one uninterrupted run of these samples, and the uninterrupted run's shape.
    assert without_resumes(summary) == without_resumes(as_one_run(results, tmp_path / "as-one-run"))
    assert shape(summary) == shape(uninterrupted)
    for trial in summary.trials:
        for stage in trial.stages:
            assert all(stage.classes[n].requests == stage.arrivals[n] for n in stage.arrivals), (trial.id, stage)
    # Trial 1 was kept: its figures are those its samples had before the resume.
    assert summary.trials[0].model_dump(mode="json") == before.trials[0].model_dump(mode="json")
    # Trial 2 ran again after the resume: none of its samples is from the attempt that was cut short.
    with open_campaign(results / "results.sqlite") as reader:
        assert [s for s in reader.samples(2) if s.intended_s < last.at_s] == []
        assert len(reader.events("resumed")) == resumes
    (superseded,) = store_rows(results, "SELECT COUNT(*) FROM superseded_samples WHERE trial=2 AND resume=?",
                               (resumes,))
    assert superseded[0] == last.superseded.get("samples", 0)
    for name in ("summary.md", "report.md"):
        assert f"resumed {resumes} time" in (results / name).read_text()
    assert f"resumed {resumes} time" in (results / "report.html").read_text()
    return summary


@pytest.fixture(scope="module")
def uninterrupted_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The campaign run once, uninterrupted: its results directory."""
    where = tmp_path_factory.mktemp("uninterrupted")
    results = where / "results"
    done = run_locust([*LOCUSTFILE, "--scenario", str(write_scenario(where)), "--results-dir", str(results)])
    assert done.returncode == 0, done.stdout[-3000:]
    return results


@pytest.fixture(scope="module")
def uninterrupted(uninterrupted_dir: Path) -> Summary:
    return load_summary(uninterrupted_dir / "summary.json")


@pytest.fixture(scope="module")
def killed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A campaign SIGKILLed between trial 2's stages; and a pristine copy of its directory for the refusals."""
    where = tmp_path_factory.mktemp("killed")
    results = where / "results"
    code = stop_when([*LOCUSTFILE, "--scenario", str(write_scenario(where)), "--results-dir", str(results)],
                     where / "locust.log", results, between_trial_2_stages(results), signal.SIGKILL)
    assert code == -signal.SIGKILL
    pristine = where / "pristine"
    shutil.copytree(results, pristine)
    return results, pristine


def test_sigint_between_stages_then_resume(uninterrupted: Summary, tmp_path: Path) -> None:
    results = tmp_path / "results"
    scenario = write_scenario(tmp_path)
    code = stop_when([*LOCUSTFILE, "--scenario", str(scenario), "--results-dir", str(results)],
                     tmp_path / "locust.log", results, between_trial_2_stages(results), signal.SIGINT)
    assert code == 130, (tmp_path / "locust.log").read_text()[-3000:]
    before = load_summary(results / "summary.json")  # written by the interrupted process
    assert before.status.status == "interrupted" and [t.status for t in before.trials] == ["completed", "interrupted"]
    done = resume(results)  # the scenario and overrides come from the record
    assert done.returncode == 0, done.stdout[-3000:]
    assert "resuming" in done.stdout and "runs again from its start: trial 2 segment 0" in done.stdout
    check_resumed(results, uninterrupted, before, tmp_path, resumes=1, previous="interrupted")


def test_sigkill_between_stages_then_resume(uninterrupted: Summary, killed: tuple[Path, Path], tmp_path: Path) -> None:
    results, _ = killed
    # What was committed survived the kill; the segment in flight is seen as unfinished.
    with open_campaign(results / "results.sqlite") as reader:
        trials = sorted(reader.trials(), key=lambda t: t.id)
        finalised = reader.record().status
        kept = Counter(s.trial for s in reader.samples(1))
    assert [(t.id, t.status) for t in trials] == [(1, "completed"), (2, "running")]
    assert [(t.id, s.released_s is not None) for t in trials for s in t.segments] == [(1, True), (2, False)]
    statuses = {s.index: s.status for s in trials[1].stages}
    assert statuses[0] == "completed" and statuses.get(1, "running") == "running"
    assert finalised is None  # nothing finalised
    # results.sqlite alone (without its write-ahead log) holds every segment that ended: trial 1.
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(results / "results.sqlite", alone / "results.sqlite")
    with open_store(alone / "results.sqlite") as db:
        assert Counter(s.trial for s in read_samples(db)) == kept
    before = as_one_run(results, tmp_path / "before")  # trial 1's figures as they stood after the kill
    done = resume(results, "--scenario", str(results.parent / "scenario.yaml"))
    assert done.returncode == 0, done.stdout[-3000:]
    check_resumed(results, uninterrupted, before, tmp_path, resumes=1, previous="unfinished")


def test_a_campaign_begun_by_the_version_before_is_resumed_and_its_store_upgraded(
        uninterrupted: Summary, killed: tuple[Path, Path], tmp_path: Path) -> None:
    """A campaign cut while this code's store was one version older (6: no server series, samples without the
    server's split) goes on: the resume upgrades its store in place, and it ends as one run would."""
    results = tmp_path / "results"
    shutil.copytree(killed[1], results)
    db = sqlite3.connect(results / "results.sqlite")
    for table in ("samples", "superseded_samples"):
        for column in ("server_queue_s", "server_compute_s"):
            db.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
    for table in ("server_series", "superseded_server_series"):
        db.execute(f"DROP TABLE {table}")
    db.execute("UPDATE meta SET value='6' WHERE key='store_version'")
    db.commit()
    db.close()
    before = as_one_run(results, tmp_path / "before")
    done = resume(results, "--scenario", str(killed[0].parent / "scenario.yaml"))
    assert done.returncode == 0, done.stdout[-3000:]
    with open_store(results / "results.sqlite") as db:
        assert store_version(db) == STORE_VERSION
        assert db.execute("SELECT COUNT(*) FROM server_series WHERE trial=2").fetchone()[0] > 0  # the rerun's
    check_resumed(results, uninterrupted, before, tmp_path, resumes=1, previous="unfinished")


def refused_copy(killed: tuple[Path, Path], tmp_path: Path) -> tuple[Path, str]:
    """A private copy of the killed campaign's directory, and the digest of its store (a refusal changes nothing)."""
    target = tmp_path / "results"
    shutil.copytree(killed[1], target)
    return target, hashlib.sha256((target / "results.sqlite").read_bytes()).hexdigest()


def assert_untouched(results: Path, digest: str) -> None:
    assert hashlib.sha256((results / "results.sqlite").read_bytes()).hexdigest() == digest
    assert not (results / "summary.json").exists()


def test_a_changed_scenario_is_refused(killed: tuple[Path, Path], tmp_path: Path) -> None:
    results, digest = refused_copy(killed, tmp_path)
    other = write_scenario(tmp_path / "other", stages=[STAGES[0], {**STAGES[1], "duration_s": 3}])
    line = one_error_line(resume(results, "--scenario", str(other)))
    assert line.startswith(f"bench_plugin: error: --resume {results}: scenario sha256 ")
    assert "request set" not in line
    assert_untouched(results, digest)


def test_a_changed_request_set_is_refused(killed: tuple[Path, Path], tmp_path: Path) -> None:
    results, digest = refused_copy(killed, tmp_path)
    other = write_scenario(tmp_path / "other")
    write_texts(other.parent, first="another first text")  # same scenario, other inputs
    line = one_error_line(resume(results, "--scenario", str(other)))
    assert line.startswith(f"bench_plugin: error: --resume {results}: request set embedding: sha256 ")
    assert "scenario sha256" not in line and "llm" not in line
    assert_untouched(results, digest)


def test_another_override_is_refused(killed: tuple[Path, Path], tmp_path: Path) -> None:
    results, digest = refused_copy(killed, tmp_path)
    line = one_error_line(resume(results, "--repeats", "3"))
    assert line == f"bench_plugin: error: --resume {results}: --repeats 3 vs not given (recorded)"
    assert_untouched(results, digest)


def test_a_campaign_another_process_writes_is_refused(killed: tuple[Path, Path], tmp_path: Path) -> None:
    results, _ = refused_copy(killed, tmp_path)
    writer = Recorder(results / "results.sqlite")  # this process holds it, as a campaign still running would
    try:
        line = one_error_line(resume(results))
    finally:
        writer.close()
    assert line == (f"bench_plugin: error: --resume {results}: {results / 'results.sqlite'}: another process is "
                    "writing this campaign (one process at a time)")
    assert store_rows(results, "SELECT COUNT(*) FROM meta WHERE key='resumes'") == [(0,)]


def test_a_completed_campaign_is_refused(uninterrupted_dir: Path) -> None:
    digest = hashlib.sha256((uninterrupted_dir / "results.sqlite").read_bytes()).hexdigest()
    line = one_error_line(resume(uninterrupted_dir))
    assert line.startswith(f"bench_plugin: error: --resume {uninterrupted_dir}: the campaign completed at ")
    assert line.endswith(" UTC: nothing to resume")
    assert hashlib.sha256((uninterrupted_dir / "results.sqlite").read_bytes()).hexdigest() == digest


def test_a_directory_that_is_no_campaign_is_refused(tmp_path: Path) -> None:
    assert one_error_line(resume(tmp_path)) == (
        f"bench_plugin: error: --resume {tmp_path}: not a campaign's results directory (no results.sqlite)")
    (tmp_path / "results.sqlite").write_bytes(b"not a database at all, just bytes" * 100)
    line = one_error_line(resume(tmp_path))
    assert line.startswith(f"bench_plugin: error: --resume {tmp_path}: results.sqlite cannot be read: ")
    missing = tmp_path / "missing"
    assert one_error_line(resume(missing)) == f"bench_plugin: error: --resume {missing}: no such directory"


SEARCH = {"mix": {"embedding": 10}, "start_scale": 1, "max_scale": 4, "precision": 0.15, "stage_duration_s": 1,
          "max_extensions": 0, "sustain_s": 0}
"""Three steps (x1, x2, x4: the server's capacity is x10), each a second, neither extended nor held."""


def search_steps(results: Path) -> list[float]:
    """The scales of the search steps on the timeline, in order."""
    return read_now(results, lambda reader: [e.detail["scale"] for e in reader.events("search_step")], [])


def steps_since_resumed(results: Path) -> int:
    """Search steps taken since the last resume began (0 before it superseded the earlier attempt's)."""
    def since(reader: CampaignReader) -> int:
        resumed = reader.events("resumed")
        return sum(e.t > resumed[-1].t for e in reader.events("search_step")) if resumed else 0

    return read_now(results, since, 0)


def test_a_search_segment_killed_twice_keeps_its_decided_probes(tmp_path: Path) -> None:
    """Each resume keeps the probes decided before the kill (their stages and samples), replays them into the
    search, and runs only what was left: every step once, over three processes."""
    scenario = scenario_variant(tmp_path, "search-calibration", repeats=1, search=SEARCH)
    results = tmp_path / "results"
    first = stop_when([*LOCUSTFILE, "--scenario", str(scenario), "--results-dir", str(results)],
                      tmp_path / "first.log", results, lambda: len(search_steps(results)) >= 1, signal.SIGKILL)
    assert first == -signal.SIGKILL
    before = search_steps(results)
    second = stop_when([*LOCUSTFILE, "--resume", str(results)], tmp_path / "second.log", results,
                       lambda: steps_since_resumed(results) >= 1, signal.SIGKILL)
    assert second == -signal.SIGKILL
    assert f"trial 1 segment 0 (keeping the {_count(len(before), 'probe')} it decided)" in (
        tmp_path / "second.log").read_text()
    done = resume(results)
    assert done.returncode == 0, done.stdout[-3000:]
    summary = load_summary(results / "summary.json")
    assert [r.previous_status for r in summary.status.resumed] == ["unfinished", "unfinished"]
    assert all(r.kept == [] and r.rerun == [(1, 0)] for r in summary.status.resumed)
    steps = search_steps(results)
    (trial,) = summary.trials
    # x2 and x4 are within the server's capacity, but a busy host can break its SLO: the search then bisects
    assert steps[0] == 1.0 and steps[:len(before)] == before, "the kept probes first, then the rest"
    assert len(set(steps)) == len(steps) == len(trial.probes), "each probe once"
    # a probe may run more than one stage (one the self-check set aside on a busy host, run again; an extension)
    scale = {index: probe.scale for probe in trial.probes for index in [*probe.stages, *probe.set_aside]}
    assert sorted(scale) == [s.index for s in trial.stages], "every stage is one probe's"
    assert [s.offered for s in trial.stages] == [{"embedding": pytest.approx(10.0 * scale[s.index])}
                                                 for s in trial.stages]
    assert sorted(probe.scale for probe in trial.probes) == sorted(steps)
    assert len(trial.search) == 1 and trial.search[0].runs == len(trial.stages)
    assert all(s.classes["embedding"].requests == s.arrivals["embedding"] for s in trial.stages
               if s.status == "completed")  # a step past the boundary may be rolled back: fewer were sent
    (cut,) = store_rows(results, "SELECT COUNT(*) FROM superseded_events WHERE kind='search_step'")
    assert cut == (0,), "no decided probe was superseded"
    first_resume = summary.status.resumed[0].at_s
    with open_campaign(results / "results.sqlite") as reader:
        kept_stage = reader.search_steps(1)[0].stage
        assert all(s.intended_s < first_resume for s in reader.samples(1) if s.stage == kept_stage)
    assert without_resumes(summary) == without_resumes(as_one_run(results, tmp_path / "as-one-run"))


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


RAYS = {"mix": {"llm": 2, "embedding": 8, "asr": 2}, "mixes": {"asr-alone": {"asr": 4}}, "start_scale": 1,
        "max_scale": 4, "precision": 0.3, "stage_duration_s": 1, "max_extensions": 0, "sustain_s": 0}
"""Two rays, x1, x2 and x4 each (every one far below the simulated device's limits), taken in turn: the ray
``mix`` ends first, one stage before ``asr-alone``."""


def loose_classes() -> dict[str, Any]:
    """scenarios/simulator.yaml's classes with SLOs no probe here can break, even on a machine so busy that its
    servers answer late: each probe passes, so the rays run x1, x2, x4 exactly."""
    classes: dict[str, Any] = yaml.safe_load((ROOT / "scenarios" / "simulator.yaml").read_text())["classes"]
    for spec in classes.values():
        spec["slo"] = {"p95_ms": 30_000}
        spec["error_budget"] = 0.5
    return classes


def ray_results(results: Path) -> list[str]:
    """The rays whose search result is on the timeline, in order."""
    return read_now(results, lambda reader: [e.detail.get("ray", "mix") for e in reader.events("search_result")], [])


FREEZE = """\
\"\"\"Loaded after locustfiles/mixed.py: the campaign stops itself (SIGSTOP), once, as the stage that makes {nth} of
its stages named in {stages!r} (None: of any name) starts, that stage's row and timeline entry in the store
(run/hooks.py); it records nothing of its own.\"\"\"
import os
import signal
from pathlib import Path

from locust import events

seen = []


def freeze(name=None, **_):
    if {stages!r} is None or name in {stages!r}:
        seen.append(name)
        if len(seen) == {nth}:
            Path({marker!r}).touch()
            os.kill(os.getpid(), signal.SIGSTOP)


events.init.add_listener(lambda environment, **_: environment.bench_plugin_events.stage_start.add_listener(freeze))
"""
"""A locustfile beside locustfiles/mixed.py (Locust loads both, in order): ``stages``, ``nth`` and ``marker`` to
format."""


def frozen_at(tmp_path: Path, stages: tuple[str, ...] | None, tag: str = "", nth: int = 1) -> tuple[list[str], Path]:
    """-f for a campaign that freezes itself as the ``nth`` of its stages named in ``stages`` starts (FREEZE; None:
    of any name), and the file that says it has: a signal once that file exists lands there, however late this
    process sees it, for the campaign cannot go past it (stop_when continues it after a signal it must handle)."""
    marker, hook = tmp_path / f"frozen{tag}", tmp_path / f"freeze_at_stage{tag}.py"
    hook.write_text(FREEZE.format(stages=stages, nth=nth, marker=str(marker)))
    return ["-f", f"{LOCUSTFILE[1]},{hook}"], marker


def once_frozen(marker: Path, holds: Callable[[], bool]) -> Callable[[], bool]:
    """Whether the campaign froze itself (``marker``, frozen_at) and the store says it froze at the cut (``holds``)."""
    return lambda: marker.exists() and holds()


def test_a_search_segment_killed_after_one_ray_ended_goes_on_from_its_decided_probes(tmp_path: Path) -> None:
    """The ray whose search had ended keeps its stages, probes and result, the open ray its decided probes; only
    the open ray's remaining probes run after the resume.

    The kill lands in the open ray's last probe, x4, once its stage has started: the campaign stops itself there
    (FREEZE), since that probe is all it has left once the other ray ended, a second that a busy host's poll can
    miss. The rays take turns by the stage-runs each has used, so ``asr-alone`` is the one still open, one stage
    behind ``mix``; where the host held the load generator back in a stage (set aside, run again, counted as a run),
    the other ray may be: the freeze comes as the second of the two rays' x4 probes starts, whichever ray it is.
    """
    scenario = scenario_variant(tmp_path, "simulator", repeats=1, search=RAYS, classes=loose_classes(),
                                arms=[{"name": "shared", "control": True, "sharing": "time-slicing"}])
    results = tmp_path / "results"
    last_probes = {"mix": "x4", "asr-alone": "asr-alone x4"}  # each ray's last probe's (first) stage
    locustfiles, frozen = frozen_at(tmp_path, tuple(last_probes.values()), nth=2)
    first = stop_when([*locustfiles, "--scenario", str(scenario), "--results-dir", str(results)],
                      tmp_path / "first.log", results, frozen.exists, signal.SIGKILL)
    assert first == -signal.SIGKILL
    (ended,) = ray_results(results)  # killed once one ray had ended, the other not
    (still_open,) = set(last_probes) - {ended}
    kept = read_now(results, lambda reader: [(e.detail.get("ray"), e.detail["stage"], e.detail["scale"])
                                             for e in reader.events("search_step")], [])
    kept_stages: set[int] = read_now(results, lambda reader: {
        i for step in reader.search_steps(1) if step.decision is not None
        for i in [*step.decision.stages, *step.decision.set_aside]}, set())  # each decided probe's every stage
    assert {stage for _, stage, _ in kept} <= kept_stages
    assert [scale for ray, _, scale in kept if ray == ended] == [1.0, 2.0, 4.0]
    open_ray = [scale for ray, _, scale in kept if ray == still_open]
    assert open_ray == [1.0, 2.0], f"the rays take turns: {still_open} was still open"
    done = resume(results)
    assert done.returncode == 0, done.stdout[-3000:]
    assert f"keeping the {_count(len(kept), 'probe')} it decided" in done.stdout
    summary = load_summary(results / "summary.json")
    (trial,) = summary.trials
    by_ray = {r.ray: r for r in trial.search}
    assert set(by_ray) == {"mix", "asr-alone"} and by_ray["mix"].status == by_ray["asr-alone"].status == \
        "above the maximum"
    probes = [(p.ray, p.scale) for p in trial.probes]
    assert sorted(probes) == sorted([("mix", 1.0), ("mix", 2.0), ("mix", 4.0), ("asr-alone", 1.0),
                                     ("asr-alone", 2.0), ("asr-alone", 4.0)]), "each probe once"
    last = summary.status.resumed[-1]
    with open_campaign(results / "results.sqlite") as reader:
        samples = reader.samples(1)
    assert all(s.intended_s < last.at_s for s in samples if s.stage in kept_stages), "kept from the first attempt"
    assert all(s.intended_s > last.at_s for s in samples if s.stage not in kept_stages), "the rest ran after"
    assert min(s.stage for s in samples if s.stage not in kept_stages) > max(kept_stages), "numbered after them"
    assert store_rows(results, "SELECT stage, name, status FROM superseded_stages") == [
        (max(kept_stages) + 1, last_probes[still_open], "running")], "the probe cut short was set aside, and ran again"
    for stage in trial.stages:
        assert stage.status == "completed" and all(stage.classes[n].requests == stage.arrivals[n]
                                                   for n in stage.arrivals if stage.arrivals[n])
    assert without_resumes(summary) == without_resumes(as_one_run(results, tmp_path / "as-one-run"))


CHAIN = (("mid-probe", signal.SIGINT), ("decided", signal.SIGKILL), ("starting", signal.SIGKILL),
         ("mid-probe", signal.SIGKILL), ("decided", signal.SIGINT), ("mid-probe", signal.SIGINT),
         ("decided", signal.SIGKILL), ("decided", signal.SIGINT), ("decided", signal.SIGKILL),
         ("mid-probe", signal.SIGINT))
"""The cuts of one campaign, in turn, each in a new process resumed from the last: kinds of point from the
campaign's own schedule (``mid-probe``: a probe's stage has started and is not decided; ``decided``: right after
a probe's decision; ``starting``: a resumed process before its first probe), each by Ctrl-C and by a kill. The
probes go mix x1, asr-alone x1, mix x2, asr-alone x2, mix x4 (the ray ``mix`` ends), asr-alone x4 (RAYS): the
last cut comes inside the last probe, once one ray has ended and the other has not."""


def cut_at(results: Path, kind: str, decided: int, resumes: int) -> Callable[[], bool]:
    """When the process of resume ``resumes`` (0: the first), started with ``decided`` probes decided, reaches a
    cut of ``kind``. Nothing before it has recorded its own resume: what the last process began is not its."""
    def ready(reader: CampaignReader) -> bool:
        steps = reader.events("search_step")
        resumed = reader.events("resumed")
        if len(resumed) < resumes:
            return False
        since = resumed[-1].t if resumed else 0.0
        if kind == "starting":
            return not any(e.t > since for e in reader.events("stage_start"))
        if kind == "decided":
            return len(steps) > decided
        last = max([since, *(e.t for e in steps)])
        return len(steps) == decided and any(e.t > last for e in reader.events("stage_start"))

    return lambda: read_now(results, ready, False)


def undecided_nothing_shown(summary: Summary) -> None:
    """A partial campaign's summary: a ray or capacity has a boundary only once its search ended, and then the
    uncut campaign's (each probe passes: every search ends above the maximum, having held x4)."""
    assert summary.comparison is not None
    for comp in summary.comparison.arms.values():
        for ray in comp.envelope.rays if comp.envelope else []:
            for repeat in ray.per_repeat:
                if repeat.scale is not None:
                    assert repeat.status == "above the maximum" and repeat.lo == pytest.approx(4.0), ray
        for repeat in comp.search.per_repeat if comp.search else []:
            if repeat.scale is not None:
                assert repeat.status == "above the maximum", comp.search


def test_a_search_cut_at_every_kind_of_point_in_turn_ends_as_the_uncut_one(tmp_path: Path) -> None:
    """Cut after cut, each resumed: at every cut the summary and the reports (written by a Ctrl-C; from the store
    after a kill) say only what was decided, and the campaign ends with every probe run once and the uncut
    campaign's boundaries."""
    scenario = scenario_variant(tmp_path, "simulator", repeats=1, search=RAYS, classes=loose_classes(),
                                arms=[{"name": "shared", "control": True, "sharing": "time-slicing"}])
    results = tmp_path / "results"
    args = ["--scenario", str(scenario), "--results-dir", str(results)]
    for n, (kind, sig) in enumerate(CHAIN):
        decided = len(search_steps(results))
        at = cut_at(results, kind, decided, n)
        files, ready = LOCUSTFILE, at
        if kind == "mid-probe":  # a probe's stage lasts a second, which a busy host's poll can miss: it waits there
            files, frozen = frozen_at(tmp_path, None, f"-{n}")
            ready = once_frozen(frozen, at)
        status = stop_when([*files, *args], tmp_path / f"cut-{n}.log", results, ready, sig)
        log = (tmp_path / f"cut-{n}.log").read_text()
        if sig == signal.SIGINT:  # stopped: its outputs are written, of the campaign so far
            assert status == 130 and "Traceback" not in log, log[-3000:]
            partial = load_summary(results / "summary.json")
            assert partial.status.status == "interrupted"
            assert ("## Operating envelope" in (results / "summary.md").read_text()) == bool(envelopes(partial))
        else:  # killed: nothing written; the store says as much as it holds
            assert status == -signal.SIGKILL
            # a resumed process removes the outputs of the one before as it starts: none is left stale
            assert not any((results / name).exists() for name in ("summary.json", "summary.md", "report.html"))
            partial = summarise(results)
        undecided_nothing_shown(partial)
        render_summary(partial), render_report(partial)
        args = ["--resume", str(results)]
    done = resume(results)
    assert done.returncode == 0, done.stdout[-3000:]
    summary = load_summary(results / "summary.json")
    assert len(summary.status.resumed) == len(CHAIN)
    (trial,) = summary.trials
    by_ray = {r.ray: r for r in trial.search}
    assert set(by_ray) == {"mix", "asr-alone"}
    assert all(r.status == "above the maximum" and r.lo == pytest.approx(4.0) for r in by_ray.values())
    probes = sorted((p.ray, p.scale) for p in trial.probes)
    assert probes == sorted((ray, scale) for ray in ("mix", "asr-alone") for scale in (1.0, 2.0, 4.0)), probes
    undecided_nothing_shown(summary)
    assert without_resumes(summary) == without_resumes(as_one_run(results, tmp_path / "as-one-run"))


def test_a_later_repeat_starts_where_the_earlier_left_its_bracket_across_a_resume(tmp_path: Path) -> None:
    """With ``warm_start``, repeat 2 looks first where repeat 1 ended each ray (above the maximum: x4), so each of
    its rays takes one probe; killed after its first, the resumed process starts the open ray at x4 too, and the
    campaign ends as one uninterrupted run of the same records."""
    scenario = scenario_variant(tmp_path, "simulator", repeats=2, search={**RAYS, "warm_start": True},
                                classes=loose_classes(),
                                arms=[{"name": "shared", "control": True, "sharing": "time-slicing"}])
    results = tmp_path / "results"

    def repeat_2_stepped() -> bool:
        return read_now(results, lambda reader: len(reader.events("search_step", 2)) >= 1, False)

    first = stop_when([*LOCUSTFILE, "--scenario", str(scenario), "--results-dir", str(results)],
                      tmp_path / "first.log", results, repeat_2_stepped, signal.SIGKILL)
    assert first == -signal.SIGKILL
    done = resume(results)
    assert done.returncode == 0, done.stdout[-3000:]
    summary = load_summary(results / "summary.json")
    one, two = summary.trials
    assert sorted((p.ray, p.scale) for p in one.probes) == sorted(
        (ray, scale) for ray in ("mix", "asr-alone") for scale in (1.0, 2.0, 4.0)), "repeat 1 searches cold"
    assert sorted((p.ray, p.scale) for p in two.probes) == [("asr-alone", 4.0), ("mix", 4.0)], two.probes
    for trial in (one, two):
        assert {r.ray: (r.status, r.lo) for r in trial.search} == {
            "mix": ("above the maximum", 4.0), "asr-alone": ("above the maximum", 4.0)}
    stages = [(s.index, s.name, s.status, s.reason) for s in two.stages]
    # a stage its load generator fell behind in is set aside and run again (analysis/probe.py): on a busy host it
    # is the instrument's re-run, named "again", and counted in its search's runs
    aside = sorted(i for p in two.probes if p.decision is not None for i in p.decision.set_aside)
    kept = sorted(name.split(" again ")[0] for i, name, _, _ in stages if i not in aside)
    assert kept == ["asr-alone x4", "x4"], stages
    assert sum(r.runs for r in two.search) == len(two.stages) == 2 + len(aside), stages
    assert without_resumes(summary) == without_resumes(as_one_run(results, tmp_path / "as-one-run"))
