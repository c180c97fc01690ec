"""summary.json: the typed document of a campaign's figures, its one reader and writer.

The models live in one module a section (classes, generators, stages, search, trials, arms, verdicts,
envelope, campaign); this package is their one reader API: every model is imported from here, and
:func:`load_summary` / :func:`parse_summary` / :func:`save_summary` are the only way in and out.

The analysis builds a :class:`Summary` from the store's records (bench_plugin.analysis.summary); the
summary files, the reports and the comparison of two campaigns read it back through :func:`load_summary`.
Every section has a model here, so a figure has one definition and one type from the analysis to the
page. The document says which version of this schema it follows (``schema``): a file of another
version is refused with one line rather than read as something it is not. Version history:

- ``bench_plugin.summary/1``: until the results layer; stages had no realised rate, self-check,
  percentile intervals or GPU figures, ratios were arithmetic. Not read: regenerate the summary from
  its results.sqlite (``bench-plugin report DIR``), which every version of the store allows.
- ``bench_plugin.summary/2``: this package. It grew optional sections that a file without them reads
  as absent, so every /2 file stays readable as it is: ``trials[].pods`` and ``arms.<arm>.pods`` (what
  the cluster did to the workload pods; None where nothing was watched: the local and manual backends,
  stores before version 3); a file that has them is refused, naming the field, by code older than them.
  And ``status.resumed`` (each time the campaign was resumed; empty for a campaign run in one process),
  which older code keeps as an extra of ``status`` (that section allows extras). And, per class and
  stage, the LLM stream's own figures (``itl_ms``, ``tokens_per_chunk``, ``tokens_from``,
  ``output_lengths``) and ``sole_error`` (every request failed with one load-independent error);
  absent in files written before them, and from stores before version 5.
  And the stall monitor's figures: ``generators.<process>.stalls`` (GeneratorStalls) and the stage's
  ``generator_check`` (GeneratorCheck); absent (None) in files and stores written before the monitor.
  And ``comparison.arms.<arm>.stages[].protocol_failure`` (the runs in which a class's requests all
  failed with one protocol error); absent (empty) in files written before it.
  And ``comparison.arms.<arm>.answer`` (the arm's answer in short: its figure per device against the
  control's, what limits it, the next step) and ``conditions.utc_offset_s`` (the campaign host's clock,
  for local times in the report); absent (None) in files written before them.
  And the envelope's rays: ``trials[].search[].ray`` (``mix`` where absent), ``sustain``, ``undecided``,
  ``stopped``, each probe's decision (``trials[].probes``) and ``comparison.arms.<arm>.envelope``; absent in
  files written before them.
  And ``load_generators`` (how many load-generating processes, how that was decided, where each ran:
  LoadGenerators); absent (None) in files written before it.
  And what each class's server said (``trials[].stages[].classes.<class>.server``: ServerStats) and where the
  latency an arm adds goes (``comparison.arms.<arm>.stages[].classes.<class>.latency_split``: LatencySplit);
  written only where set, so absent in files written before them and where no server said anything.
- ``bench_plugin.summary/3``: what limits an arm is a list of typed items (results/limits.Limit), not one
  string: ``comparison.arms.<arm>.boundary.limiting`` and its ``per_repeat[].limiting``, ``answer.limiting`` and
  ``envelope.rays[].limit`` (empty lists where /2 had null); and each class's breaches at a stage as items too
  (``stages[].classes.<class>.limits``, written only where some breach is). A /2 file still reads: its joined
  strings read into the same items (their words joined with ", " make the string again), so it renders as it did;
  written again, it is /3. It grew ``trials[].stages[].generator_check.processes`` and ``.cores`` (what the
  stage's load-generating processes needed in all, which the advice for a CPU-bound stage sizes ``--processes``
  by), written only where set: absent in files written before them.
- ``bench_plugin.summary/4``: a stage verdict's reasons are typed items (results/reasons.Reason: a sentence, and
  the items it lists), not strings with the items joined in: ``comparison.arms.<arm>.stages[].reasons``; and an
  envelope ray's ``status`` is the list of its repeats' statuses (``comparison.arms.<arm>.envelope.rays[].status``:
  ``["found"]``), not one string with them joined; and the runs an arm's stage sets apart are items of their arm,
  repeat and why (``comparison.arms.<arm>.stages[].generator_limited``, ``host_busy``, ``protocol_failure``:
  results/reasons.RunFlag), not ``<arm> repeat <r>: <why>``. A /3 or /2 file still reads: each string is split
  once where it is read (``text: a; b; c``; ``found, generator-limited``; ``mps repeat 2: ...``), so it renders
  as it did; written again, it is /4.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import ConfigDict, Field, ValidationError, field_validator

from bench_plugin.results.spread import Judged, MeanPeak, Model, Spread
from bench_plugin.results.summary.arms import (
    ArmClassFigures,
    ArmFigures,
    ArmPods,
    ArmStageFigures,
    ClassComparison,
    ClassDisruptionFigures,
    DisruptionFigures,
    PendingTime,
    StageComparison,
)
from bench_plugin.results.summary.campaign import (
    CampaignStatus,
    Conditions,
    Ending,
    Overrides,
    Provenance,
    RequestSetRef,
    Resume,
    ScenarioRef,
)
from bench_plugin.results.summary.classes import ClassStats, Interval, Percentiles, PerClass
from bench_plugin.results.summary.envelope import CriterionFit, Envelope, EnvelopeFit, EnvelopeRay, RayRepeat
from bench_plugin.results.summary.generators import (
    GeneratorCheck,
    GeneratorProcess,
    GeneratorSizing,
    GeneratorStalls,
    GeneratorUse,
    HostLoad,
    LoadGenerators,
)
from bench_plugin.results.summary.search import (
    BorrowedBracket,
    ProbeCheck,
    ProbeDecision,
    SearchProbe,
    SearchResult,
    WarmStartFrom,
)
from bench_plugin.results.summary.stages import (
    ClassInterruption,
    DisruptionStep,
    SecondFigures,
    StageDisruption,
    StageGpu,
    StageSummary,
)
from bench_plugin.results.summary.trials import PlacedClass, PodSummary, TrialSummary
from bench_plugin.results.summary.verdicts import (
    Answer,
    ArmComparison,
    Boundary,
    Capacity,
    Comparison,
    RepeatBoundary,
    RepeatCapacity,
    Verdict,
)

SCHEMA: Literal["bench_plugin.summary/4"] = "bench_plugin.summary/4"
"""The schema this code writes."""
READS = ("bench_plugin.summary/2", "bench_plugin.summary/3", SCHEMA)
"""The schemas this code reads: an older /2 or /3 file reads as the same document in /4's form."""


