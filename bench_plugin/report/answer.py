"""The answer first: what report.md and report.html open with, in plain words, one table and one picture.

One sentence says whether sharing pays off here; then one per arm says its verdict with the figure
it rests on (requests within SLO per device, against the control's at the same load, with the 95%
CI of their ratio: analysis/answer.py), how far it holds and what limits it, and the next step. The
table gives the same in short cells; the picture draws each arm's figure per device with its CI
beside the control's. Everything comes from the typed summary's ``comparison.arms.<arm>.answer``.
"""

from __future__ import annotations

from bench_plugin.analysis.answer import SEARCHED
from bench_plugin.analysis.boundary import every_stage_disrupted, format_offered
from bench_plugin.report.comparison import boundary_short, call_kind, error_bars, interval, spread_text
from bench_plugin.report.figures import ArmStyle, DataMarks, Plot, figure_svg, new_figure, style
from bench_plugin.report.latency_split import growth_text, stage_names
from bench_plugin.report.page import Block, Bullets, Em, Figure, Item, Paragraph, Section, Strong, table
from bench_plugin.results.limits import limits_text
from bench_plugin.results.summary import Answer, ArmComparison, Judged, Summary
from bench_plugin.results.words import BoundaryStatus, Call, SearchStatus, Significance

COLUMNS = ("arm", "answer", "req/s within SLO per device", "vs control", "holds up to", "limited by", "next step")
"""The answer table's columns."""


def answered(summary: Summary) -> list[tuple[str, ArmComparison, Answer]]:
    """The arms that have an answer (every arm of a summary written since answers were), in summary order."""
    return [(name, comp, comp.answer) for name, comp in summary.comparison.arms.items() if comp.answer is not None]


def _ratio(ratio: Judged | None) -> str:
    """``2.00x (95% CI 1.28x to 3.11x)``; the mean alone with one repeat."""
    if ratio is None or ratio.mean is None:
        return "-"
    ends = interval(ratio)
    return f"{ratio.mean:.2f}x" + (f" (95% CI {ends[0]:.2f}x to {ends[1]:.2f}x)" if ends else "")


def _extent(comp: ArmComparison) -> str:
    """How far the arm keeps every SLO, in words."""
    b = comp.boundary
    load = format_offered(b.offered) if b.offered else ""
    limiting = limits_text(b.limiting)
    limit = f", where {limiting} {'give' if len(b.limiting) > 1 else 'gives'} out first" if b.limiting else ""
    if b.status in (BoundaryStatus.NOT_REACHED, SearchStatus.ABOVE_MAXIMUM):
        return f"every SLO held at every load measured{f', up to {load}' if load else ''}"
    if b.status == SearchStatus.GENERATOR_LIMITED:
        return f"every SLO held{f' at about {load}' if load else ''}, where the load generator fell behind first"
    if b.status in (BoundaryStatus.BELOW_LOWEST, SearchStatus.BELOW_MINIMUM):
        return f"an SLO broke already at the lowest load measured{f' ({limiting})' if b.limiting else ''}"
    if load:
        return f"every SLO holds up to about {load}{limit}"
    if every_stage_disrupted(b):
        return "its load boundary is not measured: every stage was disrupted"
    return f"its boundary is {b.status}"


def sentence(name: str, comp: ArmComparison, answer: Answer, control: str | None) -> str:
    """One arm's answer in plain words."""
    if answer.call == Call.CONTROL:
        per = answer.per_device
        serves = (f" It serves {per.mean:.3g} req/s within SLO per device there." if per is not None
                  and per.mean is not None else "")
        return f"{name} is the control: {_extent(comp)}.{serves}"
    per, ref, ratio = answer.per_device, answer.control_per_device, answer.ratio
    where = "at its boundary" if answer.at == SEARCHED else f"at {answer.at}"
    figures = ""
    if per is not None and per.mean is not None:
        figures = f"{per.mean:.3g} req/s within SLO per device {where}"
        if ref is not None and ref.mean is not None:
            figures += f" against {ref.mean:.3g} for {control}"
        if ratio is not None and ratio.mean is not None:
            figures += f": {_ratio(ratio)}"
    call = call_kind(answer.call)
    if call == Call.WORTH_IT:
        text = f"{name} is worth it: it serves {figures or 'more within SLO per device'}; {_extent(comp)}."
    elif call == Call.TRADE_OFF:
        text = (f"{name} is a trade-off: it serves {figures or 'more per device'}, but "
                f"{limits_text(answer.limiting) or 'some class breaks its SLO'}.")
    elif call == Call.LOSS:
        how = ("less than" if ratio is not None and ratio.call == Significance.LOWER else
               "no significantly more than" if ratio is not None and ratio.call != Significance.HIGHER
               else "no better than")
        text = f"{name} is a loss: it serves {how} {control} per device" + (f" ({figures})" if figures else "") + "."
    else:
        text = f"{name}: {answer.call}" + (f" ({figures})" if figures else "") + "."
    return text


