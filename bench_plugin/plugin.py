"""The plugin: wires Locust's events to a campaign.

``register(environment)`` is called from a locustfile's ``init`` listener. On the master or the local
runner it loads the scenario, builds the request sets, opens the results store, picks the backend
and checks every arm against it, all before any load, and exits with status 2 and one line per
problem if anything is wrong. ``test_start`` starts the conductor; the shape ends the test when the
conductor is done; ``test_stop`` interrupts a conductor that is still running (Ctrl-C) so that it
releases what it started; then the summary is written. Locust logs and swallows exceptions raised in
listeners, so failures are turned into an explicit exit code instead of being raised.

With workers (``--master``), the master alone applies arms and writes results; the load comes from
the workers, split exactly between them (loadgen/). A worker needs only the locustfile: it takes the
request sets from the master (loadgen/worker.py).

``--resume DIR`` continues an interrupted campaign in its own directory (resume.py): the checks that
it is the same experiment come before anything is changed; the conductor is then told what is done.
"""

from __future__ import annotations

import json
import logging
import signal
import sys
import time
from argparse import Namespace
from functools import partial
from pathlib import Path
from typing import Any, NoReturn

import gevent
from locust.argument_parser import get_parser
from locust.env import Environment
from locust.runners import STATE_CLEANUP, STATE_STOPPED, STATE_STOPPING, MasterRunner, WorkerRunner

from bench_plugin import resume, webui
from bench_plugin.campaign import plan_trials
from bench_plugin.conditions import collect_conditions
from bench_plugin.conductor import Conductor
from bench_plugin.events import BenchEvents
from bench_plugin.inputs import RequestSet, build_request_sets, store_request_sets
from bench_plugin.live import LiveSnapshot, LiveView
from bench_plugin.loadgen import collector
from bench_plugin.loadgen.fleet import Fleet, Inbox
from bench_plugin.loadgen.protocol import Hello, Identity
from bench_plugin.loadgen.worker import WorkerLink
from bench_plugin.options import BACKENDS, HOST_OPTIONS, check_base_url, parse_service_urls
from bench_plugin.progress import report_progress
from bench_plugin.results.recorder import Recorder
from bench_plugin.results.store import StoreError
from bench_plugin.samples import Sample
from bench_plugin.scenario import Scenario, ScenarioError, load_scenario, scenario_sha256
from bench_plugin.scenario.checks import sample_warnings
from bench_plugin.scenario.kubernetes import dns_label_problem
from bench_plugin.sharing.base import ApplyError, SharingBackend
from bench_plugin.sharing.kubernetes.backend import ClusterOptions, KubernetesBackend
from bench_plugin.sharing.local import LocalBackend
from bench_plugin.sharing.manual import ManualBackend
from bench_plugin.telemetry.campaign import CampaignTelemetry, TelemetryOptions
from bench_plugin.users import WorkloadUser
from bench_plugin.users.base import Prepared
from bench_plugin.users.state import ClassLoad, LoadState
from bench_plugin.warmup import Builder

logger = logging.getLogger(__name__)

EXIT_CODES = {"completed": 0, "failed": 2, "interrupted": 130}

PLUGIN_ATTRIBUTE = "bench_plugin"
"""Name of the Environment attribute that holds the campaign (``plugin_of`` reads it)."""


def fail(message: str) -> NoReturn:
    """Print ``message`` (one line per problem) and exit with status 2, without a traceback."""
    for line in message.splitlines():
        sys.stderr.write(f"bench_plugin: error: {line}\n")
    sys.stderr.flush()
    sys.exit(2)


FINAL_REPORTS_S = 5.0
"""How long an interrupted master waits for its workers' last samples."""


