"""summary.md: per stage, arm and class, the figures over repeats, for terminals and pull requests."""

from __future__ import annotations

from typing import Any


def _fmt(fig: dict[str, Any] | None, digits: int = 1, suffix: str = "") -> str:
    """``mean ± ci95`` (or just the mean with one repeat; ``-`` when missing)."""
    if not fig or fig.get("mean") is None:
        return "-"
    text = f"{fig['mean']:.{digits}f}"
    if fig.get("ci95") is not None:
        text += f" ± {fig['ci95']:.{digits}f}"
    return text + suffix


def _offered(offered: dict[str, float], arrival: dict[str, str] | None = None) -> str:
    parts = []
    for name, load in offered.items():
        unit = "users" if arrival and arrival.get(name) == "closed" else "req/s"
        parts.append(f"{name} {load:g} {unit}")
    return ", ".join(parts)


def _trials_table(summary: dict[str, Any]) -> list[str]:
    lines = ["| trial | arm | repeat | status | stages (status) |", "|---|---|---|---|---|"]
    for t in summary["trials"]:
        stages = ", ".join(f"{s['index']}:{s['status']}" for s in t["stages"])
        reason = f" ({t['reason']})" if t.get("reason") else ""
        lines.append(f"| {t['id']} | {t['arm']} | {t['repeat']} | {t['status']}{reason} | {stages} |")
    return lines


def _stage_table(summary: dict[str, Any], index: int) -> list[str]:
    lines = [
        "| arm | class | throughput req/s | P50 ms | P95 ms | TTFT P95 ms | TPOT P95 ms | error rate "
        "| thr. vs control |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for arm, figures in summary["arms"].items():
        if index >= len(figures["stages"]):
            continue
        for name, fig in figures["stages"][index]["classes"].items():
            norm = fig.get("normalised_throughput")
            norm_text = "control" if arm == summary.get("control") else _fmt(norm, 2, "x")
            err = fig.get("error_rate") or {}
            err_text = "-" if err.get("mean") is None else f"{100 * err['mean']:.1f}%"
            lines.append(
                f"| {arm} | {name} | {_fmt(fig['throughput_rps'], 2)} | {_fmt(fig['latency_p50_ms'])} "
                f"| {_fmt(fig['latency_p95_ms'])} | {_fmt(fig.get('ttft_p95_ms'))} | {_fmt(fig.get('tpot_p95_ms'))} "
                f"| {err_text} | {norm_text} |"
            )
    return lines


def render_summary(summary: dict[str, Any]) -> str:
    """The markdown text of summary.md."""
    scenario = summary["scenario"]
    status = summary.get("status") or {}
    overrides = {k: v for k, v in (summary.get("overrides") or {}).items() if v is not None}
    lines = [
        f"# Campaign {scenario['name']}",
        "",
        f"- status: {status.get('status')}" + (f" ({status['reason']})" if status.get("reason") else ""),
        f"- scenario sha256: `{scenario['sha256']}`",
        f"- control arm: {summary.get('control')}",
        f"- overrides: {overrides or 'none'}",
    ]
    for name, rs in (summary.get("request_sets") or {}).items():
        lines.append(f"- request set {name}: {rs['count']} requests, sha256 `{rs['sha256'][:16]}…` ({rs['source']})")
    backend = (summary.get("conditions") or {}).get("backend", {})
    lines.append(f"- backend: {backend.get('backend')}; devices: "
                 + ", ".join(f"{d['name']} ({d['model']})" for d in backend.get("devices", [])))
    lines += ["", "Figures are mean ± 95% CI half-width over repeats (Student t; none with one repeat). "
              "Latency is measured from each request's intended send time; percentiles come from exact samples. "
              "Throughput vs control is the per-repeat ratio to the control arm at the same stage.", ""]
    lines += ["## Trials", "", *_trials_table(summary), ""]
    first_arm: dict[str, Any] = next(iter(summary["arms"].values()), {"stages": []})
    for stage in first_arm["stages"]:
        arrival = None
        for t in summary["trials"]:
            if stage["index"] < len(t["stages"]):
                arrival = t["stages"][stage["index"]]["arrival"]
                break
        lines += [f"## Stage {stage['index']}: offered {_offered(stage['offered'], arrival)}", ""]
        lines += [*_stage_table(summary, stage["index"]), ""]
    return "\n".join(lines)
