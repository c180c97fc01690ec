"""From Locust's parsed options to a campaign's pieces, each bad value refused in one line.

The scenario (the command line's, or the one recorded in ``--resume DIR``), the classes the
locustfile can send, the results directory, the backend that applies the arms and the hosts of the
manual one, where the GPU series come from, and the earlier campaign's brackets the searches start
from (``--warm-start-from``). Every refusal goes through :func:`fail`: one line
per problem on stderr and exit status 2, before any server starts or any request is sent.
"""

from __future__ import annotations

import logging
import sys
import tempfile
import time
from argparse import Namespace
from pathlib import Path
from typing import NoReturn

from locust.env import Environment

from bench_plugin.analysis.planning import sample_warnings
from bench_plugin.launch import resume, warm_from
from bench_plugin.launch.backend_choice import HOST_OPTIONS, backend_name
from bench_plugin.launch.options import check_base_url, parse_service_urls
from bench_plugin.results.summary import Overrides, Provenance, WarmStartFrom
from bench_plugin.run.schedule import plan_trials
from bench_plugin.scenario import Scenario, ScenarioError, load_scenario
from bench_plugin.scenario.kubernetes import dns_label_problem
from bench_plugin.scenario.request_sets import RequestSet
from bench_plugin.sharing.base import SharingBackend
from bench_plugin.sharing.kubernetes.backend import ClusterOptions, KubernetesBackend
from bench_plugin.sharing.local import LocalBackend
from bench_plugin.sharing.manual import ManualBackend
from bench_plugin.telemetry.campaign import TelemetryOptions
from bench_plugin.users import WorkloadUser

logger = logging.getLogger(__name__)


def fail(message: str) -> NoReturn:
    """Print ``message`` (one line per problem) and exit with status 2, without a traceback."""
    for line in message.splitlines():
        sys.stderr.write(f"bench_plugin: error: {line}\n")
    sys.stderr.flush()
    sys.exit(2)


def user_classes(environment: Environment) -> dict[str, type[WorkloadUser]]:
    """Workload class -> the locustfile's user class for it (a subclass of one of bench_plugin's users)."""
    return {cls.workload: cls for cls in environment.user_classes if issubclass(cls, WorkloadUser) and cls.workload}


def recorded_campaign(environment: Environment) -> resume.Recorded | None:
    """With ``--resume DIR``: the campaign recorded there (refused in one line if there is nothing to resume)."""
    given = getattr(environment.parsed_options, "resume", None)
    if not given:
        return None
    try:
        return resume.read_campaign(given)
    except resume.ResumeRefused as exc:
        fail(str(exc))


def load(environment: Environment, recorded: resume.Recorded | None, given: Overrides) -> tuple[Scenario, Path]:
    """The scenario to run: the command line's; resuming, the recorded one with the recorded overrides (those
    ``given`` on the command line must match them)."""
    options = environment.parsed_options
    if recorded is None:
        return load_from(options)
    try:
        path, overrides = resume.options_for(recorded, getattr(options, "scenario", None),
                                             getattr(options, "results_dir", None), given)
        return load_scenario(path, **overrides.model_dump()), path
    except (resume.ResumeRefused, ScenarioError) as exc:
        fail(str(exc))


def load_from(options: Namespace | None) -> tuple[Scenario, Path]:
    if options is None or not getattr(options, "scenario", None):
        fail("--scenario is required (a scenario YAML, e.g. scenarios/day19.yaml)")
    path = Path(options.scenario)
    try:
        scenario = load_scenario(path, arm=options.arm, repeats=options.repeats, stage_duration=options.stage_duration)
    except ScenarioError as exc:
        fail(str(exc))
    return scenario, path


def warn_short_stages(scenario: Scenario, path: Path) -> None:
    """Log each stage too short for a class's P95 to be bounded (after --stage-duration); the campaign still runs."""
    for line in sample_warnings(scenario):
        logger.warning("%s: %s", path, line)


def class_names(environment: Environment, scenario: Scenario, path: Path) -> list[str]:
    present = user_classes(environment)
    names = [name for name in scenario.classes.names() if name in present]
    if not names:
        fail(f"{path}: none of the scenario's classes ({', '.join(scenario.classes.names())}) has a user class "
             f"in this locustfile")
    return names