class BenchPlugin:
    """One campaign inside one Locust process (master or local)."""

    def __init__(self, environment: Environment, scenario: Scenario, request_sets: dict[str, RequestSet],
                 results_dir: Path, backend: SharingBackend, class_names: list[str],
                 resuming: resume.Resuming | None = None, inbox: Inbox | None = None) -> None:
        """``inbox``: on a master, where the workers' messages wait (registered first thing in :func:`register`)."""
        self.environment = environment
        self.scenario = scenario
        self.results_dir = results_dir
        self.no_report = bool(getattr(environment.parsed_options, "no_report", False))
        """``--no-report``: the campaign ends with the store and the summaries; report.html is rendered later."""
        self.events = BenchEvents()
        self.request_sets = request_sets
        self.resuming = resuming
        """The checked resume of a campaign recorded in ``results_dir`` (``--resume``); None for a new one."""
        results_dir.mkdir(parents=True, exist_ok=True)
        try:
            self.recorder = Recorder(results_dir / "results.sqlite")
        except StoreError as exc:
            fail(f"--resume {resuming.recorded.given}: {exc}" if resuming else str(exc))
        if resuming is not None:
            try:
                resume.confirm(resuming)
            except resume.ResumeRefused as exc:
                self.recorder.close()
                fail(str(exc))
        store_request_sets(self.request_sets, results_dir / "inputs")
        self.backend = backend
        self.fleet = Fleet(environment, request_sets=request_sets, scenario_sha256=scenario_sha256(scenario),
                           take=self._take, note=self.recorder.event)
        self.progress: gevent.Greenlet | None = None
        """The progress lines of a headless run (bench_plugin.progress), once started."""
        self.state: LoadState | None = None
        if inbox is not None:
            self.fleet.listen(inbox)
        else:
            self.state = load_state(environment, request_sets)
            self.fleet.attach_local(self.state)
        trials = plan_trials(scenario)
        self.conductor = Conductor(
            scenario=scenario, class_names=class_names, trials=trials, backend=backend, recorder=self.recorder,
            request_sets=self.request_sets, events=self.events, fleet=self.fleet,
            telemetry=CampaignTelemetry(telemetry_options(environment), self.recorder),
            builders=warmup_builders(environment, request_sets),
            done=resuming.plan.done if resuming else None,
        )
        self.live = LiveView(scenario, class_names, len(trials))
        self.live.watch(self.events, results_dir / "results.sqlite")
        if environment.web_ui is not None:  # Locust's own Statistics tab then shows the current stage
            self.events.stage_start.add_listener(lambda **_: environment.stats.reset_all())
        self.greenlet: gevent.Greenlet | None = None
        self.finalized = False
        if resuming is not None:  # the trials are in the store: supersede what runs again
            record = resume.begin(resuming.recorded, resuming.plan, self.recorder, resuming.conditions)
            sys.stderr.write(f"bench_plugin: {resume.describe(resuming, record)}\n")
        else:
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
            self.live.on_sample(sample)

    def live_snapshot(self) -> LiveSnapshot:
        """The live view now, with the GPU figures last sampled."""
        self.live.gpu = self.conductor.telemetry.latest_by_class()
        return self.live.snapshot()

    def on_test_start(self, **_: Any) -> None:
        """Start the conductor (once per campaign)."""
        if self.greenlet is None:
            if self.resuming is None:  # a resumed campaign keeps its first start (each resume has its own)
                self.recorder.set_meta("started_s", time.time())
            collector.settle()
            self.greenlet = gevent.spawn(self.conductor.run)
            options = self.environment.parsed_options
            if getattr(options, "headless", False) and not getattr(options, "only_summary", False):
                self.progress = gevent.spawn(report_progress, self.live_snapshot)

    def on_test_stop(self, **_: Any) -> None:
        """Interrupt a running conductor, cancel what this process has in flight, then write the summary."""
        if self.progress is not None:
            self.progress.kill(block=False)
        if self.greenlet is not None and not self.greenlet.dead:
            self.greenlet.kill(block=True, timeout=120)
            self._last_reports()
        if self.state is not None:
            self.state.stop_all()
        self.finalize()

    def _last_reports(self) -> None:
        """Interrupted on a master: wait (briefly) for the workers' last samples of the stage that was cut short.

        The stage's arrivals were stopped on every worker; their last REPORT carries the samples of
        what they had in flight and the end of each loop. Workers that quit meanwhile are not waited
        for. What the stage's ledger then holds goes on the timeline (``final_accounting``).
        """
        if not self.fleet.distributed or not self.fleet.ledgers:
            return
        key, ledger = next(reversed(self.fleet.ledgers.items()))
        self.fleet.settle([key], time.time() + FINAL_REPORTS_S)
        self.recorder.event("final_accounting", key[0], segment=key[1], stage=key[2], shares=ledger.describe())

    def finalize(self) -> None:
        """Write summary.json and summary.md, close the store, set the exit code, say where results are."""
        if self.finalized:
            return
        self.finalized = True
        if not self.conductor.finished:  # test stopped before the conductor ever ran
            self.backend.restore()
            self.conductor.status = "interrupted"
            self.recorder.set_meta("status", {"status": "interrupted", "reason": "stopped before the first trial",
                                              "ended_s": time.time()})
        from bench_plugin.outputs import write_outputs

        leftovers = self.backend.leftovers()
        try:
            self.recorder.set_meta("restore", {"backend": self.backend.name, "leftovers": leftovers})
            self.recorder.set_meta("load_generators", self.fleet.describe())
            self.recorder.close()
            summary = write_outputs(self.results_dir, report=not self.no_report)
        except Exception as exc:  # Locust would swallow it: say it and fail the exit code instead
            logger.exception("writing the summary or the report failed")
            sys.stderr.write(f"bench_plugin: error: writing the summary or the report failed: {exc}\n")
            self.environment.process_exit_code = 2
            return
        self.environment.process_exit_code = EXIT_CODES.get(self.conductor.status, 2)
        for line in leftovers:  # the cluster (or host) was not left as found: say what is left, fail the run
            sys.stderr.write(f"bench_plugin: error: {self.backend.name} backend could not restore: {line}\n")
            self.environment.process_exit_code = 2
        status, reason = self.conductor.status, self.conductor.reason
        report = None if self.no_report else self.results_dir / "report.html"
        self.live.on_end(status, None if report is None else str(report))
        if self.resuming is not None:
            times = len(self.resuming.recorded.resumes) + 1
            reason = "; ".join(filter(None, [reason, f"resumed {times} time{'s' if times > 1 else ''}"]))
        if status == "failed":
            sys.stderr.write(f"bench_plugin: error: campaign failed: {reason}\n")
        else:
            sys.stderr.write(f"bench_plugin: campaign {status}" + (f" ({reason})" if reason else "") + "\n")
        written = "summary.json, summary.md, results.sqlite" + (
            f"; report.html by `bench-plugin report {self.results_dir}`" if report is None
            else ", report.html, report.md")
        sys.stderr.write(f"bench_plugin: results in {self.results_dir} ({written})\n")
        sys.stderr.flush()
        from bench_plugin.report.terminal import render_answer

        sys.stdout.write(render_answer(summary, report))
        sys.stdout.flush()