class SummaryError(Exception):
    """A summary.json this code cannot read (unknown schema, not a summary); the message is one line."""


class Summary(Model):
    """The whole summary.json document."""

    schema_: Literal["bench_plugin.summary/2", "bench_plugin.summary/3", "bench_plugin.summary/4"] = Field(
        default=SCHEMA, alias="schema")
    """Read as any of them; the document is /4's whatever it was read from (see :func:`_now`)."""
    scenario: ScenarioRef
    status: CampaignStatus
    overrides: Overrides | None = None
    classes: list[str] | None = None
    control: str | None = None
    request_sets: dict[str, RequestSetRef] | None = None
    conditions: Provenance | None = None
    slo: dict[str, dict[str, float | None] | None] = Field(default_factory=dict)
    embedding_format: str | None = None
    """How the embedding class asked for its vectors (its ``encoding_format``); None without an embedding class,
    and in summaries written before the key existed (their campaigns asked for floats)."""
    trials: list[TrialSummary] = Field(default_factory=list)
    arms: dict[str, ArmFigures] = Field(default_factory=dict)
    comparison: Comparison
    load_generators: LoadGenerators | None = None
    """Who sent the load and how their number was decided; None in summaries written before it was recorded."""
    warm_start_from: WarmStartFrom | None = None
    """The earlier campaign the searches started from (``--warm-start-from``); None where none was given."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    @field_validator("schema_", mode="after")
    @classmethod
    def _now(cls, schema: str) -> Literal["bench_plugin.summary/4"]:
        """An older file's fields were read into /4's form (results/limits.py, results/reasons.py): it is now a
        /4 document."""
        return SCHEMA

    def to_json(self) -> str:
        """The document as written to summary.json (indented, keys in model order)."""
        return json.dumps(self.model_dump(mode="json", by_alias=True), indent=2) + "\n"


def save_summary(summary: Summary, path: Path) -> None:
    """Write ``summary`` to ``path`` (summary.json)."""
    path.write_text(summary.to_json(), encoding="utf-8")


def load_summary(path: Path) -> Summary:
    """Read a summary.json; SummaryError (one line) when it is unreadable or of another schema version."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise SummaryError(f"{path}: cannot read it: {exc}") from None
    return parse_summary(data, str(path))


