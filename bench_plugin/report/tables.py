"""The report's HTML tables: what failed and why, and every condition needed to run the campaign again.

The conditions table is the seed's "keep the full conditions of every run, whatever it shows": the
scenario file and its hash, overrides, request sets, host, platform, package versions, source
revision, the command line, backend devices and driver, each arm's settings and each server's command
line. Keys the analysis adds later are still shown (generically), so nothing recorded goes missing.
"""

from __future__ import annotations

import html
import json
import shlex
from collections.abc import Iterable, Sequence
from typing import Any

from bench_plugin.report.clock import campaign_clock
from bench_plugin.report.comparison import RESUME_COLUMNS, resume_rows, status_text
from bench_plugin.report.generators import generators_line
from bench_plugin.report.placement import cpus_label
from bench_plugin.report.protocol import embedding_format_lines, output_length_lines
from bench_plugin.results.facts import BackendFacts
from bench_plugin.results.record import CampaignRecord
from bench_plugin.results.store import FailureGroup, StageRecord, TrialRecord
from bench_plugin.results.summary import Provenance, Summary
from bench_plugin.results.words import StageStatus


class Raw(str):
    """Text that is already HTML (a table cell that must not be escaped again)."""

    __slots__ = ()


def esc(value: Any) -> str:
    """HTML-escaped text of any value (``-`` for None; JSON for lists and dicts)."""
    if isinstance(value, Raw):
        return str(value)
    if value is None:
        return "-"
    if isinstance(value, dict | list):
        return html.escape(json.dumps(value, sort_keys=True))
    return html.escape(str(value))


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], css: str = "") -> str:
    """An HTML table; cells are escaped unless given as :class:`Raw`."""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "\n".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>" for row in rows)
    cls = f' class="{css}"' if css else ""
    return f"<table{cls}><thead><tr>{head}</tr></thead>\n<tbody>\n{body}\n</tbody></table>"


def code(value: Any) -> Raw:
    """A value in monospace (commands, hashes, JSON)."""
    return Raw(f"<code>{esc(value)}</code>")


def when(summary: Summary, epoch_s: float | None) -> str:
    """An epoch time on the clock of the host that ran the campaign, with its UTC offset (``-`` for None)."""
    return "-" if epoch_s is None else campaign_clock(summary, epoch_s)


def errors_table(trials: Sequence[TrialRecord], failures: Sequence[FailureGroup]) -> str:
    """Failed requests per trial, stage, class and kind, and every stage that did not complete, with why."""
    by_id = {t.id: t for t in trials}
    rows: list[list[Any]] = []
    for f in failures:
        trial = by_id.get(f.trial)
        stages = trial.stages if trial else []
        stage = next((s for s in stages if s.index == f.stage and f.workload in s.offered), None)
        rows.append([f.trial, trial.arm if trial else "?", trial.repeat if trial else "?",
                     _stage_name(stage, f.stage), stage.status if stage else "-", f.workload, f.kind, f.count,
                     f.detail or "-"])
    listed = {(r[0], r[3]) for r in rows}
    for trial in trials:
        for st in trial.stages:
            if st.status != StageStatus.COMPLETED and (trial.id, _stage_name(st, st.index)) not in listed:
                rows.append([trial.id, trial.arm, trial.repeat, _stage_name(st, st.index), st.status,
                             ", ".join(st.offered), "-", 0, st.reason or "-"])
    if not rows:
        return "<p class=\"ok\">No request failed, and every stage of every trial completed.</p>"
    rows.sort(key=lambda r: (r[0], r[3]))
    return table(["trial", "arm", "repeat", "stage", "stage status", "class", "error kind", "failed",
                  "reason / example message"], rows, "errors")


def _stage_name(stage: StageRecord | None, index: int) -> str:
    name = stage.name if stage is not None else None
    return f"{index} {name}" if name else str(index)


def _kv(pairs: Iterable[tuple[str, Any]]) -> str:
    return table(["", ""], [[Raw(f"<b>{esc(k)}</b>"), v] for k, v in pairs], "kv")