def _hosts(environment: Environment, scenario: Scenario) -> dict[str, str]:
    options = environment.parsed_options
    hosts: dict[str, str] = {}
    for name in scenario.classes.names():
        given = [(f"--{name}-host", getattr(options, HOST_OPTIONS[name], None)), ("--host", environment.host),
                 (f"classes.{name}.endpoint", scenario.classes.get(name).endpoint)]
        where, host = next(((w, h) for w, h in given if h), ("", None))
        if host:
            try:
                hosts[name] = check_base_url(where, host)
            except ValueError as exc:
                fail(str(exc))
    return hosts


def _load(environment: Environment, recorded: resume.Recorded | None) -> tuple[Scenario, Path]:
    """The scenario to run: the command line's; resuming, the recorded one with the recorded overrides."""
    options = environment.parsed_options
    if recorded is None:
        return _load_from(options)
    try:
        path, overrides = resume.options_for(recorded, getattr(options, "scenario", None),
                                             getattr(options, "results_dir", None),
                                             **{name: getattr(options, name, None) for name in resume.OVERRIDES})
        return load_scenario(path, **overrides), path
    except (resume.ResumeRefused, ScenarioError) as exc:
        fail(str(exc))


def _recorded(environment: Environment) -> resume.Recorded | None:
    """With ``--resume DIR``: the campaign recorded there (refused in one line if there is nothing to resume)."""
    given = getattr(environment.parsed_options, "resume", None)
    if not given:
        return None
    try:
        return resume.read_campaign(given)
    except resume.ResumeRefused as exc:
        fail(str(exc))


