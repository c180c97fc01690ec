"""Two campaigns side by side: per arm, stage and class, throughput and P95 in A and in B.

Only called once bench_plugin.analysis.comparability found no fixed-condition difference; the context
differences (host, devices, driver, arms) head the page, since they are what is being compared.
"""

from __future__ import annotations

from bench_plugin.analysis.comparability import Campaign, Difference
from bench_plugin.results.summary import Spread


def _mean(fig: Spread | None) -> float | None:
    return None if fig is None else fig.mean


def _cell(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _ratio(a: float | None, b: float | None) -> str:
    return "-" if a in (None, 0) or b is None else f"{b / a:.2f}x"


def _rows(a: Campaign, b: Campaign, arm: str) -> list[str]:
    rows = []
    stages_a = a.summary.arms[arm].stages
    stages_b = b.summary.arms[arm].stages
    for stage_a, stage_b in zip(stages_a, stages_b, strict=False):
        for name, fig_a in stage_a.classes.items():
            fig_b = stage_b.classes.get(name)
            if fig_b is None:
                continue
            thr_a, thr_b = _mean(fig_a.throughput_rps), _mean(fig_b.throughput_rps)
            p95_a, p95_b = _mean(fig_a.latency_p95_ms), _mean(fig_b.latency_p95_ms)
            rows.append(f"| {arm} | {stage_a.index} | {name} | {_cell(thr_a, 2)} | {_cell(thr_b, 2)} "
                        f"| {_ratio(thr_a, thr_b)} | {_cell(p95_a)} | {_cell(p95_b)} | {_ratio(p95_a, p95_b)} |")
    return rows


def render_side_by_side(a: Campaign, b: Campaign, context: list[Difference]) -> str:
    """Markdown comparing campaign ``b`` with campaign ``a`` (ratios are B / A)."""
    lines = [f"# {a.name} (A) vs {b.name} (B)", ""]
    if context:
        lines += ["What differs between the two campaigns:", ""]
        lines += [f"- {d.condition}: A {d.a!r}, B {d.b!r}" for d in context]
    else:
        lines.append("The two campaigns ran under the same recorded conditions.")
    lines += [
        "",
        "Figures are means over each campaign's repeats; ratios are B / A.",
        "",
        "| arm | stage | class | thr. A req/s | thr. B req/s | B/A | P95 A ms | P95 B ms | B/A |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    shared = [arm for arm in a.summary.arms if arm in b.summary.arms]
    for arm in shared:
        lines += _rows(a, b, arm)
    only = sorted(set(a.summary.arms) ^ set(b.summary.arms))
    if only:
        lines += ["", f"Arms in only one campaign (not compared): {', '.join(only)}"]
    return "\n".join(lines) + "\n"
