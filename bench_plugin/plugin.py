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

What the command line asks for (scenario, results directory, backend, hosts, telemetry) is read and
checked in launch/resolve.py, which refuses a bad value in one line before anything starts.

``--resume DIR`` continues an interrupted campaign in its own directory (launch/resume.py): the checks that
it is the same experiment come before anything is changed; the conductor is then told what is done.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import sys
import time
from functools import partial
from typing import Any

import gevent
from locust.env import Environment
from locust.event import EventHook
from locust.runners import STATE_CLEANUP, STATE_STOPPED, STATE_STOPPING, MasterRunner, WorkerRunner

from bench_plugin.launch import resolve, resume
from bench_plugin.launch.record import Launch, is_headless, worker_scenario
from bench_plugin.launch.record import build as build_launch
from bench_plugin.live import webui
from bench_plugin.live.progress import report_progress
from bench_plugin.live.view import LiveSnapshot, LiveView
from bench_plugin.loadgen import allocator, collector
from bench_plugin.loadgen.fleet import Fleet, Inbox
from bench_plugin.loadgen.protocol import Hello, Identity
from bench_plugin.loadgen.state import LoadState
from bench_plugin.loadgen.worker import WorkerLink
from bench_plugin.results.provenance import generator_process
from bench_plugin.results.record import CampaignRecord, Restore, StoredScenario
from bench_plugin.results.recorder import Recorder
from bench_plugin.results.samples import Sample
from bench_plugin.results.store import StoreError, StoreWriteError
from bench_plugin.results.summary import Ending, RequestSetRef
from bench_plugin.results.timeline import Entry, FinalAccounting
from bench_plugin.results.words import CampaignState
from bench_plugin.run.conductor import Conductor
from bench_plugin.run.hooks import BenchEvents
from bench_plugin.run.readiness import Prober
from bench_plugin.run.schedule import plan_trials
from bench_plugin.run.warmup import Builder
from bench_plugin.scenario.request_sets import RequestSet, store_request_sets
from bench_plugin.telemetry.campaign import CampaignTelemetry
from bench_plugin.users import WorkloadUser

logger = logging.getLogger(__name__)

EXIT_CODES = {CampaignState.COMPLETED: 0, CampaignState.FAILED: 2, CampaignState.INTERRUPTED: 130}

PLUGIN_ATTRIBUTE = "bench_plugin"
"""Name of the Environment attribute that holds the campaign (``plugin_of`` reads it)."""


FINAL_REPORTS_S = 5.0
"""How long an interrupted master waits for its workers' last samples."""