def _load_from(options: Namespace | None) -> tuple[Scenario, Path]:
    if options is None or not getattr(options, "scenario", None):
        fail("--scenario is required (a scenario YAML, e.g. scenarios/day19.yaml)")
    path = Path(options.scenario)
    try:
        scenario = load_scenario(path, arm=options.arm, repeats=options.repeats, stage_duration=options.stage_duration)
    except ScenarioError as exc:
        fail(str(exc))
    return scenario, path


def _warn_short_stages(scenario: Scenario, path: Path) -> None:
    """Log each stage too short for a class's P95 to be bounded (after --stage-duration); the campaign still runs."""
    for line in sample_warnings(scenario):
        logger.warning("%s: %s", path, line)


def telemetry_options(environment: Environment) -> TelemetryOptions:
    """Where the campaign's GPU series come from, per the command line."""
    options = environment.parsed_options
    return TelemetryOptions(dcgm_url=getattr(options, "dcgm_url", None),
                            prometheus_url=getattr(options, "prometheus_url", None),
                            prometheus_lag_s=float(getattr(options, "prometheus_lag", 10.0)))


def _check_prometheus(options: TelemetryOptions) -> None:
    """Refuse --prometheus-url without its client; warn (and go on) when the server does not answer now."""
    if not options.prometheus_url:
        return
    try:
        from bench_plugin.telemetry.prometheus import PrometheusSeries

        with PrometheusSeries(options.prometheus_url) as series:
            reachable = series.check()
    except ImportError as exc:
        fail(f"--prometheus-url: {exc}")
    if not reachable:
        sys.stderr.write(f"bench_plugin: warning: {reachable.reason}; each stage will carry a note instead\n")


def user_classes(environment: Environment) -> dict[str, type[WorkloadUser]]:
    """Workload class -> the locustfile's user class for it (a subclass of one of bench_plugin's users)."""
    return {cls.workload: cls for cls in environment.user_classes if issubclass(cls, WorkloadUser) and cls.workload}


def load_state(environment: Environment, request_sets: dict[str, RequestSet]) -> LoadState:
    """This process's LoadState, able to send every class its locustfile has a user class of."""
    state = LoadState(request_sets, {})
    for name, cls in user_classes(environment).items():
        state.makers[name] = partial(cls.sender, environment, state)
    return state


def warmup_builders(environment: Environment, request_sets: dict[str, RequestSet]) -> dict[str, Builder]:
    """Class -> its user's request builder (``prepare``), made on first use: what the warm-up sends."""
    state = LoadState(request_sets, {})
    classes = user_classes(environment)
    made: dict[str, WorkloadUser] = {}

    def builder(name: str) -> Builder:
        def build(load: ClassLoad, item: dict[str, Any]) -> Prepared:
            if name not in made:
                made[name] = classes[name].sender(environment, state)
            return made[name].prepare(load, item)
        return build

    return {name: builder(name) for name in classes}


def _class_names(environment: Environment, scenario: Scenario, path: Path) -> list[str]:
    present = user_classes(environment)
    names = [name for name in scenario.classes.names() if name in present]
    if not names:
        fail(f"{path}: none of the scenario's classes ({', '.join(scenario.classes.names())}) has a user class "
             f"in this locustfile")
    return names


def _results_dir(environment: Environment, scenario: Scenario) -> Path:
    given = getattr(environment.parsed_options, "results_dir", None)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    path = Path(given) if given else Path("results") / f"{scenario.name}-{stamp}"
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        fail(f"--results-dir {path}: exists and is not an empty directory; results of another campaign would mix in")
    return path


