"""The "Errors" section: failed requests per trial, stage, class and kind, and every stage that did not complete.

Read from the results store (results.store: the failed samples grouped by kind, with one example message, and
each trial's stages); a report written from the summary alone has no store to read, and no section.
"""

from __future__ import annotations

from collections.abc import Sequence

from bench_plugin.report.page import Inline, Paragraph, Section, table
from bench_plugin.results.store import FailureGroup, StageRecord, TrialRecord
from bench_plugin.results.words import StageStatus

HEADERS = ("trial", "arm", "repeat", "stage", "stage status", "class", "error kind", "failed",
           "reason / example message")

NONE = "No request failed, and every stage of every trial completed."


def _stage_name(stage: StageRecord | None, index: int) -> str:
    name = stage.name if stage is not None else None
    return f"{index} {name}" if name else str(index)


def section(trials: Sequence[TrialRecord], failures: Sequence[FailureGroup]) -> Section:
    """The section: a row per group of failures, and per stage that did not complete and failed nothing."""
    by_id = {t.id: t for t in trials}
    rows: list[tuple[int, str, list[Inline]]] = []
    for f in failures:
        trial = by_id.get(f.trial)
        stage = next((s for s in (trial.stages if trial else []) if s.index == f.stage and f.workload in s.offered),
                     None)
        name = _stage_name(stage, f.stage)
        rows.append((f.trial, name, [str(f.trial), trial.arm if trial else "?", str(trial.repeat) if trial else "?",
                                     name, stage.status if stage else "-", f.workload, f.kind, str(f.count),
                                     f.detail or "-"]))
    listed = {(trial, name) for trial, name, _ in rows}
    for trial in trials:
        for st in trial.stages:
            name = _stage_name(st, st.index)
            if st.status != StageStatus.COMPLETED and (trial.id, name) not in listed:
                rows.append((trial.id, name, [str(trial.id), trial.arm, str(trial.repeat), name, st.status,
                                              ", ".join(st.offered), "-", "0", st.reason or "-"]))
    if not rows:
        return Section("errors", "Errors", (Paragraph((NONE,), "ok"),))
    rows.sort(key=lambda r: (r[0], r[1]))
    return Section("errors", "Errors", (table(HEADERS, (cells for _, _, cells in rows), "errors"),))
