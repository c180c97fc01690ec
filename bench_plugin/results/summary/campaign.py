"""summary.json's campaign record: its conditions, scenario, request sets, provenance, status, resumes."""

from __future__ import annotations

from pydantic import Field

from bench_plugin.results.facts import BackendFacts, Recorded
from bench_plugin.results.spread import Model


class Conditions(Model):
    """Where a verdict was measured: it may not hold on another device, driver or load range."""

    backend: str | None
    devices: list[str]
    driver: str | None
    sharing: str
    control_sharing: str | None
    load_range: dict[str, tuple[float, float]]
    arrival: dict[str, str]
    repeats: int


class ScenarioRef(Model):
    """Which scenario the campaign ran."""

    name: str | None
    sha256: str | None
    path: str | None


class Resume(Model):
    """One time the campaign was resumed (``--resume``; launch/resume.py): when, from what, what it re-ran."""

    number: int
    """1 for the first resume."""
    at_s: float
    previous_status: str | None
    """How the process before it left the campaign: ``interrupted``, ``failed``, or ``unfinished`` (killed)."""
    previous_reason: str | None = None
    kept: list[tuple[int, int]] = Field(default_factory=list)
    """(trial, segment) kept as they were."""
    rerun: list[tuple[int, int]] = Field(default_factory=list)
    """(trial, segment) whose unfinished attempt was superseded and which ran again from their start."""
    superseded: dict[str, int] = Field(default_factory=dict)
    """Table -> rows of those attempts moved to results.sqlite's ``superseded_*`` tables."""
    host: str | None = None
    command: list[str] | None = None


class Ending(Model):
    """How a campaign's last process ended it: completed, failed or interrupted, why, and when."""

    status: str
    reason: str | None = None
    ended_s: float | None = None


class CampaignStatus(Ending):
    """How the campaign ended, and each time it was resumed."""

    resumed: list[Resume] = Field(default_factory=list)
    """Every resume, oldest first (empty: the campaign ran in one process)."""


class Overrides(Model):
    """What the command line overrode of the scenario (None: not given): recorded, and taken again on a resume."""

    arm: str | None = None
    """``--arm``: the arms run (the rest of the scenario's were left out)."""
    repeats: int | None = None
    """``--repeats``."""
    stage_duration: float | None = None
    """``--stage-duration``, in seconds."""

    def given(self) -> dict[str, str | int | float]:
        """The overrides that were given, by name."""
        return {name: value for name, value in self.model_dump().items() if value is not None}


class RequestSetRef(Model):
    """A class's request set as the campaign recorded it: enough to tell whether another campaign sent the same."""

    # In the order of their names, as the store keeps them.
    count: int
    """How many requests it holds."""
    sha256: str
    """The hash of its items (scenario/request_sets.py), the same on every load generator."""
    source: str
    """Where it came from: a file, or ``generated(seed=N)``."""
    workload: str


class Provenance(Recorded):
    """Where and how the campaign ran (results/provenance.py): enough to rerun it, and to tell apart the
    conditions of another campaign. Each fact is written only where it was recorded, so a campaign from
    before a fact existed (``source_digest``) reads and writes as it was."""

    # In the order of their names, as the store keeps them.
    backend: BackendFacts | None = None
    """The sharing backend's own description (SharingBackend.describe: its name, devices, driver, ...)."""
    command: list[str] | None = None
    host: str | None = None
    packages: dict[str, str | None] | None = None
    """Package -> its installed version (None: not installed), for the packages that shape a measurement."""
    platform: str | None = None
    python: str | None = None
    source_digest: str | None = None
    """The sha256 of bench_plugin's own source files (results/provenance.py)."""
    source_revision: str | None = None
    """The git revision of the source that ran, where it was a git checkout."""
    utc_offset_s: int | None = None
    """The campaign host's offset from UTC when it started (seconds east): the report's times are its clock."""
