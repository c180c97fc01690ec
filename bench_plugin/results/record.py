"""The campaign's record of itself, typed: what results.sqlite's ``meta`` table holds, read in one place.

The recorder writes each fact under its key as JSON (the scenario, the classes, the request sets, the
conditions and overrides, when it started, how it ended, each resume, what was left to restore, the load
generators and how their number was decided); results/store.py's ``read_record`` reads them back as one
:class:`CampaignRecord`. Everything above results/ reads the record, never the table by key. A value of the
wrong form is a StoreError naming the key, and a key this version does not know is left alone (a store written
by a newer recorder still reads).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from bench_plugin.results.summary import (
    Ending,
    GeneratorProcess,
    GeneratorSizing,
    LoadGenerators,
    Overrides,
    Provenance,
    RequestSetRef,
    Resume,
    WarmStartFrom,
)
from bench_plugin.scenario import Arm, ClassSpec, Scenario


class _Record(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class StoredScenario(_Record):
    """The scenario as the campaign recorded it: its name, file, sha256, and the whole of it as it ran
    (``resolved``: the scenario after the command line's overrides, validated again as it is read back, so
    a store holds a scenario this code can run or is refused naming the field)."""

    name: str | None = None
    sha256: str | None = None
    path: str | None = None
    resolved: Scenario | None = None
    """None only in a store that recorded no scenario."""

    @property
    def arms(self) -> list[Arm]:
        """The arms, in the scenario's order."""
        return list(self.resolved.arms) if self.resolved is not None else []

    @property
    def control(self) -> Arm | None:
        """The control arm, if one is marked."""
        return next((arm for arm in self.arms if arm.control), None)

    @property
    def classes(self) -> dict[str, ClassSpec]:
        """Class -> its settings (SLOs, error budget, ...), in the canonical order."""
        if self.resolved is None:
            return {}
        return {name: self.resolved.classes.get(name) for name in self.resolved.classes.names()}

    @property
    def searched(self) -> bool:
        """Whether the campaign searched its boundary (a ``search`` section) rather than ran fixed stages."""
        return self.resolved is not None and self.resolved.search is not None


class Restore(_Record):
    """How the backend left the host or cluster at the campaign's end."""

    backend: str
    leftovers: list[str] = Field(default_factory=list)
    """What it could not put back, one line each."""


class GeneratorFacts(_Record):
    """A load generator as the campaign ended: whether it took part, what it could send, who it was."""

    state: str
    """connected, accepted, refused or lost."""
    classes: list[str] = Field(default_factory=list)
    reason: str | None = None
    """Why it was refused or lost."""
    identity: dict[str, Any] | None = None
    """What it said of itself in its hello (versions, source digest: loadgen/protocol.Identity, as sent)."""
    process: GeneratorProcess | None = None
    """Where it ran (pid, host, the cores it may run on); None for a worker of a bench-plugin from before."""


class CampaignRecord(_Record):
    """Every fact a campaign records about itself (see the module); absent facts are None or empty."""

    scenario: StoredScenario = Field(default_factory=StoredScenario)
    classes: list[str] | None = None
    """The classes the campaign sent (those of the scenario its locustfile has a user class of)."""
    request_sets: dict[str, RequestSetRef] | None = None
    """Class -> its request set's description (its sha256 among it)."""
    conditions: Provenance | None = None
    """Where and how it ran: host, platform, packages, source revision and digest, command, backend."""
    overrides: Overrides | None = None
    """``arm``, ``repeats``, ``stage_duration`` as the command line gave them (None where not)."""
    started_s: float | None = None
    status: Ending | None = None
    """How it ended; None while it runs, or when it was killed."""
    resumes: list[Resume] = Field(default_factory=list)
    """Each resume, oldest first."""
    restore: Restore | None = None
    """What the backend could not put back at the end (nothing: ``leftovers`` empty)."""
    load_generators: dict[str, GeneratorFacts] | None = None
    """Load generator (``local``, or a worker's id) -> how it took part, as the campaign ended."""
    generator_sizing: GeneratorSizing | None = None
    """How the number of load-generating processes was decided (launch/processes.py), by the last process that
    ran the campaign (a resume may run with another number)."""
    master_process: GeneratorProcess | None = None
    """The master's own process, where workers sent the load (None on one process)."""
    warm_start_from: WarmStartFrom | None = None
    """``--warm-start-from``: the earlier campaign's brackets the searches start from, as read when the campaign
    started (a resume takes them from here, not from the earlier campaign again)."""

    def generators(self) -> LoadGenerators | None:
        """summary.json's ``load_generators``: the sizing, the master, and every load generator that took part; None
        where nothing of them was recorded."""
        processes = {member: facts.process for member, facts in (self.load_generators or {}).items()
                     if facts.state != "refused" and facts.process is not None}
        if self.generator_sizing is None and self.master_process is None and not processes:
            return None
        return LoadGenerators(sizing=self.generator_sizing, master=self.master_process, processes=processes)

    def request_set_sha256(self) -> dict[str, str | None]:
        """Class -> its request set's sha256."""
        return {name: described.sha256 for name, described in (self.request_sets or {}).items()}
