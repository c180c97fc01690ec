"""The plots say what the numbers are: no axis offset that magnifies a thousandth; hollow points where few samples."""

from __future__ import annotations

import re
from pathlib import Path

from bench_plugin.report.figures import arm_styles, style
from bench_plugin.report.plots import fairness_figure, latency_plot
from bench_plugin.results.summary import Judged, Summary, load_summary

NAMES = ["0 low", "1 high", "2 peak"]


def nearly_equal_gains() -> tuple[Judged, Judged]:
    return (Judged(kind="ratio", mean=3.000, ci95=None, lo=2.9995, hi=3.0005, values=[3.0, 3.0], no_change=3.0,
                   significant=False, call="no significant difference"),
            Judged(kind="ratio", mean=2.999, ci95=None, lo=2.9985, hi=2.9995, values=[2.999, 2.999], no_change=3.0,
                   significant=False, call="no significant difference"))


def test_a_consolidation_gain_of_3_000_next_to_2_999_reads_as_equal(default_results: Path) -> None:
    comparison = load_summary(default_results / "summary.json").comparison
    shared = comparison.arms["shared"]
    same, less = nearly_equal_gains()
    for st, gain in zip(shared.stages, (same, less, same), strict=True):
        st.consolidation_gain = gain
        st.goodput_per_device_ratio = gain.model_copy(update={"no_change": 1.0})
    with style():
        fig = fairness_figure(comparison, arm_styles(comparison.arms, "exclusive"), NAMES)
        assert fig is not None
        fig.draw_without_rendering()
        for ax in fig.axes:
            low, high = ax.get_ylim()
            assert ax.yaxis.get_offset_text().get_text() == "", ax.get_title()  # no "+2.999" above the axis
            assert low == 0.0 and high - low >= 1.0, (ax.get_title(), low, high)
            labels = [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
            assert labels and all(re.fullmatch(r"-?[\d.]+", label) for label in labels), labels
        gain = next(ax for ax in fig.axes if ax.get_title() == "consolidation gain")
        assert gain.get_ylim()[1] > 3.0  # the reference line (3 classes as fast as alone) is inside


def all_bounded(summary: Summary) -> Summary:
    for trial in summary.trials:
        for stage in trial.stages:
            for stats in stage.classes.values():
                for intervals in (stats.latency_ci_ms, stats.ttft_ci_ms or {}, stats.tpot_ci_ms or {}):
                    for key, ci in intervals.items():
                        intervals[key] = ci.model_copy(update={"bounded": True, "hi": (ci.estimate or 0) + 1})
                stats.p95_note = None
    return summary


def test_a_p95_from_too_few_samples_is_drawn_hollow_and_the_legend_says_so(default_results: Path) -> None:
    summary = load_summary(default_results / "summary.json")
    styles = arm_styles(summary.arms, summary.control)
    weak = latency_plot(summary, "asr", styles, summary.comparison)
    assert "hollow: too few samples to bound it (per run: P50 &lt; 6, P95 &lt; 72)" in weak.svg
    assert 'fill: #ffffff' in weak.svg  # the hollow markers' face
    assert "hollow marker" in weak.caption
    strong = latency_plot(all_bounded(summary), "asr", styles, summary.comparison)
    assert "hollow" not in strong.svg and "hollow" not in strong.caption


def test_a_searched_arm_is_a_line_per_load_mix_each_from_its_lowest_load() -> None:
    """Joined in order of load alone, a searched arm's points zigzag between its rays' mixes."""
    from bench_plugin.report.plots import _lines, _mix
    from bench_plugin.results.summary import ArmStageFigures

    def at(offered: dict[str, float]) -> ArmStageFigures:
        return ArmStageFigures(index=0, offered=offered, realised={}, classes={})

    mix, richer = _mix(at({"llm": 2, "embedding": 10})), _mix(at({"llm": 2, "embedding": 40}))
    assert mix == _mix(at({"llm": 4, "embedding": 20, "asr": 0})) != richer  # a direction, whatever its scale
    xs = [2.0, 4.0, 3.0, 6.0, 5.0]
    assert _lines(xs, [mix, richer, mix, richer, mix]) == [[0, 2, 4], [1, 3]]
    assert _lines(xs, None) == [[0, 1, 2, 3, 4]]  # a sweep: one line, in stage order, as before


def test_a_searched_campaign_plots_latency_without_ticks_at_each_load(tmp_path: Path) -> None:
    from harness import search_campaign_store

    from bench_plugin.report.outputs import summarise

    summary = summarise(search_campaign_store(tmp_path))
    styles = arm_styles(summary.arms, summary.control)
    plot = latency_plot(summary, "embedding", styles, summary.comparison)
    loads = {f"{float(stage.offered['embedding']):g}" for figures in summary.arms.values() for stage in figures.stages
             if "embedding" in stage.offered}
    ticks = set(re.findall(r"<text[^>]*>\s*([\d.]+)\s*</text>", plot.svg))
    assert len(loads) > 3 and not loads <= ticks  # matplotlib's own ticks, not one at every searched load