def conditions_section(summary: Summary, record: CampaignRecord, trials: Sequence[TrialRecord]) -> str:
    """Everything needed to rerun the campaign, as HTML."""
    scenario = summary.scenario
    cond = summary.conditions or record.conditions or Provenance()
    status = summary.status
    command = cond.command
    shown = {"backend", "command", "host", "platform", "python", "packages", "source_revision"}
    parts = [
        "<h3>Campaign</h3>",
        _kv([
            ("scenario", scenario.name), ("scenario file", code(scenario.path)),
            ("scenario sha256", code(scenario.sha256)),
            ("overrides", (summary.overrides.given() if summary.overrides else {}) or "none"),
            ("started", when(summary, record.started_s)), ("ended", when(summary, status.ended_s)),
            ("status", status_text(summary)),
            ("command line", code(shlex.join(command) if isinstance(command, list) else command)),
            ("source revision", code(cond.source_revision)),
            ("host", cond.host), ("platform", cond.platform), ("python", cond.python),
            *[(k, code(v) if isinstance(v, dict | list) else v) for k, v in sorted(cond.model_dump().items())
              if k not in shown],
        ]),
        *(["<h3>Resumes</h3>", table(list(RESUME_COLUMNS), resume_rows(summary))] if status.resumed else []),
        "<h3>Request sets</h3>",
        table(["class", "requests", "sha256", "source"],
              [[name, rs.count, code(rs.sha256), rs.source]
               for name, rs in (summary.request_sets or {}).items()]),
        *([f"<ul>{''.join(f'<li>{esc(line)}</li>' for line in lines)}</ul>"]
          if (lines := output_length_lines(summary) + embedding_format_lines(summary)) else []),
        _backend(cond.backend or BackendFacts()),
        *_generators(summary),
        "<h3>Package versions</h3>",
        table(["package", "version"], sorted((cond.packages or {}).items())),
        "<h3>Arms</h3>",
        _arms(trials, summary.control),
        "<h3>Servers (each trial's command lines)</h3>",
        _servers(trials),
    ]
    return "\n".join(parts)


def _generators(summary: Summary) -> list[str]:
    """The load generators: how many and why, and where each process ran (nothing where none was recorded)."""
    line, generators = generators_line(summary.load_generators), summary.load_generators
    if line is None or generators is None:
        return []
    rows = [[name, p.pid, p.host, p.cores] for name, p in
            ([("master", generators.master)] if generators.master else []) + sorted(generators.processes.items())]
    return ["<h3>Load generators</h3>", f"<p>{esc(line.removeprefix('load generators: '))}</p>",
            *([table(["process", "pid", "host", "CPU cores"], rows)] if rows else [])]


def _backend(facts: BackendFacts) -> str:
    devices = [d.model_dump() for d in facts.devices or []]
    columns = sorted({k for d in devices for k in d}, key=lambda k: (k not in ("name", "model"), k))
    parts = ["<h3>Backend and devices</h3>",
             _kv([(k, code(v) if isinstance(v, dict | list) else v)
                  for k, v in sorted(facts.model_dump(exclude={"devices"}).items())])]
    if devices:
        parts.append(table(columns, [[d.get(c) for c in columns] for d in devices]))
    return "\n".join(parts)


def _arms(trials: Sequence[TrialRecord], control: str | None) -> str:
    seen: dict[str, str] = {}
    for t in trials:
        seen.setdefault(t.arm, t.settings)
    rows = [[arm + (" (control)" if arm == control else ""), code(settings)] for arm, settings in seen.items()]
    return table(["arm", "settings (trials.arm_config)"], rows)


def _servers(trials: Sequence[TrialRecord]) -> str:
    rows = []
    for t in trials:
        for seg in t.segments:
            for cls, where in seg.placement.items():
                command = where.command
                rows.append([t.id, t.arm, t.repeat, seg.index, cls, where.device, cpus_label(where) or "-",
                             where.url, code(shlex.join(command) if command is not None else command),
                             code(where.env) if where.env else "-"])
    if not rows:
        return "<p>No server placement was recorded.</p>"
    body = table(["trial", "arm", "repeat", "segment", "class", "device", "cpus", "url", "command line",
                  "environment"], rows, "servers")
    # Open when short enough to read (and print) whole; a long campaign folds it away.
    state = " open" if len(rows) <= 12 else ""
    return f"<details{state}><summary>{len(rows)} server processes</summary>\n{body}\n</details>"
