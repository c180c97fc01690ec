"""Which backend a command line chooses: ``--backend``, else the manual one where a host is given, else the scenario's.

Decided twice, the same way: when the campaign is launched (resolve.py builds that backend) and, before Locust
forks its load generators, when their number is sized (processes.py: the local backend's servers need cores
of this host). It lives apart from options.py, which installs the sizing, so that the sizing imports neither
options.py nor what imports it.
"""

from __future__ import annotations

from argparse import Namespace
from collections.abc import Iterable

from bench_plugin.scenario import Scenario

BACKENDS: tuple[str, ...] = ("local", "manual", "kubernetes")
"""Who applies the arms (``--backend``; default: the scenario's ``backend``)."""

HOST_OPTIONS: dict[str, str] = {"llm": "llm_host", "embedding": "embedding_host", "asr": "asr_host"}
"""Workload class -> the option attribute holding its explicit host."""


def backend_name(options: Namespace | None, scenario: Scenario, class_names: Iterable[str], host: str | None) -> str:
    """The backend the command line and the scenario choose, by name.

    ``class_names``: the classes whose ``--<class>-host`` counts; ``host``: Locust's ``--host``. An explicit host
    means the manual backend. Raises ValueError (one line) for a ``--backend`` that is not one, one that an
    explicit host contradicts, and a disruption the backend cannot carry out.
    """
    chosen = getattr(options, "backend", None)
    if chosen is not None and chosen not in BACKENDS:
        raise ValueError(f"--backend {chosen!r}: not a backend (one of {', '.join(BACKENDS)})")
    explicit_host = bool(host) or any(getattr(options, HOST_OPTIONS[n], None) for n in class_names)
    if explicit_host and chosen in ("local", "kubernetes"):
        raise ValueError(f"--backend {chosen}: an explicit host (--host, --<class>-host) means the manual backend; "
                         "drop one")
    name = "manual" if explicit_host else chosen or scenario.backend
    for spec in scenario.disruptions:
        if name not in spec.backends():
            raise ValueError(f"disruption (kind {spec.kind}) needs the {' or '.join(spec.backends())} backend, "
                             f"not {name}")
    return str(name)