class BenchPlugin:
    """One campaign inside one Locust process (master or local)."""

    def __init__(self, environment: Environment, launch: Launch, inbox: Inbox | None = None) -> None:
        """``launch``: the campaign as its command line resolved it (launch/record.py); ``inbox``: on a master,
        where the workers' messages wait (registered first thing in :func:`register`)."""
        self.environment = environment
        self.launch = launch
        scenario, request_sets, results_dir = launch.scenario, dict(launch.request_sets), launch.results_dir
        backend, class_names, resuming = launch.backend, list(launch.class_names), launch.resuming
        self.scenario = scenario
        self.results_dir = results_dir
        self.no_report = launch.no_report
        """``--no-report``: the campaign ends with the store and the summaries; report.html is rendered later."""
        self.web_base_path = launch.web_base_path
        """Locust's ``--web-base-path`` (live/webui.py serves the plugin's pages under it)."""
        self.generators = launch.generators
        """How the number of load-generating processes was decided (launch/processes.py; the web UI shows it)."""
        self.answer: str | None = None
        """A headless campaign's answer, printed after Locust's own final tables (``print_answer``, on quit)."""
        self.stop_requested: str | None = None
        """Who asked Locust to stop the test, where it was not a signal (the web UI's Stop button)."""
        self.all_lost: str | None = None
        """Why every worker is gone, where that fails the campaign (Fleet.all_lost), once a stop has seen it."""
        self.events = BenchEvents()
        self.request_sets = request_sets
        self.resuming = resuming
        """The checked resume of a campaign recorded in ``results_dir`` (``--resume``); None for a new one."""
        results_dir.mkdir(parents=True, exist_ok=True)
        try:
            self.recorder = Recorder(results_dir / "results.sqlite", upgrade=resuming is not None)
        except StoreError as exc:
            resolve.fail(f"--resume {resuming.recorded.given}: {exc}" if resuming else str(exc))
        if resuming is not None:
            try:
                resume.confirm(resuming)
            except resume.ResumeRefused as exc:
                self.recorder.close()
                resolve.fail(str(exc))
        store_request_sets(self.request_sets, results_dir / "inputs")
        self.backend = backend
        self.fleet = Fleet(environment, request_sets=request_sets, scenario_sha256=launch.scenario_sha256,
                           take=self._take, note=self._note)
        self.progress: gevent.Greenlet | None = None
        """The progress lines of a headless run (bench_plugin.live.progress), once started."""
        self.state: LoadState | None = None
        if inbox is not None:
            self.fleet.listen(inbox)
        else:
            self.state = load_state(environment, request_sets)
            self.fleet.attach_local(self.state)
        trials = plan_trials(scenario)
        users = CampaignUsers(environment, request_sets)
        self.conductor = Conductor(
            scenario=scenario, class_names=class_names, trials=trials, backend=backend, recorder=self.recorder,
            request_sets=self.request_sets, events=self.events, fleet=self.fleet,
            telemetry=CampaignTelemetry(launch.telemetry, self.recorder, server_metrics={
                name: scenario.classes.get(name).metrics_url for name in class_names}),
            builders=users.builders(), probers=users.probers(),
            done=resuming.plan.done if resuming else None,
            borrowed=launch.warm_start_from.brackets if launch.warm_start_from else None,
        )
        self.live = LiveView(scenario, class_names, len(trials))
        self.live.watch(self.events, results_dir / "results.sqlite")
        if environment.web_ui is not None:  # Locust's own Statistics tab then shows the current stage
            self.events.stage_start.add_listener(lambda **_: environment.stats.reset_all())
        self.greenlet: gevent.Greenlet | None = None
        self.stopping: gevent.Greenlet | None = None
        """The stop under way (``_stop``), in a greenlet of its own: see ``on_test_stop``."""
        self.finalized = False
        if resuming is not None:  # the trials are in the store: supersede what runs again
            record = resume.begin(resuming.recorded, resuming.plan, self.recorder, resuming.provenance)
            sys.stderr.write(f"bench_plugin: {resume.describe(resuming, record)}\n")
            from bench_plugin.report.outputs import remove_outputs

            remove_outputs(self.results_dir)  # they show the store before this resume: written anew at the end
        else:
            for trial in trials:
                self.recorder.add_trial(trial.id, trial.position, trial.arm, trial.repeat)

    @property
    def finished(self) -> bool:
        """Whether the conductor has run to its end (the shape then ends the test)."""
        return self.conductor.finished

    def _note(self, entry: Entry) -> None:
        """A load generator's entry on the timeline; a failed write is the conductor's to act on (it stops)."""
        with contextlib.suppress(StoreWriteError):  # kept as the recorder's failure, which the conductor checks
            self.recorder.note(entry)

    def _take(self, sample: Sample) -> None:
        if not self.finalized:
            self.conductor.on_sample(sample)
            self.live.on_sample(sample)

    def live_snapshot(self) -> LiveSnapshot:
        """The live view now, with the GPU figures last sampled and what the servers last said."""
        self.live.gpu = self.conductor.telemetry.latest_by_class()
        self.live.server = self.conductor.telemetry.latest_server()
        return self.live.snapshot()

    def on_test_start(self, **_: Any) -> None:
        """Start the conductor (once per campaign)."""
        if self.greenlet is None:
            if self.resuming is None:  # a resumed campaign keeps its first start (each resume has its own)
                self.recorder.record(CampaignRecord(started_s=time.time()))
            collector.settle()
            allocator.settle()
            self.greenlet = gevent.spawn(self.conductor.run)
            if self.launch.progress:
                self.progress = gevent.spawn(report_progress, self.live_snapshot)

    def on_test_stop(self, **_: Any) -> None:
        """Interrupt a running conductor, cancel what this process has in flight, then write the summary.

        Locust calls this from the greenlet that stops the test, which may be its runner's own: when the last
        worker quits, the runner stops the test in its greenlet, and a headless main that sees the shape end
        meanwhile quits the runner, killing that greenlet. The stop therefore runs in a greenlet of its own,
        once; every caller (this listener, and the ``quitting`` one before Locust reads the exit code) waits
        for it, so the summary and the exit code are written whichever caller is cut short."""
        if self.stopping is None:
            self.stopping = gevent.spawn(self._stop)
        self.stopping.get()  # what went wrong in it is raised here, as it was in the listener itself

    def _stop(self) -> None:
        if self.progress is not None:
            self.progress.kill(block=False)
        if self.greenlet is not None and not self.greenlet.dead:
            signum = stopped_by(self.environment)
            gone = None if signum is not None or self.stop_requested else self.fleet.all_lost()
            cause = stop_cause(signum) if signum is not None else self.stop_requested or (gone and gone[0])
            if cause:
                self.conductor.stop_cause = cause
            if gone is not None and gone[1]:  # no worker was left: before the kill, which a second stop may outrun
                self.all_lost = gone[0]
            self.greenlet.kill(block=True, timeout=120)
            self._failed_if_all_lost()
            self._last_reports()
        if self.state is not None:
            self.state.stop_all()
        self.finalize()

    def _failed_if_all_lost(self) -> None:
        """The campaign failed where every worker was lost (not quit) and it ended interrupted: said once, whichever of
        the stop's listeners (Locust calls more than one) gets here first once the conductor has ended."""
        if self.all_lost is not None and self.conductor.finished and self.conductor.status == CampaignState.INTERRUPTED:
            self.conductor.status = CampaignState.FAILED
            self.conductor.reason = f"{self.all_lost}; the campaign stopped there (what was measured is kept)"
            self.recorder.record(CampaignRecord(status=Ending(status=CampaignState.FAILED, reason=self.conductor.reason,
                                                              ended_s=time.time())))

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
        self.recorder.note(FinalAccounting(segment=key[1], stage=key[2], shares=ledger.describe()), key[0])

    def finalize(self) -> None:
        """Write summary.json and summary.md, close the store, set the exit code, say where results are."""
        if self.finalized:
            return
        self.finalized = True
        self._failed_if_all_lost()
        signum = stopped_by(self.environment)
        if not self.conductor.finished:  # test stopped before the conductor ever ran
            self.backend.restore()
            self.conductor.status = CampaignState.INTERRUPTED
            self.conductor.reason = ("stopped before the first trial" if signum is None
                                     else f"the run was stopped ({stop_cause(signum)}) before the first trial")
        elif self.conductor.status == CampaignState.INTERRUPTED and signum is not None:
            self.conductor.reason = f"the run was stopped ({stop_cause(signum)})"  # Locust's SIGTERM handler ran first
        from bench_plugin.report.outputs import write_outputs

        leftovers = self.backend.leftovers()
        try:
            if self.conductor.status == CampaignState.INTERRUPTED:
                self.recorder.record(CampaignRecord(status=Ending(status=CampaignState.INTERRUPTED,
                                                                  reason=self.conductor.reason, ended_s=time.time())))
            self.recorder.record(CampaignRecord(restore=Restore(backend=self.backend.name, leftovers=leftovers),
                                                load_generators=self.fleet.describe()))
            self.recorder.close()
            summary = write_outputs(self.results_dir, report=not self.no_report)
        except Exception as exc:  # Locust would swallow it: say it and fail the exit code instead
            logger.exception("writing the summary or the report failed")
            sys.stderr.write(f"bench_plugin: error: writing the summary or the report failed: {exc}\n")
            self.environment.process_exit_code = 2
            return
        self.environment.process_exit_code = EXIT_CODES.get(self.conductor.status, 2)
        if self.conductor.status == CampaignState.INTERRUPTED and signum is not None:
            self.environment.process_exit_code = 128 + signum  # as a shell reports a process the signal ended
        for line in leftovers:  # the cluster (or host) was not left as found: say what is left, fail the run
            sys.stderr.write(f"bench_plugin: error: {self.backend.name} backend could not restore: {line}\n")
            self.environment.process_exit_code = 2
        status, reason = self.conductor.status, self.conductor.reason
        report = None if self.no_report else self.results_dir / "report.html"
        self.live.on_end(status, None if report is None else str(report), reason)
        if self.resuming is not None:
            times = len(self.resuming.recorded.resumes) + 1
            reason = "; ".join(filter(None, [reason, f"resumed {times} time{'s' if times > 1 else ''}"]))
        if status == CampaignState.FAILED:
            sys.stderr.write(f"bench_plugin: error: campaign failed: {reason}\n")
        else:
            sys.stderr.write(f"bench_plugin: campaign {status}" + (f" ({reason})" if reason else "") + "\n")
        written = "summary.json, summary.md, results.sqlite" + (
            f"; report.html by `bench-plugin report {self.results_dir}`" if report is None
            else ", report.html, report.md")
        sys.stderr.write(f"bench_plugin: results in {self.results_dir} ({written})\n")
        sys.stderr.flush()
        from bench_plugin.report.terminal import render_answer

        self.answer = render_answer(summary, report)
        if not self.launch.headless:  # the web UI's process may run on for long: say it now
            self.print_answer()

    def print_answer(self) -> None:
        """Print the campaign's answer once: a headless run's on Locust's ``quit`` event, which fires after
        Locust has printed its own final tables, so the answer is the last thing on screen."""
        answer, self.answer = self.answer, None
        if answer:
            sys.stdout.write(answer)
            sys.stdout.flush()


