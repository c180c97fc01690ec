"""The "Conditions" section: everything needed to run the campaign again and to know what it measured.

The seed's "keep the full conditions of every run, whatever it shows": the scenario file and its hash, overrides,
when it ran, its status and resumes, the command line, the source revision, host, platform and package versions,
the request sets, the backend's devices and driver, the load generators, each arm's settings and each server's
command line. Keys the analysis adds to the conditions later are still shown (generically), so nothing recorded
goes missing. The arms' settings and the servers' command lines come from the results store (results.store
TrialRecord); a report written from the summary alone says where they are.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from typing import Any

from bench_plugin.report.comparison import RESUME_COLUMNS, resume_rows, status_text
from bench_plugin.report.generators import generators_phrase
from bench_plugin.report.page import (
    Block,
    Code,
    Facts,
    Heading,
    Inline,
    Paragraph,
    Part,
    Section,
    Text,
    bullets,
    table,
)
from bench_plugin.report.placement import cpus_by_arm, cpus_label
from bench_plugin.report.protocol import embedding_format_lines, output_length_lines
from bench_plugin.report.tables import when
from bench_plugin.report.warm_start import warm_start_line
from bench_plugin.results.facts import BackendFacts
from bench_plugin.results.record import CampaignRecord
from bench_plugin.results.store import TrialRecord
from bench_plugin.results.summary import Provenance, Summary

SHOWN = frozenset({"backend", "command", "host", "platform", "python", "packages", "source_revision"})
"""The conditions' keys the campaign facts name themselves; every other key is listed as it is."""

OPEN_SERVERS = 12
"""The servers' table is open up to this many rows (to read and print whole); a long campaign folds it away."""


def plain(value: Any) -> str:
    """Any recorded value as text: ``-`` for None, JSON for lists and dicts."""
    if value is None:
        return "-"
    return json.dumps(value, sort_keys=True) if isinstance(value, dict | list) else str(value)


def code(value: Any) -> Code:
    """A recorded value in monospace (commands, hashes, JSON)."""
    return Code(plain(value))


def _value(value: Any) -> Text:
    return (code(value),) if isinstance(value, dict | list) else (plain(value),)


def _campaign(summary: Summary, record: CampaignRecord | None, cond: Provenance) -> Facts:
    scenario = summary.scenario
    status = summary.status
    command = cond.command
    warm = warm_start_line(summary)
    return Facts((
        ("scenario", (plain(scenario.name),)), ("scenario file", (code(scenario.path),)),
        ("scenario sha256", (code(scenario.sha256),)),
        ("overrides", _value((summary.overrides.given() if summary.overrides else {}) or "none")),
        ("started", (when(summary, record.started_s if record else None),)),
        ("ended", (when(summary, status.ended_s),)),
        ("status", (status_text(summary),)),
        ("command line", (code(shlex.join(command) if isinstance(command, list) else command),)),
        ("source revision", (code(cond.source_revision),)),
        ("host", (plain(cond.host),)), ("platform", (plain(cond.platform),)), ("python", (plain(cond.python),)),
        *((k, _value(v)) for k, v in sorted(cond.model_dump().items()) if k not in SHOWN),
        *([("warm start", (warm,))] if warm else []),
    ))


def _backend(facts: BackendFacts) -> list[Block]:
    devices = [d.model_dump() for d in facts.devices or []]
    columns = sorted({k for d in devices for k in d}, key=lambda k: (k not in ("name", "model"), k))
    named = sorted(facts.model_dump(exclude={"devices"}).items())
    blocks: list[Block] = [Heading("Backend and devices"), Facts(tuple((k, _value(v)) for k, v in named))]
    if devices:
        blocks.append(table(columns, ([plain(d.get(c)) for c in columns] for d in devices)))
    return blocks


def _generators(summary: Summary) -> list[Block]:
    """The load generators: how many and why, and where each process ran (nothing where none was recorded)."""
    text, generators = generators_phrase(summary.load_generators), summary.load_generators
    if text is None or generators is None:
        return []
    rows = [[name, str(p.pid), plain(p.host), plain(p.cores)] for name, p in
            ([("master", generators.master)] if generators.master else []) + sorted(generators.processes.items())]
    return [Heading("Load generators"), Paragraph((text,)),
            *([table(("process", "pid", "host", "CPU cores"), rows)] if rows else [])]


def _arms(trials: Sequence[TrialRecord], control: str | None) -> list[Block]:
    seen: dict[str, str] = {}
    for t in trials:
        seen.setdefault(t.arm, t.settings)
    rows: list[list[Inline]] = [[arm + (" (control)" if arm == control else ""), code(settings)]
                                for arm, settings in seen.items()]
    return [Heading("Arms"), table(("arm", "settings (trials.arm_config)"), rows)]


def _servers(trials: Sequence[TrialRecord]) -> list[Block]:
    rows: list[list[Inline]] = []
    for t in trials:
        for seg in t.segments:
            for cls, where in seg.placement.items():
                command = where.command
                rows.append([str(t.id), t.arm, str(t.repeat), str(seg.index), cls, plain(where.device),
                             cpus_label(where) or "-", plain(where.url),
                             code(shlex.join(command) if command is not None else command),
                             code(where.env) if where.env else "-"])
    heading = Heading("Servers (each trial's command lines)")
    if not rows:
        return [heading, Paragraph(("No server placement was recorded.",))]
    body = table(("trial", "arm", "repeat", "segment", "class", "device", "cpus", "url", "command line",
                  "environment"), rows, "servers")
    return [heading, Part(f"{len(rows)} server processes", (body,), open=len(rows) <= OPEN_SERVERS)]


def section(summary: Summary, record: CampaignRecord | None = None, trials: Sequence[TrialRecord] = ()) -> Section:
    """The section, from the summary, and from the store's ``record`` and ``trials`` where it was read."""
    cond = summary.conditions or (record.conditions if record else None) or Provenance()
    blocks: list[Block] = [Heading("Campaign"), _campaign(summary, record, cond)]
    if summary.status.resumed:
        blocks += [Heading("Resumes"), table(RESUME_COLUMNS, resume_rows(summary))]
    blocks += [Heading("Request sets"),
               table(("class", "requests", "sha256", "source"),
                     [[name, str(rs.count), code(rs.sha256), rs.source]
                      for name, rs in (summary.request_sets or {}).items()])]
    if lines := output_length_lines(summary) + embedding_format_lines(summary):
        blocks.append(bullets(lines))
    blocks += [*_backend(cond.backend or BackendFacts()), *_generators(summary), Heading("Package versions"),
               table(("package", "version"), ([name, plain(v)] for name, v in sorted((cond.packages or {}).items())))]
    if trials:
        blocks += [*_arms(trials, summary.control), *_servers(trials)]
    else:  # the summary alone: where each server ran, from its placement; the rest is in the store
        cores = cpus_by_arm((t.arm, t.placement) for t in summary.trials)
        if cores:
            blocks.append(bullets(f"arm {arm}, CPU cores of each server (read back at its start): "
                                  + "; ".join(f"{name} {' / '.join(labels)}" for name, labels in classes.items())
                                  for arm, classes in cores.items()))
        blocks.append(Paragraph(("Each arm's settings and each server's command line are in results.sqlite "
                                 "(trials.arm_config, segments.placement).",)))
    return Section("conditions", "Conditions (everything needed to run it again)", tuple(blocks), "Conditions")