def _register_worker(environment: Environment) -> None:
    """A worker takes its request sets from the master; with its own --scenario it says what that holds.

    The worker's own options are read from its command line again: a master that starts users on a
    worker joining mid-run sends its options along, and Locust copies them over the worker's own
    (``--scenario`` included) before this ``init`` listener runs.
    """
    state = load_state(environment, {})
    hello = Hello(Identity.here(), state.classes)
    own = get_parser().parse_args()
    if getattr(own, "scenario", None):
        scenario, path = _load_from(own)
        try:
            own = build_request_sets(scenario, path.parent)
        except ScenarioError as exc:
            fail(str(exc))
        hello = Hello(hello.identity, hello.classes, scenario_sha256(scenario),
                      {name: rs.sha256 for name, rs in own.items()})
    _route_ctrl_c_to_main_greenlet(environment)
    WorkerLink(environment, state, hello).start()


def _route_ctrl_c_to_main_greenlet(environment: Environment) -> None:
    """Deliver Ctrl-C to the main greenlet, where Locust stops the test (or quits the worker) cleanly.

    Python raises KeyboardInterrupt in whatever code runs when SIGINT arrives. Under load that is often
    a request greenlet (seen on the H200: in the middle of a JSON decode; on a worker, in a request's
    connect), which then dies with a traceback instead of stopping the run. Workers need this as much
    as the master: Ctrl-C in a terminal reaches every process of its group. Called from the ``init``
    listener, which runs in the main greenlet.

    Locust catches the KeyboardInterrupt only while the main greenlet waits for the test (a worker:
    for its runner). A first Ctrl-C that comes when the process is already on its way out (the
    headless test of a master or local runner stopping, e.g. because its last worker quit; Locust
    quitting) is left to that stop: thrown into the main greenlet then, it would cut the shutdown
    short with a traceback. A second Ctrl-C is always thrown. The check and the throw are one hub
    callback, so the state checked is the state the main greenlet is in when it is thrown.
    """
    main = gevent.getcurrent()
    hub = gevent.get_hub()
    presses: list[bool] = []
    quitting: list[bool] = []
    environment.events.quitting.add_listener(lambda **_: quitting.append(True))

    def deliver() -> None:
        presses.append(True)
        runner = environment.runner
        headless = bool(getattr(environment.parsed_options, "headless", False))
        stopping = headless and not isinstance(runner, WorkerRunner) and getattr(runner, "state", None) in _STOPPING
        if len(presses) == 1 and (quitting or stopping):
            logger.info("Ctrl-C: the run is already stopping (Ctrl-C again to force it)")
            return
        main.throw(KeyboardInterrupt)

    gevent.signal_handler(signal.SIGINT, hub.loop.run_callback, deliver)


_STOPPING = (STATE_CLEANUP, STATE_STOPPING, STATE_STOPPED)
"""Runner states of a test that is stopping or stopped (headless: Locust quits next)."""


def plugin_of(environment: Environment | None) -> BenchPlugin | None:
    """The campaign registered on ``environment`` (None on a worker, or before register())."""
    plugin = getattr(environment, PLUGIN_ATTRIBUTE, None)
    return plugin if isinstance(plugin, BenchPlugin) else None


def register(environment: Environment) -> BenchPlugin | None:
    """Attach the plugin to a Locust Environment; returns the campaign (None on a worker).

    Call it from the locustfile's ``init`` listener; importing bench_plugin does nothing by itself.
    """
    if isinstance(environment.runner, WorkerRunner):
        _register_worker(environment)
        return None
    # before anything that lets a worker's hello in: the master's handlers must already be there
    inbox = Inbox(environment.runner) if isinstance(environment.runner, MasterRunner) else None
    recorded = _recorded(environment)
    scenario, path = _load(environment, recorded)
    _warn_short_stages(scenario, path)
    class_names = _class_names(environment, scenario, path)
    try:
        request_sets = build_request_sets(scenario, path.parent)
    except ScenarioError as exc:
        fail(str(exc))
    results_dir = recorded.directory if recorded else _results_dir(environment, scenario)
    backend = _backend(environment, scenario, class_names, results_dir)
    try:
        for arm in scenario.arms:
            backend.check(arm)
    except ApplyError as exc:
        fail(f"{path}: {exc}")
    _check_prometheus(telemetry_options(environment))
    conditions = collect_conditions(backend)
    resuming = _resuming(recorded, scenario, class_names, request_sets, conditions) if recorded else None
    plugin = BenchPlugin(environment, scenario, request_sets, results_dir, backend, class_names, resuming, inbox)
    _route_ctrl_c_to_main_greenlet(environment)
    if resuming is None:
        _record_campaign(plugin, path, scenario, class_names, conditions)
    setattr(environment, PLUGIN_ATTRIBUTE, plugin)
    environment.bench_plugin_events = plugin.events  # type: ignore[attr-defined]
    webui.attach(plugin)
    environment.events.test_start.add_listener(plugin.on_test_start)
    environment.events.test_stop.add_listener(plugin.on_test_stop)
    environment.events.quitting.add_listener(lambda **_: plugin.on_test_stop())
    return plugin