def first_problem(exc: ValidationError) -> str:
    """``place.of.field: message`` of a validation's first problem: one line for a refusal."""
    first = exc.errors()[0]
    return f"{'.'.join(str(part) for part in first['loc'])}: {first['msg']}"


def parse_summary(data: Any, where: str = "summary.json") -> Summary:
    """A Summary from its JSON form; SummaryError naming the schema when it is not this version's."""
    if not isinstance(data, dict):
        raise SummaryError(f"{where}: not a summary (a JSON object was expected)")
    schema = data.get("schema")
    if schema not in READS:
        hint = (" (written by an older bench-plugin: regenerate it with `bench-plugin report DIR`)"
                if isinstance(schema, str) and schema.startswith("bench_plugin.summary/")
                and schema < READS[0] else "")
        raise SummaryError(f"{where}: schema {schema!r} is not one this bench-plugin reads "
                           f"({', '.join(map(repr, READS))}){hint}")
    try:
        return Summary.model_validate(data)
    except ValidationError as exc:
        raise SummaryError(f"{where}: {first_problem(exc)} ({exc.error_count()} problem(s))") from None


__all__ = [
    "READS",
    "SCHEMA",
    "Answer",
    "ArmClassFigures",
    "ArmComparison",
    "ArmFigures",
    "ArmPods",
    "ArmStageFigures",
    "BorrowedBracket",
    "Boundary",
    "CampaignStatus",
    "Capacity",
    "ClassComparison",
    "ClassDisruptionFigures",
    "ClassInterruption",
    "ClassStats",
    "Comparison",
    "Conditions",
    "CriterionFit",
    "DisruptionFigures",
    "DisruptionStep",
    "Ending",
    "Envelope",
    "EnvelopeFit",
    "EnvelopeRay",
    "GeneratorCheck",
    "GeneratorProcess",
    "GeneratorSizing",
    "GeneratorStalls",
    "GeneratorUse",
    "HostLoad",
    "Interval",
    "Judged",
    "LoadGenerators",
    "MeanPeak",
    "Model",
    "Overrides",
    "PendingTime",
    "PerClass",
    "Percentiles",
    "PlacedClass",
    "PodSummary",
    "ProbeCheck",
    "ProbeDecision",
    "Provenance",
    "RayRepeat",
    "RepeatBoundary",
    "RepeatCapacity",
    "RequestSetRef",
    "Resume",
    "ScenarioRef",
    "SearchProbe",
    "SearchResult",
    "SecondFigures",
    "Spread",
    "StageComparison",
    "StageDisruption",
    "StageGpu",
    "StageSummary",
    "Summary",
    "SummaryError",
    "TrialSummary",
    "Verdict",
    "WarmStartFrom",
    "first_problem",
    "load_summary",
    "parse_summary",
    "save_summary",
]
