"""The plugin: wires Locust's events to a campaign.

``register(environment)`` is called from a locustfile's ``init`` listener. On the master or the local
runner it loads the scenario, builds the request sets, opens the results store, picks the backend
and checks every arm against it, all before any load, and exits with status 2 and one line per
problem if anything is wrong. ``test_start`` starts the conductor; the shape ends the test when the
conductor is done; ``test_stop`` interrupts a conductor that is still running (Ctrl-C) so that it
releases what it started; then the summary is written. Locust logs and swallows exceptions raised in
listeners, so failures are turned into an explicit exit code instead of being raised.

On a worker it only keeps the stage assignments and ships its samples to the master.
"""

from __future__ import annotations

import json
import logging
import signal
import sys
import time
from pathlib import Path
from typing import Any, NoReturn

import gevent
from locust.runners import MasterRunner, WorkerRunner

from bench_plugin.campaign import plan_trials
from bench_plugin.conditions import collect_conditions
from bench_plugin.conductor import Conductor
from bench_plugin.events import BenchEvents
from bench_plugin.inputs import RequestSet, build_request_sets, store_request_sets
from bench_plugin.options import HOST_OPTIONS
from bench_plugin.recorder import Recorder
from bench_plugin.samples import Sample
from bench_plugin.scenario import Scenario, ScenarioError, load_scenario, scenario_sha256
from bench_plugin.sharing.base import ApplyError, SharingBackend
from bench_plugin.sharing.local import LocalBackend
from bench_plugin.sharing.manual import ManualBackend
from bench_plugin.users import USER_CLASSES, WorkloadUser
from bench_plugin.users.base import STATE_ATTRIBUTE
from bench_plugin.users.state import LoadState, StageAssignment

logger = logging.getLogger(__name__)

STAGE_MESSAGE = "bench_plugin_stage"
STOP_MESSAGE = "bench_plugin_stop_stage"
SAMPLES_KEY = "bench_plugin_samples"
IN_FLIGHT_KEY = "bench_plugin_in_flight"

EXIT_CODES = {"completed": 0, "failed": 2, "interrupted": 130}


def fail(message: str) -> NoReturn:
    """Print ``message`` (one line per problem) and exit with status 2, without a traceback."""
    for line in message.splitlines():
        sys.stderr.write(f"bench_plugin: error: {line}\n")
    sys.stderr.flush()
    sys.exit(2)