def load_state(environment: Environment, request_sets: dict[str, RequestSet]) -> LoadState:
    """This process's LoadState, able to send every class its locustfile has a user class of."""
    state = LoadState(request_sets, {})
    for name, cls in resolve.user_classes(environment).items():
        state.makers[name] = partial(cls.sender, environment, state)
    return state


class CampaignUsers:
    """The campaign's own instance of each class's user, made on first use: it builds the warm-up's requests
    (``prepare``) and sends the readiness probes (``probe``), which Locust's statistics never see."""

    def __init__(self, environment: Environment, request_sets: dict[str, RequestSet]) -> None:
        self.environment = environment
        self.state = LoadState(request_sets, {})
        self.classes = resolve.user_classes(environment)
        self.made: dict[str, WorkloadUser] = {}

    def user(self, name: str) -> WorkloadUser:
        """Class ``name``'s user, with a request event of its own that nothing listens to."""
        if name not in self.made:
            user = self.made[name] = self.classes[name].sender(self.environment, self.state)
            user.client.request_event = EventHook()
        return self.made[name]

    def builders(self) -> dict[str, Builder]:
        """Class -> its user's request builder: what the warm-up sends."""
        def builder(name: str) -> Builder:
            return lambda load, item: self.user(name).prepare(load, item)
        return {name: builder(name) for name in self.classes}

    def probers(self) -> dict[str, Prober]:
        """Class -> its user's probe: what readiness sends."""
        def prober(name: str) -> Prober:
            return lambda load, item: self.user(name).probe(load, item)
        return {name: prober(name) for name in self.classes}


