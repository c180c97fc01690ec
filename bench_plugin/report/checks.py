"""The "Measurement checks" section: did each stage send what it said, and can its figures be trusted?

Per trial, stage and class, from the typed summary (results.summary): the nominal and the realised
offered rate (arrivals / planned duration), the requests, the P95 with its order-statistic 95% interval
and sample count (or why it is not bounded and how long the stage would have to be), how late the load
generator sent (send lag P99) and how many requests waited for a free slot, the load generators' CPU
and the host's other work. A stage flagged generator-limited or run on a busy host says so in its last column; the
verdict does not blame the GPU for a generator-limited stage (docs/analysis.md).
"""

from __future__ import annotations

from collections.abc import Iterator

from bench_plugin.report.basis import of_stats
from bench_plugin.report.page import Inline, Paragraph, Pct, Section, table
from bench_plugin.results.summary import ClassStats, StageSummary, Summary
from bench_plugin.results.words import StageStatus

HEADERS = ("trial", "stage", "class", "offered", "realised", "requests", "P95 ms [95% interval] (n)",
           "send lag P99 ms", "slot waits", "generator cores", "host: other work (cores)", "flags")

INTRO = ("Each stage sends exactly round(rate x duration) arrivals by default, so the realised rate (arrivals / "
         "planned duration) matches the nominal one; with plain-poisson arrivals it differs, and every figure and "
         "plot uses the realised one. A P95 comes with its distribution-free 95% interval from the order "
         "statistics; with fewer than 72 requests it cannot be bounded above, and the flag says how long the stage "
         "would have to run. Send lag is how late the load generator sent each request (its wait for a free "
         "max_in_flight slot excluded): a lag P99 above 10 ms, or a generator process above 0.9 core, marks the "
         "stage generator-limited and its verdict is withheld, unless the lag came from a few stalls of the event "
         "loop that touched at most 5% of each class's requests and changed no SLO outcome (the stalls note). "
         "'Host: other work' is the CPU that processes outside the run used during the stage; above max(0.5, 25% "
         "of the cores) the stage is flagged.")


def _number(value: float | None, digits: str = ".1f") -> str:
    return "-" if value is None else format(float(value), digits)


def _p95_value(figures: ClassStats) -> str:
    """The run's P95 with its order-statistic interval, without its count (``-`` without one)."""
    ci = figures.latency_ci_ms.get("p95")
    p95 = figures.latency_ms.get("p95")
    if p95 is None:
        return "-"
    if ci is None:
        return f"{p95:.1f}"
    return f"{p95:.1f} [{_number(ci.lo)}, {_number(ci.hi) if ci.hi is not None else 'unbounded'}]"


def _p95_cell(figures: ClassStats) -> Inline:
    """The P95 cell: value, interval and count; one from too few samples muted, in italics and marked."""
    value = _p95_value(figures)
    basis = of_stats(figures, "latency_p95_ms")
    if value == "-":
        return value
    if basis is None:
        return f"{value} (n={figures.requests})"
    return Pct(value, basis)


def _flags(stage: StageSummary, figures: ClassStats) -> str:
    flags = []
    if stage.generator_limited:
        flags.append(f"generator-limited: {stage.generator_limited}")
    if stage.generator_check and stage.generator_check.note:
        flags.append(stage.generator_check.note)
    if stage.host_busy:
        flags.append(f"busy host: {stage.host_busy}")
    if figures.p95_note:
        flags.append(figures.p95_note)
    if stage.status != StageStatus.COMPLETED:
        flags.append(f"stage {stage.status}")
    return "; ".join(flags) or "-"


def _rows(summary: Summary) -> Iterator[list[Inline]]:
    """One row per trial, stage and class, in run order."""
    for trial in summary.trials:
        for stage in trial.stages:
            cores = max((g.cores for g in stage.generators.values()), default=None)
            others = stage.host.others_cores if stage.host else None
            label = f"{stage.index} {stage.name}" if stage.name else str(stage.index)
            for name, figures in stage.classes.items():
                yield [f"{trial.id} {trial.arm} r{trial.repeat}", label, name, _number(stage.offered.get(name), "g"),
                       _number(stage.realised.get(name), ".3g"), str(figures.requests), _p95_cell(figures),
                       _number(figures.send_lag_ms.get("p99")), str(figures.slot_waits),
                       _number(cores, ".2f"), _number(others, ".2f"), _flags(stage, figures)]


def section(summary: Summary) -> Section:
    """The section: the intro and one table."""
    return Section("checks", "Measurement checks", (Paragraph((INTRO,)), table(HEADERS, _rows(summary), "checks")))
