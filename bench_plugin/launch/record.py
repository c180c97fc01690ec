"""The launch record: one campaign as its command line asks for it, read once, after every refusal.

``build`` reads Locust's parsed options and the scenario, refuses each bad value in one line (resolve.py),
and returns a frozen :class:`Launch`: the scenario with its path and sha256, the classes this locustfile can
send, the request sets, the results directory, the backend, where the GPU series come from, the provenance
and the overrides recorded with the results, the resume plan, how the number of load-generating processes
was decided (processes.py, as the command line was parsed), and how the run is shown. The plugin only wires
it into Locust; nothing past this step reads the command line again, and each derived value (the scenario's
sha256 among them) is computed here, once.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from locust.env import Environment

from bench_plugin.launch import processes, resolve, resume
from bench_plugin.report.generators import sizing_line
from bench_plugin.results.provenance import this_process
from bench_plugin.results.summary import GeneratorSizing, Overrides, Provenance, WarmStartFrom
from bench_plugin.scenario import Scenario, ScenarioError, scenario_sha256
from bench_plugin.scenario.request_sets import RequestSet, build_request_sets
from bench_plugin.sharing.base import ApplyError, SharingBackend
from bench_plugin.telemetry.campaign import TelemetryOptions

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Launch:
    """What one campaign runs, as the command line resolved it (see the module)."""

    scenario: Scenario
    scenario_path: Path
    scenario_sha256: str
    class_names: tuple[str, ...]
    """The scenario's classes that this locustfile has a user class of, in the scenario's order."""
    request_sets: Mapping[str, RequestSet]
    results_dir: Path
    backend: SharingBackend
    telemetry: TelemetryOptions
    provenance: Provenance
    """What software and host run the campaign (results/provenance.py)."""
    overrides: Overrides
    """``--arm``, ``--repeats``, ``--stage-duration`` as given (None where not), recorded with the results."""
    resuming: resume.Resuming | None
    """The checked resume of the campaign in ``results_dir`` (``--resume``); None for a new one."""
    headless: bool
    """``--headless``: Locust runs the shape at once, with no web UI."""
    progress: bool
    """A progress line every few seconds (headless; ``--only-summary`` quiets only Locust's own tables)."""
    no_report: bool
    """``--no-report``: the campaign ends with the store and the summaries; report.html is rendered later."""
    web_base_path: str = ""
    """Locust's ``--web-base-path`` without its trailing slash ("" at the root): the plugin's web pages live under
    it, as Locust's own do (live/webui.py)."""
    generators: GeneratorSizing | None = None
    """How the number of load-generating processes was decided (processes.py); None where the command line was
    not planned (the plugin registered on an Environment that Locust's main() did not parse for)."""
    warm_start_from: WarmStartFrom | None = None
    """``--warm-start-from``: the earlier campaign's brackets the searches start from (warm_from.py); a resume's are
    those its campaign recorded."""


def is_headless(environment: Environment) -> bool:
    """``--headless``: read before the launch is built, where a stop signal must already be routed (plugin.py)."""
    return bool(getattr(environment.parsed_options, "headless", False))


def build(environment: Environment) -> Launch:
    """The launch record of the campaign ``environment``'s command line asks for; exits 2 with one line for
    each refusal (resolve.fail) before anything starts."""
    options = environment.parsed_options
    recorded = resolve.recorded_campaign(environment)
    overrides = Overrides(**{name: getattr(options, name, None) for name in resume.OVERRIDES})
    scenario, path = resolve.load(environment, recorded, overrides)
    resolve.warn_short_stages(scenario, path)
    class_names = resolve.class_names(environment, scenario, path)
    try:
        request_sets = build_request_sets(scenario, path.parent)
    except ScenarioError as exc:
        resolve.fail(str(exc))
    results_dir = recorded.directory if recorded else resolve.results_dir(environment, scenario)
    backend = resolve.backend(environment, scenario, class_names, results_dir)
    try:
        for arm in scenario.arms:
            backend.check(arm)
    except ApplyError as exc:
        resolve.fail(f"{path}: {exc}")
    telemetry = resolve.telemetry_options(environment)
    resolve.check_prometheus(telemetry)
    resolve.check_server_metrics(scenario, class_names, telemetry, path)
    provenance = this_process(backend.describe())
    sha256 = scenario_sha256(scenario)
    resuming = (resolve.resuming(recorded, scenario, sha256, class_names, request_sets, provenance)
                if recorded else None)
    warm = resolve.warm_start(environment, scenario, recorded)
    headless = is_headless(environment)
    generators = processes.decided()
    if generators is not None:  # said here, not when planned: Locust sets its logging up after parsing
        logger.info("%s", sizing_line(generators))
    return Launch(
        scenario=scenario, scenario_path=path, scenario_sha256=sha256, class_names=tuple(class_names),
        request_sets=request_sets, results_dir=results_dir, backend=backend, telemetry=telemetry,
        provenance=provenance, overrides=overrides,
        resuming=resuming, headless=headless, progress=headless,
        no_report=bool(getattr(options, "no_report", False)),
        web_base_path=str(getattr(options, "web_base_path", "") or "").rstrip("/"), generators=generators,
        warm_start_from=warm,
    )


def worker_scenario() -> tuple[str, dict[str, str]] | None:
    """A worker's own ``--scenario``, read from its command line again (Locust copies a master's options over
    the worker's own before the ``init`` listener runs): its sha256 and its request sets' sha256s, or None
    when it was given none."""
    from locust.argument_parser import get_parser

    own = get_parser().parse_args()
    if not getattr(own, "scenario", None):
        return None
    scenario, path = resolve.load_from(own)
    try:
        sets = build_request_sets(scenario, path.parent)
    except ScenarioError as exc:
        resolve.fail(str(exc))
    return scenario_sha256(scenario), {name: rs.sha256 for name, rs in sets.items()}
