"""The "Disruption" section: per disrupted trial, what was done to its pods or nodes and what the requests saw.

One table per trial (a row per class: action, target, when, failed requests, latency spike, time to
recover) and the recorded steps beneath it (action, target, result), from the typed summary
(results.summary StageDisruption). Shown only where a stage was disrupted.
"""

from __future__ import annotations

from collections.abc import Iterator

from bench_plugin.report.tables import esc, table
from bench_plugin.results.summary import StageDisruption, Summary, TrialSummary

HEADERS = ("class", "action", "target", "at", "failed requests", "latency spike (P95 1 s peak / before)",
           "time to recover")
STEP_HEADERS = ("action", "target", "result")
MAIN_ACTIONS = ("rollout-restart", "evict", "cordon", "fail-node")


def disrupted(summary: Summary) -> list[tuple[TrialSummary, int, StageDisruption]]:
    """Every (trial, stage index, disruption), in run order."""
    return [(trial, stage.index, stage.disruption) for trial in summary.trials for stage in trial.stages
            if stage.disruption is not None]


def _target(d: StageDisruption) -> str:
    targets = [a.target for a in d.actions if a.action in MAIN_ACTIONS]
    return ", ".join(dict.fromkeys(targets)) or "-"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def rows(stage: int, d: StageDisruption) -> Iterator[list[str]]:
    """One row per class of a disrupted stage."""
    at = f"stage {stage} +{d.at_s:g} s" if d.started_s is not None else f"stage {stage} +{d.at_s:g} s (not started)"
    for name, c in d.classes.items():
        failed = f"{c.failed} of {c.requests}" + (f" ({100 * c.failed_share:.1f}%)" if c.failed_share else "")
        spike = f"{_ms(c.peak_p95_ms)} / {_ms(c.p95_before_ms)} ms" + (f" (x{c.spike:.2f})" if c.spike else "")
        recovered = "not within the stage" if c.recovered_s is None else f"{c.recovered_s:.2f} s"
        yield [name, d.kind, _target(d), at, failed, spike, recovered]
    if not d.classes:
        yield ["-", d.kind, _target(d), at, "-", "-", "-"]


def steps(d: StageDisruption) -> Iterator[list[str]]:
    """The recorded steps of a disruption."""
    for a in d.actions:
        yield [a.action, a.target, a.result if a.result is not None else ""]


def intro(d: StageDisruption) -> str:
    return (f"Failed requests and the latency spike count requests sent from the disruption's start to the stage's "
            f"end; time to recover: {d.rule}.")


def html_section(summary: Summary) -> str:
    """The report.html section (empty without a disrupted stage)."""
    parts = []
    for trial, index, d in disrupted(summary):
        parts.append(f"<h3>Trial {trial.id}: {esc(trial.arm)} r{trial.repeat}</h3>")
        parts.append(table(list(HEADERS), rows(index, d), "disruption"))
        parts.append(table(list(STEP_HEADERS), steps(d), "disruption-steps"))
    if not parts:
        return ""
    return f"<p>{esc(intro(disrupted(summary)[0][2]))}</p>\n" + "\n".join(parts)


def _md(headers: tuple[str, ...], body: Iterator[list[str]]) -> list[str]:
    return ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers),
            *("| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in body)]


def markdown_section(summary: Summary) -> list[str]:
    """The report.md section ([] without a disrupted stage)."""
    found = disrupted(summary)
    if not found:
        return []
    lines = ["## Disruption", "", intro(found[0][2]), ""]
    for trial, index, d in found:
        lines += [f"### Trial {trial.id}: {trial.arm} r{trial.repeat}", "", *_md(HEADERS, rows(index, d)), "",
                  *_md(STEP_HEADERS, steps(d)), ""]
    return lines