def headline(summary: Summary) -> str:
    """Whether sharing pays off in this campaign, in one sentence."""
    control = summary.comparison.control
    arms = [(name, a) for name, _, a in answered(summary) if a.call != Call.CONTROL]
    if not arms or control is None:
        return "No control arm to compare with: the figures below still show the arms side by side."
    worth = [(name, a) for name, a in arms if call_kind(a.call) == Call.WORTH_IT]
    if worth:
        name, best = max(worth, key=lambda item: item[1].ratio.mean if item[1].ratio and item[1].ratio.mean else 0)
        gain = f" ({best.ratio.mean:.2f}x {control}'s requests within SLO per device)" if best.ratio and \
            best.ratio.mean else ""
        others = [n for n, _ in worth if n != name]
        also = f"; also worth it: {', '.join(others)}" if others else ""
        return f"Sharing pays off here: {name} is the best{gain}{also}."
    trades = [name for name, a in arms if call_kind(a.call) == Call.TRADE_OFF]
    if trades:
        return (f"Sharing serves more per device here but breaks an SLO: {', '.join(trades)} "
                f"{'is a trade-off' if len(trades) == 1 else 'are trade-offs'}; none is worth it outright.")
    if all(call_kind(a.call) == Call.LOSS for _, a in arms):
        return f"Sharing does not pay off here: no arm serves more within SLO per device than {control}."
    return "Not decided yet: see each arm's next step."


def rows(summary: Summary) -> list[list[str]]:
    """The answer table's rows (COLUMNS), one per arm."""
    out = []
    for name, comp, answer in answered(summary):
        ratio = "-" if answer.call == Call.CONTROL else spread_text(answer.ratio, 2, "x")
        if answer.ratio is not None and answer.ratio.call and answer.call != Call.CONTROL:
            ratio += f" ({answer.ratio.call})"
        per = spread_text(answer.per_device, 1)
        if answer.at and per != "-":
            per += " at its boundary" if answer.at == SEARCHED else f" at {answer.at}"
        out.append([name, answer.call, per, ratio, boundary_short(comp.boundary, limited=False),
                    limits_text(answer.limiting) or "-", answer.next_step])
    return out


def section(summary: Summary, picture: Plot | None = None) -> Section | None:
    """The section (None for a summary without answers): the headline, a sentence per arm with its next step, the
    ``picture`` where drawn, and the table."""
    found = answered(summary)
    if not found:
        return None
    control = summary.comparison.control
    names = stage_names(summary)
    items = []
    for name, comp, answer in found:
        goes = f" {growth_text(answer.growth, names.get(answer.growth.stage))}" if answer.growth else ""
        items.append(Item((f"{sentence(name, comp, answer, control)}{goes} ", Em(f"Next: {answer.next_step}."))))
    blocks: list[Block] = [Paragraph((Strong(headline(summary)),), "headline"), Bullets(tuple(items))]
    if picture is not None:
        blocks.append(Figure.of(picture, titled=False))
    blocks.append(table(COLUMNS, rows(summary), "answer"))
    return Section("answer", "The answer", tuple(blocks))


def answer_plot(summary: Summary, styles: dict[str, ArmStyle]) -> Plot | None:
    """Each arm's requests within SLO per device with its 95% CI (filled), beside the control's at the same load
    (hollow, black); None when no arm has the figure."""
    found = [(name, a) for name, _, a in answered(summary) if a.per_device is not None and a.per_device.mean]
    if not found:
        return None
    marks = DataMarks("answer")
    with style():
        height = max(2.6, 0.55 * len(found) + 1.3)  # inches: a row per arm, room for the axis below
        fig = new_figure(height)
        ax = fig.add_axes((0.2, 0.8 / height, 0.62, 1 - 1.15 / height))
        high = 0.0
        for row, (name, a) in enumerate(reversed(found)):
            assert a.per_device is not None and a.per_device.mean is not None
            lo, hi = error_bars(a.per_device)
            st = styles.get(name)
            marks.tag(ax.errorbar([a.per_device.mean], [row], xerr=[[lo], [hi]], fmt=st.marker if st else "o",
                                  markersize=7, capsize=4, color=st.colour if st else "#222222", label=name))
            high = max(high, a.per_device.mean + hi)
            ref = a.control_per_device
            if ref is not None and ref.mean is not None:
                rlo, rhi = error_bars(ref)
                marks.tag(ax.errorbar([ref.mean], [row - 0.22], xerr=[[rlo], [rhi]], fmt="o", markersize=6,
                                      capsize=3, color="#222222", markerfacecolor="white",
                                      label=f"{summary.comparison.control} at the same load"))
                high = max(high, ref.mean + rhi)
            at = f" at {a.at}" if a.at and a.at != SEARCHED else ""
            note = a.call if a.call == Call.CONTROL else f"{a.call}{at}, {spread_text(a.ratio, 2, 'x')}"
            ax.annotate(note, xy=(1.0, row), xycoords=("axes fraction", "data"), xytext=(6, 0),
                        textcoords="offset points", va="center", fontsize=8.5)
        ax.set_yticks(range(len(found)), [name for name, _ in reversed(found)])
        ax.set_ylim(-0.6, len(found) - 0.4)
        ax.set_xlim(0.0, high * 1.1 if high > 0 else 1.0)
        ax.ticklabel_format(axis="x", style="plain", useOffset=False)
        ax.set_xlabel("requests per second within every SLO, per device (95% CI)")
        svg = figure_svg(fig, "answer")
    caption = ("Filled: each arm's requests per second within every SLO, per device, at the load its answer rests "
               "on (its searched boundary, or the stage its verdict rests on), mean over repeats with its 95% CI. "
               "Hollow: the control's at the same load. Right: the call and the ratio of the two, paired by repeat "
               "(geometric mean and its 95% CI). Further right is more served on the same hardware.")
    return Plot("answer-picture", "Requests within SLO per device, per arm", svg, caption)
