"""The results of benchmarks/loadgen_capacity.py: one typed document, written as JSON and as markdown.

``Report`` holds what one run measured (the machine, the CPU-per-request rounds, the searches, the
default command's sweep, and per workload the error that stopped a part, if one did); ``to_dict`` is
loadgen_capacity.json and ``markdown`` loadgen_capacity.md, what the script prints and docs/benchmarks.md
quotes: a table per part, the goals judged on what it measured (loadgen_goals.py), then every stage of the
searches and of the default command.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from loadgen_cpu import BUNCHED_S, CpuRounds, Window
from loadgen_default import DefaultRun
from loadgen_goals import Goal, judge, to_dicts
from loadgen_goals import markdown as goals_markdown
from loadgen_search import Search
from loadgen_stages import FAIL, MAX_LAG_P99_MS, MIN_SENT, OTHER_LIMIT_CORES, PASS, StageResult

from bench_plugin.results.spread import Spread

FORMAT = "loadgen_capacity/2"
"""Written into the JSON; 2: the null server and realistic replies (1 was nginx and toy replies)."""


@dataclass
class Report:
    """One run of the benchmark."""

    machine: dict[str, Any]
    mode: str
    settings: dict[str, Any]
    out: str
    cpu: list[CpuRounds] = field(default_factory=list)
    searches: list[Search] = field(default_factory=list)
    default: DefaultRun | None = None
    errors: dict[str, str] = field(default_factory=dict)
    """Part and workload (``cpu embedding-float``) -> why it measured nothing."""
    seconds: float = 0.0

    @property
    def goals(self) -> list[Goal]:
        """The goals judged on what this run measured."""
        return judge(self.cpu, self.default, self.machine["cores"], self.settings["target"])

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {"format": FORMAT, "machine": self.machine, "mode": self.mode, "settings": self.settings,
                "out": self.out, "seconds": round(self.seconds, 1), "errors": self.errors,
                "cpu_per_request": [c.to_dict() for c in self.cpu],
                "one_process": [s.to_dict() for s in self.searches],
                "default_command": self.default.to_dict() if self.default else None,
                "goals": to_dicts(self.goals)}

    def markdown(self) -> str:
        """The run as markdown tables."""
        lines = _machine(self.machine, self.mode)
        if self.cpu:
            lines += _cpu(self.cpu)
        if self.searches:
            lines += _searches(self.searches)
        if self.default:
            lines += _default(self.default)
        if self.cpu or self.default:
            lines += goals_markdown(self.goals)
        if self.errors:
            lines += ["", "Parts that measured nothing:", ""]
            lines += [f"- {where}: {why}" for where, why in self.errors.items()]
        if self.searches or self.default:
            lines += _every_stage(self.searches, self.default)
        lines += ["", f"({self.seconds:.0f} s)"]
        return "\n".join(lines) + "\n"


def _num(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _machine(m: dict[str, Any], mode: str) -> list[str]:
    probe = m.get("probe_s") or {}
    return [f"Taken {m['date']} ({mode} mode): {m['cpu']}, {m['cores']} cores, Python {m['python']}, Locust "
            f"{m['locust']}, msgspec {m['msgspec']}, kernel {m['kernel']}; null server {m['nullserver']['sha256']}.",
            "Cores: " + "; ".join(f"{k} {v}" for k, v in m["pinning"].items()) + ".",
            "CPU probe (5M pure-Python loop steps on the measured core): "
            + ", ".join(f"{k.replace('_', ' ')} {v:.2f} s" for k, v in probe.items()) + "."]


def _rounds(windows: list[Window]) -> str:
    return " / ".join(_num(w.ms_per_request, 2) for w in windows)


BUNCHED_MS = BUNCHED_S * 1000


def _cpu(found: list[CpuRounds]) -> list[str]:
    arrivals = {c.bare_arrivals for c in found}
    sent = ("one Poisson stream at R, as the plugin's arrivals" if arrivals == {"poisson"} else
            "each user paced by constant_throughput" if arrivals == {"paced"} else "as each row says")
    lines = ["", "CPU per request at the same rate R: the plugin's users in one worker (master elsewhere) against bare "
             f"Locust (FastHttpUsers sending {sent}, the plugin's requests and reply parser), interleaved rounds, "
             "CPU ms of the process over each round's window / requests completed in it; bunched: the median "
             f"round's share of completions within {BUNCHED_MS:g} ms of the one before (Poisson at R: "
             f"1 - exp(-R x {BUNCHED_MS:g} ms)):", "",
             "| workload | R (req/s) | request | bare ms/req (median) | plugin ms/req (median) | plugin / bare | "
             "paired (95% CI) | bare rounds | plugin rounds | plugin send lag P99 (ms) | failed (bare / plugin) | "
             "bunched (bare / plugin) | other programs / steal (cores, max) |",
             "|---|---:|---|---:|---:|---:|---|---|---|---|---|---|---:|"]
    for c in found:
        request = f"{c.request['mean_body_bytes']:,} B" + (f", {c.request['encoding_format'][0]}"
                                                           if c.request.get("encoding_format") else "")
        if len(arrivals) > 1:
            request += f"; bare {c.bare_arrivals}"
        if c.variant:
            request += f"; plugin variant {c.variant}"
        lags = " / ".join(_num(w.lag_p99_ms, 2) for w in c.plugin)
        failed = f"{sum(w.failed for w in c.bare)} / {sum(w.failed for w in c.plugin)}"
        windows = [*c.bare, *c.plugin]
        other = max((w.other_cpu for w in windows if w.other_cpu is not None), default=None)
        stolen = max((w.steal_cpu for w in windows if w.steal_cpu is not None), default=None)
        lines.append(f"| {c.workload} | {_num(c.rate)} | {request} | {_num(c.median(c.bare), 3)} | "
                     f"{_num(c.median(c.plugin), 3)} | **{_num(c.ratio, 2)}x** | {_paired(c.paired)} | "
                     f"{_rounds(c.bare)} | {_rounds(c.plugin)} | {lags} | {failed} | "
                     f"{_bunched(c.bare)} / {_bunched(c.plugin)} | {_num(other, 2)} / {_num(stolen, 2)} |")
    return lines


def _bunched(windows: list[Window]) -> str:
    """The median window's bunched share, as a percentage; ``-`` where none says."""
    values = [w.bunched for w in windows if w.bunched is not None]
    return f"{100 * statistics.median(values):.0f}%" if values else "-"