class BenchPlugin:
    """One campaign inside one Locust process (master or local)."""

    def __init__(self, environment: Any, scenario: Scenario, request_sets: dict[str, RequestSet],
                 results_dir: Path, backend: SharingBackend, class_names: list[str]) -> None:
        self.environment = environment
        self.scenario = scenario
        self.results_dir = results_dir
        self.events = BenchEvents()
        self.user_classes: list[type[WorkloadUser]] = [USER_CLASSES[name] for name in class_names]
        self.request_sets = request_sets
        results_dir.mkdir(parents=True, exist_ok=True)
        store_request_sets(self.request_sets, results_dir / "inputs")
        self.recorder = Recorder(results_dir / "results.sqlite")
        self.backend = backend
        self.state = LoadState(self.request_sets, sink=self._take)
        self.in_flight_by_worker: dict[str, int] = {}
        trials = plan_trials(scenario)
        self.conductor = Conductor(
            scenario=scenario, class_names=class_names, trials=trials, backend=backend, recorder=self.recorder,
            request_sets=self.request_sets, events=self.events, announce=self._announce,
            stop_stage=self._stop_stage, in_flight=self._in_flight, in_flight_of=self.state.in_flight_of,
        )
        self.greenlet: gevent.Greenlet | None = None
        self.finalized = False
        for trial in trials:
            self.recorder.add_trial(trial.id, trial.position, trial.arm.name, trial.repeat,
                                    trial.arm.model_dump(mode="json"))

    @property
    def finished(self) -> bool:
        """Whether the conductor has run to its end (the shape then ends the test)."""
        return self.conductor.finished

    def _take(self, sample: Sample) -> None:
        if not self.finalized:
            self.conductor.on_sample(sample)

    def _announce(self, assignment: StageAssignment) -> None:
        runner = self.environment.runner
        if isinstance(runner, MasterRunner):
            workers = sorted(runner.clients.keys())
            for index, client_id in enumerate(workers):
                data = {**assignment.to_message(), "worker_index": index, "worker_count": len(workers)}
                runner.send_message(STAGE_MESSAGE, data, client_id=client_id)
        else:
            runner.send_message(STAGE_MESSAGE, assignment.to_message())

    def _stop_stage(self, key: tuple[int, int, int]) -> None:
        self.environment.runner.send_message(STOP_MESSAGE, list(key))

    def _in_flight(self) -> int:
        return self.state.total_in_flight() + sum(self.in_flight_by_worker.values())

    def on_worker_report(self, client_id: str, data: dict[str, Any], **_: Any) -> None:
        """Master: take a worker's samples and in-flight count."""
        for item in data.get(SAMPLES_KEY, []):
            self._take(Sample.from_dict(item))
        self.in_flight_by_worker[client_id] = int(data.get(IN_FLIGHT_KEY, 0))

    def on_test_start(self, **_: Any) -> None:
        """Start the conductor (once per campaign)."""
        if self.greenlet is None:
            self.recorder.set_meta("started_s", time.time())
            self.greenlet = gevent.spawn(self.conductor.run)

    def on_test_stop(self, **_: Any) -> None:
        """Interrupt a running conductor, then write the summary."""
        if self.greenlet is not None and not self.greenlet.dead:
            self.greenlet.kill(block=True, timeout=120)
        self.finalize()

    def finalize(self) -> None:
        """Write summary.json and summary.md, close the store, set the exit code, say where results are."""
        if self.finalized:
            return
        self.finalized = True
        if not self.conductor.finished:  # test stopped before the conductor ever ran
            self.backend.restore()
            self.conductor.status = "interrupted"
        from bench_plugin.analysis.summary import write_summaries
        from bench_plugin.report.html import write_report

        try:
            self.recorder.close()
            write_summaries(self.results_dir)
            write_report(self.results_dir)
        except Exception as exc:  # Locust would swallow it: say it and fail the exit code instead
            logger.exception("writing the summary or the report failed")
            sys.stderr.write(f"bench_plugin: error: writing the summary or the report failed: {exc}\n")
            self.environment.process_exit_code = 2
            return
        self.environment.process_exit_code = EXIT_CODES.get(self.conductor.status, 2)
        status, reason = self.conductor.status, self.conductor.reason
        if status == "failed":
            sys.stderr.write(f"bench_plugin: error: campaign failed: {reason}\n")
        else:
            sys.stderr.write(f"bench_plugin: campaign {status}" + (f" ({reason})" if reason else "") + "\n")
        sys.stderr.write(f"bench_plugin: results in {self.results_dir} "
                         "(report.html, report.md, summary.json, summary.md, results.sqlite)\n")
        sys.stderr.flush()


def _hosts(environment: Any, scenario: Scenario) -> dict[str, str]:
    options = environment.parsed_options
    hosts: dict[str, str] = {}
    for name in scenario.classes.names():
        host = getattr(options, HOST_OPTIONS[name], None) or environment.host or scenario.classes.get(name).endpoint
        if host:
            hosts[name] = host
    return hosts


def _load(environment: Any) -> tuple[Scenario, Path]:
    options = environment.parsed_options
    if options is None or not getattr(options, "scenario", None):
        fail("--scenario is required (a scenario YAML, e.g. scenarios/day19.yaml)")
    path = Path(options.scenario)
    try:
        scenario = load_scenario(path, arm=options.arm, repeats=options.repeats, stage_duration=options.stage_duration)
    except ScenarioError as exc:
        fail(str(exc))
    return scenario, path


def _class_names(environment: Any, scenario: Scenario, path: Path) -> list[str]:
    present = {cls.workload for cls in environment.user_classes if issubclass(cls, WorkloadUser)}
    names = [name for name in scenario.classes.names() if name in present]
    if not names:
        fail(f"{path}: none of the scenario's classes ({', '.join(scenario.classes.names())}) has a user class "
             f"in this locustfile")
    return names


def _results_dir(environment: Any, scenario: Scenario) -> Path:
    given = environment.parsed_options.results_dir
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    path = Path(given) if given else Path("results") / f"{scenario.name}-{stamp}"
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        fail(f"--results-dir {path}: exists and is not an empty directory; results of another campaign would mix in")
    return path


