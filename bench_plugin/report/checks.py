"""The "Measurement checks" section: did each stage send what it said, and can its figures be trusted?

Per trial, stage and class, from summary.json: the nominal and the realised offered rate (arrivals /
planned duration), the requests, the P95 with its order-statistic 95% interval and sample count (or
why it is not bounded and how long the stage would have to be), how late the load generator sent
(send lag P99) and how many requests waited for a free slot, the load generators' CPU and the host's
other work. A stage flagged generator-limited or run on a busy host says so in its last column; the
verdict does not blame the GPU for a generator-limited stage (docs/analysis.md).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from bench_plugin.report.tables import esc, table

HEADERS = ("trial", "stage", "class", "offered", "realised", "requests", "P95 ms [95% interval] (n)",
           "send lag P99 ms", "slot waits", "generator cores", "host: other work (cores)", "flags")

INTRO = ("Each stage sends exactly round(rate x duration) arrivals by default, so the realised rate (arrivals / "
         "planned duration) matches the nominal one; with plain-poisson arrivals it differs, and every figure and "
         "plot uses the realised one. A P95 comes with its distribution-free 95% interval from the order "
         "statistics; with fewer than 72 requests it cannot be bounded above, and the flag says how long the stage "
         "would have to run. Send lag is how late the load generator sent each request (its wait for a free "
         "max_in_flight slot excluded): a lag P99 above 10 ms, or a generator process above 0.9 core, marks the "
         "stage generator-limited and its verdict is withheld. 'Host: other work' is the CPU that processes outside "
         "the run used during the stage; above max(0.5, 25% of the cores) the stage is flagged.")


def _number(value: Any, digits: str = ".1f") -> str:
    return "-" if value is None else format(float(value), digits)


def _p95(figures: dict[str, Any]) -> str:
    ci = (figures.get("latency_ci_ms") or {}).get("p95") or {}
    p95 = (figures.get("latency_ms") or {}).get("p95")
    n = ci.get("n", figures.get("requests"))
    if p95 is None:
        return "-"
    lo, hi = ci.get("lo"), ci.get("hi")
    if not ci:
        return f"{p95:.1f} (n={n})"
    bounds = f"[{_number(lo)}, {_number(hi) if hi is not None else 'unbounded'}]"
    return f"{p95:.1f} {bounds} (n={n})"


def _flags(stage: dict[str, Any], figures: dict[str, Any]) -> str:
    flags = []
    if stage.get("generator_limited"):
        flags.append(f"generator-limited: {stage['generator_limited']}")
    if stage.get("host_busy"):
        flags.append(f"busy host: {stage['host_busy']}")
    if figures.get("p95_note"):
        flags.append(str(figures["p95_note"]))
    if stage.get("status") not in (None, "completed"):
        flags.append(f"stage {stage['status']}")
    return "; ".join(flags) or "-"


def rows(summary: dict[str, Any]) -> Iterator[list[str]]:
    """One row per trial, stage and class, in run order."""
    for trial in summary.get("trials") or []:
        for stage in trial.get("stages") or []:
            generators = stage.get("generators") or {}
            cores = max((g.get("cores") or 0.0 for g in generators.values()), default=None)
            host = stage.get("host") or {}
            label = f"{stage['index']} {stage['name']}" if stage.get("name") else str(stage["index"])
            for name, figures in (stage.get("classes") or {}).items():
                offered = (stage.get("offered") or {}).get(name)
                realised = (stage.get("realised") or {}).get(name)
                yield [f"{trial['id']} {trial['arm']} r{trial['repeat']}", label, name, _number(offered, "g"),
                       _number(realised, ".3g"), str(figures.get("requests", "-")), _p95(figures),
                       _number((figures.get("send_lag_ms") or {}).get("p99")), str(figures.get("slot_waits", "-")),
                       _number(cores, ".2f"), _number(host.get("others_cores"), ".2f"), _flags(stage, figures)]


def flagged(summary: dict[str, Any]) -> int:
    """How many (trial, stage, class) rows carry a flag."""
    return sum(1 for row in rows(summary) if row[-1] != "-")


def html_section(summary: dict[str, Any]) -> str:
    """The report.html section: the intro and one table."""
    body = table(list(HEADERS), rows(summary), "checks")
    return f"<p>{esc(INTRO)}</p>\n{body}"


def markdown_section(summary: dict[str, Any]) -> list[str]:
    """The report.md section."""
    lines = ["## Measurement checks", "", INTRO, "", "| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows(summary)]
    return [*lines, ""]