def _backend(environment: Environment, scenario: Scenario, class_names: list[str], results_dir: Path) -> SharingBackend:
    """The backend the command line and the scenario ask for; a bad option value fails in one line."""
    options = environment.parsed_options
    chosen = getattr(options, "backend", None)
    if chosen is not None and chosen not in BACKENDS:
        fail(f"--backend {chosen!r}: not a backend (one of {', '.join(BACKENDS)})")
    try:
        urls = parse_service_urls(getattr(options, "service_url", None), scenario.classes.names())
    except ValueError as exc:
        fail(str(exc))
    namespace = getattr(options, "namespace", None)
    if namespace is not None and (problem := dns_label_problem(namespace)):
        fail(f"--namespace {namespace!r}: {problem}")
    explicit_host = bool(environment.host) or any(getattr(options, HOST_OPTIONS[n], None) for n in class_names)
    if explicit_host and chosen in ("local", "kubernetes"):
        fail(f"--backend {chosen}: an explicit host (--host, --<class>-host) means the manual backend; drop one")
    name = "manual" if explicit_host else chosen or scenario.backend
    if scenario.disruption is not None and name != "kubernetes":
        fail(f"disruption (kind {scenario.disruption.kind}) needs the kubernetes backend, not {name}")
    if name == "manual":
        return ManualBackend(scenario, _hosts(environment, scenario))
    if name == "kubernetes":
        return KubernetesBackend(scenario, ClusterOptions(kubeconfig=getattr(options, "kubeconfig", None),
                                                          namespace=namespace, service_urls=urls))
    return LocalBackend(scenario, results_dir / "logs")


def _resuming(recorded: resume.Recorded, scenario: Scenario, class_names: list[str],
              request_sets: dict[str, RequestSet], conditions: dict[str, Any]) -> resume.Resuming:
    """The checked plan of a resume; a different experiment is refused in one line naming what differs."""
    try:
        resuming = resume.prepare(recorded, trials=plan_trials(scenario), scenario_sha256=scenario_sha256(scenario),
                                  classes=class_names, request_sets={n: rs.sha256 for n, rs in request_sets.items()},
                                  conditions=conditions)
    except resume.ResumeRefused as exc:
        fail(str(exc))
    for line in resume.other_units(recorded.meta.get("conditions") or {}, conditions):
        sys.stderr.write(f"bench_plugin: warning: --resume {recorded.given}: {line}\n")
    return resuming


def _record_campaign(plugin: BenchPlugin, path: Path, scenario: Scenario, class_names: list[str],
                     conditions: dict[str, Any]) -> None:
    options = plugin.environment.parsed_options
    rec = plugin.recorder
    rec.set_meta("schema", "bench_plugin.results/1")
    rec.set_meta("scenario", {
        "name": scenario.name, "path": str(path), "sha256": scenario_sha256(scenario),
        "resolved": scenario.model_dump(mode="json"),
    })
    rec.set_meta("overrides", {name: getattr(options, name, None) for name in resume.OVERRIDES})
    rec.set_meta("classes", class_names)
    rec.set_meta("request_sets", {name: rs.describe() for name, rs in plugin.request_sets.items()})
    rec.set_meta("conditions", conditions)
    (plugin.results_dir / "scenario.yaml").write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    (plugin.results_dir / "scenario.resolved.json").write_text(
        json.dumps(scenario.model_dump(mode="json"), indent=2), encoding="utf-8"
    )
