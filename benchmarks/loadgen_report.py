"""Figures of benchmarks/loadgen_capacity.py: its typed results and the markdown it prints.

The markdown is what docs/benchmarks.md quotes: a summary table (each rate against the bare
reference of its class, taken in the same run), then every stage of every search, then what the
garbage collector did in each process of the plugin.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from loadgen_procs import CpuSampler
from loadgen_stages import MAX_LAG_P99_MS, MIN_SENT, StageResult


@dataclass(frozen=True)
class Campaign:
    """One plugin campaign of the benchmark (a sweep of stages)."""

    name: str
    cores: list[str]
    """The core each worker was pinned to."""
    stages: list[StageResult]
    gc: list[dict[str, Any]]
    """The GC log of each process (loadgen_locustfile.py)."""
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {"name": self.name, "cores": self.cores, "seconds": round(self.seconds, 1), "gc": self.gc,
                "stages": [s.to_dict() for s in self.stages]}


@dataclass(frozen=True)
class Search:
    """The sustained rate of one class on one layout of workers, and the sweeps that found it."""

    name: str
    workload: str
    cores: list[str]
    runs: list[Campaign]
    best: StageResult | None
    """The highest sustained stage (None: not even the lowest rate)."""
    failed: StageResult | None
    """The lowest stage that was not sustained (None: every rate tried was)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {"workload": self.workload, "cores": self.cores,
                "sustained": self.best.to_dict() if self.best else None,
                "first_failed": self.failed.to_dict() if self.failed else None,
                "runs": [run.to_dict() for run in self.runs]}


def bare_stats(stats: list[dict[str, Any]], sampler: CpuSampler, pid: int) -> dict[str, Any]:
    """Rate and CPU of a bare-Locust run, from its --json-file statistics (one entry)."""
    entry = stats[0]
    start, end = float(entry["start_time"]), float(entry["last_request_timestamp"])
    return {"requests": entry["num_requests"], "failures": entry["num_failures"],
            "rate": entry["num_requests"] / (end - start), "cpu": sampler.share(pid, start, end)}


def _num(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _reference(figures: dict[str, Any], workload: str) -> float:
    rates = [b["rate"] for b in figures[workload]["bare"]]
    return sum(rates) / len(rates)


def _summary_rows(figures: dict[str, Any], workload: str) -> list[str]:
    bare = figures[workload]["bare"]
    ref = _reference(figures, workload)
    rates = " / ".join(_num(b["rate"]) for b in bare)
    cpu = " / ".join(_num(b["cpu"], 2) for b in bare)
    rows = [f"| {workload} | bare Locust, {len(bare)} run(s) ({'before / after' if len(bare) > 1 else 'before'} "
            f"the plugin) | {rates} | 1.00 | - | {cpu} |"]
    layouts = {"1w": "plugin, 1 worker (core 1)", "local": "plugin, local runner (core 1)",
               "2w-same": "plugin, 2 workers (both on core 1)",
               "2w-spread": "plugin, 2 workers (cores 1 and 0)"}
    for key, label in layouts.items():
        found = figures[workload].get(key)
        if found is None:
            continue
        best = found["sustained"]
        if best is None:
            rows.append(f"| {workload} | {label} | below the lowest rate tried | - | - | - |")
            continue
        rows.append(f"| {workload} | {label} | {_num(best['rate'])} | **{best['rate'] / ref:.2f}x** | "
                    f"{_num(best['lag_p99_ms'], 2)} | {_num(best['sender_cpu'], 2)} |")
    return rows


def _pauses(stage: dict[str, Any]) -> str:
    if stage["gc_pauses"] is None or stage["status"] == "skipped":
        return "-"
    return f"{stage['gc_pauses']} ({stage['gc_max_ms']:g} ms)" if stage["gc_pauses"] else "0"


def _stage_rows(search: dict[str, Any]) -> list[str]:
    rows = []
    for run in search["runs"]:
        for s in run["stages"]:
            rows.append(f"| {run['name']} | {_num(s['rate'])} | {s['offered']:,} | {100 * s['sent']:.1f} | "
                        f"{_num(s['lag_p50_ms'], 2)} | {_num(s['lag_p99_ms'], 2)} | {_num(s['lag_max_ms'], 1)} | "
                        f"{s['errors']} | {_num(s['sender_cpu'], 2)} | {_pauses(s)} | {s['status']} | "
                        f"{'yes' if s['passed'] else 'no'} |")
    return rows


def _gc_rows(search: dict[str, Any]) -> list[str]:
    rows = []
    for run in search["runs"]:
        for g in sorted(run["gc"], key=lambda g: g["role"]):
            rows.append(f"| {run['name']} | {g['role']} | {tuple(g['thresholds'])} | {g['frozen']:,} | "
                        f"{' / '.join(str(n) for n in g['collections'])} | "
                        f"{' / '.join(f'{v:g}' for v in g['max_pause_ms'])} |")
    return rows


def markdown(figures: dict[str, Any]) -> str:
    """The benchmark's figures as markdown tables."""
    m = figures["machine"]
    lines = [f"Taken {m['date']} ({figures['mode']} mode): {m['cpu']}, {m['cores']} cores, Python {m['python']}, "
             f"Locust {m['locust']}, nginx {m['nginx']}, kernel {m['kernel']}. Pinning: "
             + ", ".join(f"{k} on core {v}" for k, v in m["pinning"].items()) + ".", "",
             "CPU probe (5M pure-Python loop steps on the load generator's core): "
             + ", ".join(f"{k.replace('_', ' ')} {v:.2f} s" for k, v in m.get("probe_s", {}).items()) + ".", "",
             f"Sustained: >= {MIN_SENT:.0%} of the offered arrivals sent within the stage, send lag P99 < "
             f"{MAX_LAG_P99_MS:g} ms, no errors; stages of {figures['settings']['stage_s']:g} s.", "",
             "| class | load generator | req/s | ratio to bare | send lag P99 (ms) | sender CPU (cores) |",
             "|---|---|---:|---:|---:|---:|"]
    searches = []
    for workload in ("embedding", "llm"):
        if workload in figures:
            lines += _summary_rows(figures, workload)
            searches += [(f"{workload}, {key}", v) for key, v in figures[workload].items() if key != "bare"]
    lines += ["", "Every stage:", "",
              "| sweep | offered req/s | arrivals | sent in stage % | lag P50 ms | lag P99 ms | lag max ms | "
              "errors | sender CPU | GC pauses >= 1 ms (longest) | status | sustained |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"]
    for _, search in searches:
        lines += _stage_rows(search)
    lines += ["", "Garbage collection per process (collections and longest pause in ms, per generation 0 / 1 / 2):",
              "", "| sweep | process | thresholds | frozen objects | collections | longest pause ms |",
              "|---|---|---|---:|---|---|"]
    for _, search in searches:
        lines += _gc_rows(search)
    return "\n".join(lines) + "\n"