def results_dir(environment: Environment, scenario: Scenario) -> Path:
    given = getattr(environment.parsed_options, "results_dir", None)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    path = Path(given) if given else Path("results") / f"{scenario.name}-{stamp}"
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        fail(f"--results-dir {path}: exists and is not an empty directory; results of another campaign would mix in")
    problem = unwritable(path)
    if problem is not None:
        fail(f"--results-dir {path}: cannot write there ({problem})")
    return path


def unwritable(path: Path) -> str | None:
    """Why a directory cannot be made and written at ``path`` (a read-only file system, a file in the way), or
    None; it creates nothing (a probe file in the nearest existing directory is removed at once)."""
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        return f"{existing} is not a directory"
    try:
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


def backend(environment: Environment, scenario: Scenario, class_names: list[str], results_dir: Path) -> SharingBackend:
    """The backend the command line and the scenario ask for; a bad option value fails in one line."""
    options = environment.parsed_options
    try:
        name = backend_name(options, scenario, class_names, environment.host)
        urls = parse_service_urls(getattr(options, "service_url", None), scenario.classes.names())
    except ValueError as exc:
        fail(str(exc))
    namespace = getattr(options, "namespace", None)
    if namespace is not None and (problem := dns_label_problem(namespace)):
        fail(f"--namespace {namespace!r}: {problem}")
    if name == "manual":
        return ManualBackend(scenario, hosts(environment, scenario))
    if name == "kubernetes":
        return KubernetesBackend(scenario, ClusterOptions(kubeconfig=getattr(options, "kubeconfig", None),
                                                          namespace=namespace, service_urls=urls))
    return LocalBackend(scenario, results_dir / "logs")


def hosts(environment: Environment, scenario: Scenario) -> dict[str, str]:
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


def telemetry_options(environment: Environment) -> TelemetryOptions:
    """Where the campaign's GPU series come from, per the command line."""
    options = environment.parsed_options
    return TelemetryOptions(dcgm_url=getattr(options, "dcgm_url", None),
                            prometheus_url=getattr(options, "prometheus_url", None),
                            prometheus_lag_s=float(getattr(options, "prometheus_lag", 10.0)))


def check_prometheus(options: TelemetryOptions) -> None:
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


def check_server_metrics(scenario: Scenario, class_names: list[str], options: TelemetryOptions, path: Path) -> None:
    """Refuse a class that reads its server's metrics through Prometheus (``metrics_url: prometheus``) without
    --prometheus-url: there would be no Prometheus to ask."""
    if options.prometheus_url:
        return
    through = [name for name in class_names if scenario.classes.get(name).metrics_url == "prometheus"]
    if through:
        fail(f"{path}: classes.{through[0]}.metrics_url: 'prometheus' needs --prometheus-url (the Prometheus that "
             "scrapes its server)")


def resuming(recorded: resume.Recorded, scenario: Scenario, sha256: str, class_names: list[str],
              request_sets: dict[str, RequestSet], provenance: Provenance) -> resume.Resuming:
    """The checked plan of a resume; a different experiment is refused in one line naming what differs."""
    try:
        resuming = resume.prepare(recorded, trials=plan_trials(scenario), scenario_sha256=sha256,
                                  classes=class_names, request_sets={n: rs.sha256 for n, rs in request_sets.items()},
                                  provenance=provenance)
    except resume.ResumeRefused as exc:
        fail(str(exc))
    for line in resume.other_units(recorded.record.conditions or Provenance(), provenance):
        sys.stderr.write(f"bench_plugin: warning: --resume {recorded.given}: {line}\n")
    return resuming


def warm_start(environment: Environment, scenario: Scenario,
               recorded: resume.Recorded | None) -> WarmStartFrom | None:
    """``--warm-start-from``'s brackets (launch/warm_from.py), read once; a resume's are those its campaign recorded,
    and giving the option with ``--resume`` is refused (the campaign already started from where it did)."""
    given = getattr(environment.parsed_options, "warm_start_from", None)
    if recorded is not None:
        if given:
            fail(f"--warm-start-from {given}: a resumed campaign starts its searches where it first did; leave the "
                 "option out with --resume")
        return recorded.record.warm_start_from
    if not given:
        return None
    try:
        return warm_from.borrow(given, scenario)
    except warm_from.WarmStartRefused as exc:
        fail(str(exc))