def _paired(s: Spread) -> str:
    """``1.12x [1.03, 1.22]``; the mean alone from one pair, ``-`` from none."""
    if s.mean is None:
        return "-"
    return f"{s.mean:.2f}x" + (f" [{s.lo:.2f}, {s.hi:.2f}]" if s.lo is not None and s.hi is not None else "")


def _searches(found: list[Search]) -> list[str]:
    lines = ["", f"The highest rate one plugin process sustains (>= {MIN_SENT:.0%} of the arrivals sent within the "
             f"stage, send lag P99 < {MAX_LAG_P99_MS:g} ms, no failed request; a stage not sustained while other "
             f"programs took > {OTHER_LIMIT_CORES:g} core is 'disturbed', not a failure; the hypervisor's steal "
             "excuses nothing):", "",
             "| workload | sustained req/s | send lag P99 (ms) | sender CPU (cores) | first failed: req/s, lag P99, "
             "sent | CPU-bound estimate (req/s) |", "|---|---:|---:|---:|---|---:|"]
    for s in found:
        best, fail = s.best, s.failed
        failed = "-"
        if fail is not None:
            status = "" if fail.status == "completed" else f", {fail.status}"
            failed = f"{_num(fail.rate)}, {_num(fail.lag_p99_ms, 2)} ms, {100 * fail.sent:.0f}%{status}"
        if best is None:
            lines.append(f"| {s.workload} | below {_num(s.runs[0].stages[0].rate)} | - | - | {failed} | "
                         f"{_num(s.estimate)} |")
        else:
            lines.append(f"| {s.workload} | {_num(best.rate)} | {_num(best.lag_p99_ms, 2)} | "
                         f"{_num(best.sender_cpu, 2)} | {failed} | {_num(s.estimate)} |")
    return lines


def _default(d: DefaultRun) -> list[str]:
    best = d.best
    lines = ["", f"The default command (locustfiles/mixed.py, no --processes) on cores {d.cores}, embedding-base64 "
             "alone: a stage is sustained by the rule above and when the campaign's summary.json does not flag it "
             "generator-limited.", "",
             "| offered req/s | sent % | lag P50 (ms) | lag P99 (ms) | errors | load generators (summary) | processes "
             "seen | CPU (cores) | other programs / steal (cores) | generator-limited | sustained |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"]
    for s in d.stages:
        j = s.judged
        if j.status == "skipped":
            lines.append(f"| {_num(j.rate)} | - | - | - | - | - | - | - | - | - | skipped |")
            continue
        lines.append(f"| {_num(j.rate)} | {100 * j.sent:.1f} | {_num(j.lag_p50_ms, 2)} | {_num(j.lag_p99_ms, 2)} | "
                     f"{j.errors} | {len(s.generators)} | {s.processes_seen} | {_num(j.sender_cpu, 2)} | "
                     f"{_num(j.other_cpu, 2)} / {_num(j.steal_cpu, 2)} | {(s.generator_limited or '-')[:90]} | "
                     f"{_said(s.outcome)} |")
    lines += ["", f"Highest total sustained: **{_num(best.judged.rate) if best else 'none'} req/s**"
              + (f" with {len(best.generators)} load generator(s), {_num(best.judged.sender_cpu, 2)} cores."
                 if best else ".")]
    return lines


def _said(outcome: str) -> str:
    return {PASS: "yes", FAIL: "no"}.get(outcome, "disturbed")


def _pauses(stage: StageResult) -> str:
    if stage.gc_pauses is None or stage.status == "skipped":
        return "-"
    return f"{stage.gc_pauses} ({stage.gc_max_ms:g} ms)" if stage.gc_pauses else "0"


def _row(sweep: str, s: StageResult) -> str:
    return (f"| {sweep} | {_num(s.rate)} | {s.offered:,} | {100 * s.sent:.1f} | {_num(s.lag_p50_ms, 2)} | "
            f"{_num(s.lag_p99_ms, 2)} | {_num(s.lag_max_ms, 1)} | {s.errors} | {_num(s.sender_cpu, 2)} | "
            f"{_num(s.other_cpu, 2)} / {_num(s.steal_cpu, 2)} | {_pauses(s)} | {s.status} | {_said(s.outcome)} |")


def _every_stage(searches: list[Search], default: DefaultRun | None) -> list[str]:
    lines = ["", "Every stage:", "",
             "| sweep | offered req/s | arrivals | sent in stage % | lag P50 ms | lag P99 ms | lag max ms | errors | "
             "sender CPU | other programs / steal | GC pauses >= 1 ms (longest) | status | sustained |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"]
    for search in searches:
        lines += [_row(run.name.removeprefix("search-"), s) for run in search.runs for s in run.stages]
    if default:
        lines += [_row("default command", s.judged) for s in default.stages]
    return lines