def _register_worker(environment: Environment) -> None:
    """A worker takes its request sets from the master; with its own --scenario it says what that holds."""
    state = load_state(environment, {})
    own_sha256, own_sets = worker_scenario() or (None, {})
    hello = Hello(Identity.here(), state.classes, own_sha256, own_sets, process=generator_process())
    _route_ctrl_c_to_main_greenlet(environment, headless=False)
    WorkerLink(environment, state, hello).start()


def _route_ctrl_c_to_main_greenlet(environment: Environment, headless: bool) -> None:
    """Deliver Ctrl-C, SIGTERM and SIGHUP to the main greenlet, where Locust stops the test (or quits the
    worker) cleanly; which signal it was is kept for the exit status (stopped_by).

    Python raises KeyboardInterrupt in whatever code runs when SIGINT arrives. Under load that is often
    a request greenlet (seen on the H200: in the middle of a JSON decode; on a worker, in a request's
    connect), which then dies with a traceback instead of stopping the run. Workers need this as much
    as the master: Ctrl-C in a terminal reaches every process of its group. Called from the ``init``
    listener, which runs in the main greenlet.

    SIGTERM (what Kubernetes, systemd and ``docker stop`` send) and SIGHUP (a closed terminal or ssh
    session) stop the run as Ctrl-C does: the stage in flight is kept as interrupted, the summary written,
    and the process exits 128 + the signal's number (143, 129). Left alone, both killed a headless run at
    once, without a summary: Locust installs its own SIGTERM handler only after a headless shape run, and
    none for SIGHUP. Where Locust's SIGTERM handler is already in place (the web UI, a worker), it quits
    the process itself (a first Ctrl-C there only stops the test), so SIGTERM is only noted here, and
    SIGHUP becomes a SIGTERM.

    Locust catches the KeyboardInterrupt only while the main greenlet waits for the test (a worker:
    for its runner). A first signal that comes when the process is already on its way out (the
    headless test of a master or local runner stopping, e.g. because its last worker quit; Locust
    quitting) is left to that stop: thrown into the main greenlet then, it would cut the shutdown
    short with a traceback. So is one that comes before a headless test has started (the campaign
    being set up, a resume reading its store, a master waiting for its workers): it is noted, and
    thrown once the test starts, so the campaign stops as it would a moment later, its store as the
    stop leaves it. A second one is always thrown. The check and the throw are one hub callback, so
    the state checked is the state the main greenlet is in when it is thrown.
    """
    main = gevent.getcurrent()
    hub = gevent.get_hub()
    presses: list[int] = []
    quitting: list[bool] = []
    started: list[bool] = []
    environment.events.quitting.add_listener(lambda **_: quitting.append(True))

    def start(**_: object) -> None:
        started.append(True)
        if headless and len(presses) == 1:  # noted before the test started: the test stops now
            hub.loop.run_callback(main.throw, KeyboardInterrupt)

    environment.events.test_start.add_listener(start)

    def deliver(signum: int) -> None:
        presses.append(signum)
        if stopped_by(environment) is None:
            setattr(environment, STOP_SIGNAL_ATTRIBUTE, signum)
        runner = environment.runner
        if not headless and signum != signal.SIGINT:  # the web UI, a worker: Locust's SIGTERM handler quits
            if signum != signal.SIGTERM:
                os.kill(os.getpid(), signal.SIGTERM)  # SIGHUP: the terminal is gone, so quit (not only stop)
            return
        stopping = headless and getattr(runner, "state", None) in _STOPPING
        if len(presses) == 1 and (quitting or stopping):
            logger.info("%s: the run is already stopping (Ctrl-C again to force it)", signal.Signals(signum).name)
            return
        if len(presses) == 1 and headless and not started:
            logger.info("%s: the run stops as soon as it has started (Ctrl-C again to force it)",
                        signal.Signals(signum).name)
            return
        main.throw(KeyboardInterrupt)

    for signum in STOP_SIGNALS:
        gevent.signal_handler(signum, hub.loop.run_callback, deliver, signum)


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
"""The signals that stop a run as Ctrl-C does."""
STOP_SIGNAL_ATTRIBUTE = "bench_plugin_stop_signal"
"""Name of the Environment attribute that holds the first stop signal received (stopped_by reads it)."""


