"""Processes: how many load-generating processes a campaign runs, decided before Locust forks them.

Locust's main() parses the command line (``parser = get_parser(); options = parser.parse_args()``) and,
given ``--processes N``, at once forks N children with ``gevent.fork()``: each becomes a worker
(``options.worker = True``) connecting to ``master_host:master_port``, and the parent the master
(``options.master = True; options.expect_workers = N``). That is before Locust builds its Environment
and fires ``init``: no event the plugin listens to comes early enough. The one seam is the parser
itself. Locust fires ``init_command_line_parser`` inside get_parser(), before parse_args, and the
plugin adds its options there (options.add_arguments); it also wraps that parser instance's
parse_args (:func:`install`), so the options Locust acts on pass through :func:`plan` first.

:func:`plan` sizes a command line that runs a campaign in this process (a ``--scenario`` or
``--resume``; not a ``--worker``). It loads the scenario as the launch will (``--resume DIR``: the one
recorded there) and picks the backend as the launch will (backend_choice.py), then sizes the load on
this host (loadgen/sizing.py). It changes the options only where the count is left to the plugin or
means one process; a ``--master`` keeps its options (its user starts its workers), and the sizing is
only recorded beside it:

- no ``--processes``: the sizing's count. N > 1 sets ``options.processes = N``; 1 leaves the local
  runner, as before.
- ``--processes N`` always wins. ``--processes 1`` means one process: Locust would fork one worker
  under a master (two processes, one of them sending), so it is set back to None and the local
  runner sends, as the ledger and the report expect of "one process".

Wherever Locust will fork (N > 1, sized or given, or ``-1``: one per CPU) and no master port was
given, the master listens on 127.0.0.1 and a free port, its workers' connection with it: the workers
are this host's own processes, and two campaigns on one host never meet on Locust's 5557 (on every
interface, by default).

A scenario that does not load, or a backend the options contradict, leaves the options as they were:
the launch refuses them in one line a moment later (resolve.py). What was decided, sized or not, is
kept for the launch record (:func:`decided`). The plan runs once per process: a worker reads its
command line again (record.worker_scenario), Locust's web UI parses it again, and a child forked by
``--processes`` starts with its parent's memory, this module's state among it, so it never plans again.
"""

from __future__ import annotations

import os
from argparse import Namespace
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from bench_plugin.launch import resume
from bench_plugin.launch.backend_choice import backend_name
from bench_plugin.loadgen.sizing import Sizing, server_cores, size
from bench_plugin.results.summary import GeneratorSizing, Overrides
from bench_plugin.scenario import Scenario, ScenarioError, load_scenario
from bench_plugin.sharing.processes import free_port

MASTER_HOST = "127.0.0.1"
"""Where a sized master listens: its workers are this host's own processes."""
PORT_FLAGS = ("--master-port", "--master-bind-port")
"""Locust's flags of the master's port: given any way (flag, environment, config file), the user chose it."""


@dataclass
class _Plan:
    """What this process decided, once (see the module)."""

    ran: bool = False
    sizing: GeneratorSizing | None = None


_PLAN = _Plan()


def install(parser: Any) -> None:
    """Make ``parser`` (Locust's, being built in get_parser) plan the processes on the options it parses first."""
    parse_args = parser.parse_args

    def parse_and_plan(*args: Any, **kwargs: Any) -> Any:
        options = parse_args(*args, **kwargs)
        if not _PLAN.ran:
            _PLAN.ran = True
            _PLAN.sizing = plan(options, ports_given=ports_given(parser))
        return options

    parser.parse_args = parse_and_plan


def decided() -> GeneratorSizing | None:
    """How this process's command line decided the number of load-generating processes (None: it did not)."""
    return _PLAN.sizing


def ports_given(parser: Any) -> bool:
    """Whether the parse ``parser`` just did took a master port from anywhere but Locust's defaults.

    configargparse lists each setting's source after a parse; a flag listed under ``defaults`` was given
    neither on the command line nor in the environment nor in a config file.
    """
    defaults = parser.get_source_to_settings_dict().get("defaults", {})
    return any(flag not in defaults for flag in PORT_FLAGS)


def plan(options: Namespace, *, ports_given: bool = False, cores: int | None = None,
         sizing: Sizing | None = None) -> GeneratorSizing | None:
    """Size the campaign ``options`` ask for and set them to run that many processes (the module's rules).

    Returns how the count was decided, or None where these options run no campaign here (a worker, no
    scenario) or one that does not load. ``cores``: the cores to size for (default: those this process may
    run on); ``sizing``: a sizing to act on instead of the scenario's own (tests of the wiring on a host too
    small for the rule to give more than one).
    """
    campaign = getattr(options, "scenario", None) or getattr(options, "resume", None)
    if getattr(options, "worker", False) or not campaign:
        return None
    if sizing is None:
        try:
            scenario = scenario_of(options)
            backend = backend_name(options, scenario, scenario.classes.names(), getattr(options, "host", None))
        except (ScenarioError, resume.ResumeRefused, ValueError, OSError):
            return None  # the launch refuses it in one line, with the rest of what it checks
        sizing = size(scenario, cores=cores or len(os.sched_getaffinity(0)), reserved=server_cores(scenario, backend))
    if getattr(options, "master", False):
        return record("workers", None, sizing)
    given = getattr(options, "processes", None)
    if given in (0, 1):
        options.processes = None  # one process: the local runner, not a master over one worker
        return record("given", 1, sizing)
    forks = sizing.processes if given is None else given  # -1: Locust's one per CPU
    if given is None and forks > 1:
        options.processes = forks
    if (forks > 1 or forks == -1) and not ports_given:
        bind_master(options)
    if given is None:
        return record("auto", sizing.processes, sizing)
    return record("given", (os.cpu_count() or 1) if given == -1 else given, sizing)


def scenario_of(options: Namespace) -> Scenario:
    """The scenario the command line runs: ``--scenario`` with its overrides; with ``--resume DIR``, the one
    recorded there with the recorded overrides (resume.options_for, as the launch reads it). Raises
    ScenarioError or resume.ResumeRefused."""
    given = Overrides(**{name: getattr(options, name, None) for name in resume.OVERRIDES})
    if getattr(options, "resume", None):
        recorded = resume.read_campaign(options.resume)
        path, overrides = resume.options_for(recorded, getattr(options, "scenario", None),
                                             getattr(options, "results_dir", None), given)
    else:
        path, overrides = Path(options.scenario), given
    return load_scenario(path, **overrides.model_dump())


def bind_master(options: Namespace) -> None:
    """Put the master on loopback and a free port, and its workers' connection with it."""
    port = free_port(MASTER_HOST)
    options.master_bind_host = options.master_host = MASTER_HOST
    options.master_bind_port = options.master_port = port


def record(decided: Literal["auto", "given", "workers"], processes: int | None, sizing: Sizing) -> GeneratorSizing:
    """The campaign's record of the decision, with the sizing's figures."""
    return GeneratorSizing(decided=decided, processes=processes, sized=sizing.processes, why=sizing.why,
                           peak_cores=round(sizing.peak_cores, 4), peak_at=sizing.peak_at,
                           available_cores=sizing.available_cores, reserved_cores=sizing.reserved_cores)