def _register_worker(environment: Any) -> None:
    scenario, path = _load(environment)
    try:
        request_sets = build_request_sets(scenario, path.parent)
    except ScenarioError as exc:
        fail(str(exc))
    outbox: list[Sample] = []
    state = LoadState(request_sets, sink=outbox.append)
    state.worker_id = environment.runner.client_id
    setattr(environment, STATE_ATTRIBUTE, state)
    _register_messages(environment, state)

    def report(client_id: str, data: dict[str, Any], **_: Any) -> None:
        data[SAMPLES_KEY] = [s.to_dict() for s in outbox]
        data[IN_FLIGHT_KEY] = state.total_in_flight()
        outbox.clear()

    environment.events.report_to_master.add_listener(report)


def _register_messages(environment: Any, state: LoadState) -> None:
    runner = environment.runner
    runner.register_message(STAGE_MESSAGE, lambda msg, **_: state.assign(StageAssignment.from_message(msg.data)))
    runner.register_message(STOP_MESSAGE, lambda msg, **_: state.stop_stage(tuple(msg.data)))


def _route_ctrl_c_to_main_greenlet() -> None:
    """Deliver Ctrl-C to the main greenlet, where Locust's headless run stops the test cleanly.

    Python raises KeyboardInterrupt in whatever code runs when SIGINT arrives. Under load that is often
    a request greenlet (seen on the H200: in the middle of a JSON decode), which then dies with a
    traceback instead of stopping the run. Called from the ``init`` listener, which runs in the main
    greenlet.
    """
    gevent.signal_handler(signal.SIGINT, gevent.kill, gevent.getcurrent(), KeyboardInterrupt)


def register(environment: Any) -> BenchPlugin | None:
    """Attach the plugin to a Locust Environment; returns the campaign (None on a worker).

    Call it from the locustfile's ``init`` listener; importing bench_plugin does nothing by itself.
    """
    if isinstance(environment.runner, WorkerRunner):
        _register_worker(environment)
        return None
    scenario, path = _load(environment)
    class_names = _class_names(environment, scenario, path)
    try:
        request_sets = build_request_sets(scenario, path.parent)
    except ScenarioError as exc:
        fail(str(exc))
    results_dir = _results_dir(environment, scenario)
    explicit = scenario.backend == "manual" or bool(environment.host) or any(
        getattr(environment.parsed_options, HOST_OPTIONS[n], None) for n in class_names
    )
    backend: SharingBackend
    if explicit:
        backend = ManualBackend(scenario, _hosts(environment, scenario))
    else:
        backend = LocalBackend(scenario, results_dir / "logs")
    try:
        for arm in scenario.arms:
            backend.check(arm)
    except ApplyError as exc:
        fail(f"{path}: {exc}")
    plugin = BenchPlugin(environment, scenario, request_sets, results_dir, backend, class_names)
    _route_ctrl_c_to_main_greenlet()
    _record_campaign(plugin, path, scenario, class_names)
    environment.bench_plugin = plugin
    environment.bench_plugin_events = plugin.events
    setattr(environment, STATE_ATTRIBUTE, plugin.state)
    _register_messages(environment, plugin.state)
    environment.events.test_start.add_listener(plugin.on_test_start)
    environment.events.test_stop.add_listener(plugin.on_test_stop)
    environment.events.quitting.add_listener(lambda **_: plugin.on_test_stop())
    environment.events.worker_report.add_listener(plugin.on_worker_report)
    return plugin


def _record_campaign(plugin: BenchPlugin, path: Path, scenario: Scenario, class_names: list[str]) -> None:
    options = plugin.environment.parsed_options
    rec = plugin.recorder
    rec.set_meta("schema", "bench_plugin.results/1")
    rec.set_meta("scenario", {
        "name": scenario.name, "path": str(path), "sha256": scenario_sha256(scenario),
        "resolved": scenario.model_dump(mode="json"),
    })
    rec.set_meta("overrides", {"arm": options.arm, "repeats": options.repeats,
                               "stage_duration": options.stage_duration})
    rec.set_meta("classes", class_names)
    rec.set_meta("request_sets", {name: rs.describe() for name, rs in plugin.request_sets.items()})
    rec.set_meta("conditions", collect_conditions(plugin.backend))
    (plugin.results_dir / "scenario.yaml").write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    (plugin.results_dir / "scenario.resolved.json").write_text(
        json.dumps(scenario.model_dump(mode="json"), indent=2), encoding="utf-8"
    )
