"""The "Disruption" section: what each disruption cost over an arm's repeats, then per disrupted trial what was
done to its servers, pods or nodes and what the requests saw.

First one table over the repeats (a row per arm, stage and class: failed requests, the latency and TTFT the
disruption added at its worst second, the time to recover, how long a replaced server's class had none and
its new server's cold start, whether the others came through; results.summary DisruptionFigures), then one
table per trial (a row per class: action, target, when, failed requests, latency spike, time to recover) and
the recorded steps beneath it (action, target, result), from the typed summary (StageDisruption). Shown only
where a stage was disrupted; :func:`cost_text` is the answer's line for a disrupted stage.
"""

from __future__ import annotations

from collections.abc import Iterator

from bench_plugin.report.comparison import spread_text
from bench_plugin.report.page import Block, Heading, Paragraph, Section, table
from bench_plugin.results.summary import DisruptionFigures, Spread, StageDisruption, Summary, TrialSummary

HEADERS = ("class", "action", "target", "at", "failed requests", "latency spike (P95 1 s peak / before)",
           "time to recover")
STEP_HEADERS = ("action", "target", "result")
MAIN_ACTIONS = ("rollout-restart", "evict", "cordon", "fail-node", "stop", "kill", "spawn")
COST_HEADERS = ("arm", "stage", "disruption", "class", "failed requests", "added P95 (worst 1 s)",
                "added TTFT P95", "time to recover", "without a server", "new server ready after", "came through")


def _signed(fig: Spread | None, digits: int = 1, unit: str = " ms") -> str:
    """``+410 ± 30 ms``: a figure the disruption added, signed."""
    if fig is None or fig.mean is None:
        return "-"
    return ("+" if fig.mean >= 0 else "") + spread_text(fig, digits, unit)


def _seconds(fig: Spread | None) -> str:
    return "-" if fig is None or fig.mean is None else spread_text(fig, 2, " s")


def cost_text(d: DisruptionFigures) -> str:
    """``restart (3 repeats): embedding without a server 12.3 ± 0.4 s, ...; llm P95 +410 ± 30 ms, ...``"""
    parts = []
    for name, c in d.classes.items():
        bits = []
        if c.unavailable_s is not None:
            bits.append(f"without a server {_seconds(c.unavailable_s)}")
        if c.cold_start_s is not None:
            bits.append(f"new server ready {_seconds(c.cold_start_s)} after its start")
        bits.append(f"{spread_text(c.failed, 0)} failed")
        bits.append(f"P95 {_signed(c.added_p95_ms)}")
        if c.added_ttft_p95_ms is not None:
            bits.append(f"TTFT P95 {_signed(c.added_ttft_p95_ms)}")
        bits.append(f"recovered in {_seconds(c.recovered_s)}"
                    + (f" ({c.unrecovered} not within the stage)" if c.unrecovered else ""))
        if c.checked:
            bits.append(f"came through {c.survived} of {c.checked}")
        parts.append(f"{name} " + ", ".join(bits))
    return f"{d.kind} ({d.repeats} repeat{'s' if d.repeats != 1 else ''}): " + "; ".join(parts)


def cost_rows(summary: Summary) -> Iterator[list[str]]:
    """One row per arm, disrupted stage and class, over the arm's repeats."""
    for arm, figures in summary.arms.items():
        for stage in figures.stages:
            d = stage.disruption
            if d is None:
                continue
            for name, c in d.classes.items():
                share = c.failed_share.mean
                failed = spread_text(c.failed, 0) + (f" ({100 * share:.1f}%)" if share else "")
                recovered = _seconds(c.recovered_s) + (f", {c.unrecovered} not within the stage" if c.unrecovered
                                                       else "")
                through = f"{c.survived} of {c.checked}" if c.checked else "-"
                yield [arm, str(stage.index), f"{d.kind} ({d.repeats})", name, failed, _signed(c.added_p95_ms),
                       _signed(c.added_ttft_p95_ms), recovered, _seconds(c.unavailable_s), _seconds(c.cold_start_s),
                       through]


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


COST_INTRO = ("Over each arm's repeats (mean ± 95% interval; the number of repeats beside the disruption): the "
              "latency a disruption added is the highest P95 over 1 s windows from its start minus the P95 before it; "
              "a replaced server's class was without a server from its front refusing (or the kill) to its front "
              "moving to the new server, which was ready that long after it was started; the other classes came "
              "through when their servers still ran and answered.")


def section(summary: Summary) -> Section | None:
    """The section (None without a disrupted stage): the cost over repeats, then per disrupted trial its table and
    its steps."""
    found = disrupted(summary)
    if not found:
        return None
    costs = list(cost_rows(summary))
    blocks: list[Block] = [Paragraph((COST_INTRO,)), table(COST_HEADERS, costs, "disruption-cost")] if costs else []
    blocks.append(Paragraph((intro(found[0][2]),)))
    for trial, index, d in found:
        blocks += [Heading(f"Trial {trial.id}: {trial.arm} r{trial.repeat}"),
                   table(HEADERS, rows(index, d), "disruption"), table(STEP_HEADERS, steps(d), "disruption-steps")]
    return Section("disruption", "Disruption", tuple(blocks))