def stop_cause(signum: int) -> str:
    """How a campaign's reason names a stop signal."""
    return "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name


def stopped_by(environment: Environment) -> int | None:
    """The first stop signal (STOP_SIGNALS) this process received, or None."""
    signum = getattr(environment, STOP_SIGNAL_ATTRIBUTE, None)
    return signum if isinstance(signum, int) else None


_STOPPING = (STATE_CLEANUP, STATE_STOPPING, STATE_STOPPED)
"""Runner states of a test that is stopping or stopped (headless: Locust quits next)."""


def plugin_of(environment: Environment | None) -> BenchPlugin | None:
    """The campaign registered on ``environment`` (None on a worker, or before register())."""
    plugin = getattr(environment, PLUGIN_ATTRIBUTE, None)
    return plugin if isinstance(plugin, BenchPlugin) else None


def register(environment: Environment) -> BenchPlugin | None:
    """Attach the plugin to a Locust Environment; returns the campaign (None on a worker).

    Call it from the locustfile's ``init`` listener; importing bench_plugin does nothing by itself. The
    command line is read once, into the launch record (launch/record.py), every refusal before anything starts.
    """
    if isinstance(environment.runner, WorkerRunner):
        _register_worker(environment)
        return None
    # before anything that lets a worker's hello in: the master's handlers must already be there
    inbox = Inbox(environment.runner) if isinstance(environment.runner, MasterRunner) else None
    # before a resume touches the store: a Ctrl-C from here on stops the campaign once it has started
    _route_ctrl_c_to_main_greenlet(environment, headless=is_headless(environment))
    launch = build_launch(environment)
    plugin = BenchPlugin(environment, launch, inbox)
    if launch.resuming is None:
        _record_campaign(plugin, launch)
    # a resume records them again: the record says how the last process that ran the campaign was set up
    plugin.recorder.record(CampaignRecord(generator_sizing=launch.generators,
                                          master_process=generator_process() if inbox is not None else None))
    setattr(environment, PLUGIN_ATTRIBUTE, plugin)
    environment.bench_plugin_events = plugin.events  # type: ignore[attr-defined]
    webui.attach(plugin)
    environment.events.test_start.add_listener(plugin.on_test_start)
    environment.events.test_stop.add_listener(plugin.on_test_stop)
    environment.events.quitting.add_listener(lambda **_: plugin.on_test_stop())
    environment.events.quit.add_listener(lambda **_: plugin.print_answer())
    return plugin


def _record_campaign(plugin: BenchPlugin, launch: Launch) -> None:
    rec = plugin.recorder
    scenario = launch.scenario
    rec.record(CampaignRecord(
        scenario=StoredScenario(name=scenario.name, path=str(launch.scenario_path), sha256=launch.scenario_sha256,
                                resolved=scenario),
        overrides=launch.overrides, classes=list(launch.class_names), warm_start_from=launch.warm_start_from,
        request_sets={name: RequestSetRef(workload=rs.workload, count=len(rs), sha256=rs.sha256, source=rs.source)
                      for name, rs in launch.request_sets.items()},
        conditions=launch.provenance))
    (plugin.results_dir / "scenario.yaml").write_text(launch.scenario_path.read_text(encoding="utf-8"),
                                                      encoding="utf-8")
    (plugin.results_dir / "scenario.resolved.json").write_text(
        json.dumps(scenario.model_dump(mode="json"), indent=2), encoding="utf-8"
    )
