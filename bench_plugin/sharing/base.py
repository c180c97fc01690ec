"""SharingBackend: who applies an arm, and the Placement it reports.

A backend turns an arm into running endpoints: it plans the trial's segments (classes measured
together; an exclusive arm without a device per class measures each class alone in turn), applies
each segment, reports where every class runs, and puts the host back as it found it. Readiness is
not the backend's word: the campaign waits until each endpoint answers a real request.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

from bench_plugin.results.facts import BackendFacts
from bench_plugin.results.placement import Placement
from bench_plugin.results.samples import Sample
from bench_plugin.scenario import Arm, Disruption, Scenario


class ApplyError(Exception):
    """An arm that could not be applied; the message says which class and why."""


class SharingBackend(ABC):
    """Applies arms; one instance serves a whole campaign."""

    name: str = ""
    replaces_servers: bool = False
    """Whether the platform puts a new server in the place of one that went (a Deployment's pods): then a server
    gone mid-trial is part of what is measured (a disruption, a preemption), not the end of the campaign."""

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario

    def check(self, arm: Arm) -> None:
        """Raise ApplyError now if ``arm`` cannot be applied on this host (before anything runs)."""
        return None

    @abstractmethod
    def segments(self, arm: Arm, class_names: list[str]) -> list[list[str]]:
        """Groups of classes measured together under ``arm``, in run order."""

    @abstractmethod
    def apply(self, arm: Arm, class_names: list[str], trial_id: int, segment: int) -> Placement:
        """Make the segment's classes run under ``arm``; return where they run."""

    @abstractmethod
    def release(self) -> None:
        """Undo the last apply (stop what it started)."""

    def exited(self, name: str) -> str | None:
        """Why class ``name``'s server is gone (exit code, last log lines), or None while it runs."""
        return None

    def observe(self, arm: Arm, trial_id: int, record: Callable[[Any], None]) -> None:
        """Begin recording what the platform does to ``trial_id``'s workloads (``record`` gets each event);
        only the kubernetes backend has anything to record (its pods' timeline)."""
        return None

    def end_observe(self) -> list[str]:
        """Stop what ``observe`` began; the problems it recovered from, one line each."""
        return []

    def disrupt(self, spec: Disruption, classes: list[str], record: Callable[..., None],
                probe: Callable[[str, str], Sample]) -> None:
        """Do the scenario's disruption to ``classes`` now, recording each step; ``probe(name, url)`` sends class
        ``name`` its readiness request at ``url`` (a server started anew answers it before it takes load)."""
        raise ApplyError(f"disruption (kind {spec.kind}) needs the {' or '.join(spec.backends())} backend, "
                         f"not {self.name}")

    def end_disruption(self) -> None:
        """Put back what the last disruption changed (a cordoned node, a failed one not rejoined, a server not
        started again)."""
        return None

    def describe(self) -> BackendFacts:
        """Facts about this backend and the devices it uses, for the campaign's conditions."""
        return BackendFacts(backend=self.name)

    def restore(self) -> None:
        """Leave the host as it was before the campaign; safe to call more than once."""
        self.release()

    def leftovers(self) -> list[str]:
        """What the last ``restore`` could not put back, one line each (empty: everything); fails the run."""
        return []
