"""The "Verdict" section: per arm its call against the control and its operating boundary, then per arm why.

One table of the arms (call as a badge, the stage it holds up to, the boundary in short); then per arm a part of
its own: the analysis's own sentences (why this verdict), the boundary where the verdict does not quote it, and
per stage goodput per device against the control, fairness, consolidation gain, each class's P95 slowdown (with
what it rests on, report.basis), the stage's call and its reasons. Without a control there is nothing to compare,
and the section says so.
"""

from __future__ import annotations

from bench_plugin.report.basis import Bases, Basis, any_low, low_rule
from bench_plugin.report.comparison import (
    NO_COMPARISON,
    RATIO_UNIT,
    boundary_short,
    boundary_text,
    call_kind,
    compared,
    offered_text,
    significance_text,
    spread_text,
)
from bench_plugin.report.page import (
    Badge,
    Block,
    Bullets,
    Inline,
    Item,
    Lines,
    Paragraph,
    Part,
    Pct,
    Section,
    Strong,
    table,
)
from bench_plugin.results.reasons import Reason
from bench_plugin.results.summary import ArmComparison, Comparison, Summary
from bench_plugin.results.words import Call

CALL_CSS: dict[str, str] = {Call.WORTH_IT: "good", Call.TRADE_OFF: "mixed", Call.LOSS: "bad",
                            Call.INCONCLUSIVE: "unsure"}
"""Badge class per call (an inconclusive call, whatever its count of repeats, is ``unsure``; others ``none``)."""

NOT_COMPARED = f"{NO_COMPARISON} The figures below still compare the arms side by side."


def badge(call: str | None) -> Badge:
    """A call as its badge (no verdict where there is none)."""
    return Badge(call or Call.NO_VERDICT, CALL_CSS.get(call_kind(call) or "", "none"))


def stage_labels(summary: Summary) -> list[str]:
    """``"0 low"``, ``"1 high"``...: each stage's index and name, from the first trial that ran it."""
    names: dict[int, str] = {}
    for trial in summary.trials:
        for stage in trial.stages:
            names.setdefault(stage.index, f"{stage.index} {stage.name or ''}".strip())
    return [names[i] for i in sorted(names)]


def _call(comp: ArmComparison) -> str | None:
    return comp.verdict.call if comp.verdict else None


def upto(comp: ArmComparison, names: list[str]) -> str | None:
    """The stage an arm is worth it up to, by its name (None where there is none)."""
    index = comp.verdict.worth_it_up_to_stage if comp.verdict else None
    if index is None:
        return None
    return names[index] if index < len(names) else str(index)


def reasons(found: list[Reason]) -> Bullets | str:
    """A stage's reasons as bullets (a list reason's items nested under it); ``-`` without any."""
    if not found:
        return "-"
    return Bullets(tuple(Item((why.text,), Bullets(tuple(Item((i,)) for i in why.items)) if why.items else None)
                         for why in found), "reasons")


def _slowdown_basis(mine: Basis | None, theirs: Basis | None) -> Basis | None:
    """What a P95 ratio to the control rests on: the arm's runs, then the control's (low if either is)."""
    if mine is None or theirs is None:
        return mine
    return Basis(mine.label, mine.q, mine.runs, mine.notes + theirs.notes, against=theirs.runs)


def _stages(arm: str, comp: ArmComparison, names: list[str], bases: Bases, control: str | None) -> list[Block]:
    rows = []
    shown: list[Basis | None] = []
    for st in comp.stages:
        lines = []
        for cls, figs in st.classes.items():
            if figs.slowdown_p95 is None:
                continue
            basis = _slowdown_basis(bases.get(arm, st.index, cls, "latency_p95_ms"),
                                    bases.get(control, st.index, cls, "latency_p95_ms") if control else None)
            shown.append(basis)
            lines.append((Pct(f"{cls} {significance_text(figs.slowdown_p95, 2, RATIO_UNIT)}", basis),))
        rows.append([names[st.index] if st.index < len(names) else str(st.index), offered_text(st.offered),
                     significance_text(st.goodput_per_device_ratio, 2, RATIO_UNIT), spread_text(st.fairness, 2),
                     spread_text(st.consolidation_gain, 2), Lines(tuple(lines), "slowdown") if lines else "-",
                     badge(st.verdict), reasons(st.reasons)])
    blocks: list[Block] = [table(("stage", "offered", "goodput/device vs control", "fairness", "consolidation gain",
                                  "P95 slowdown vs control", "verdict", "reasons"), rows)]
    if any_low(shown):
        blocks.append(Paragraph((f"{low_rule()}. A slowdown's count is its arm's, then the control's.",), "low-rule"))
    return blocks


def _arm(arm: str, comp: ArmComparison, names: list[str], bases: Bases, control: str | None) -> Part:
    """The analysis's own sentences for one arm (why this verdict, where the boundary is) and its stages."""
    role = "control: the reference every other arm is compared with" if comp.is_control else (_call(comp) or "")
    blocks: list[Block] = []
    text = comp.verdict.text if comp.verdict and comp.verdict.text and not comp.is_control else ""
    if text:
        blocks.append(Paragraph((text,)))
    boundary = boundary_text(comp.boundary)
    if boundary.lower().rstrip(".") not in text.lower():  # the analysis's verdict often quotes it already
        blocks.append(Paragraph((Strong("Operating boundary."), f" {boundary}")))
    if comp.stages and not comp.is_control:
        blocks += _stages(arm, comp, names, bases, control)
    return Part(f"{arm} ({role})", tuple(blocks), "arm")


def section(summary: Summary, comparison: Comparison) -> Section:
    """The section: the arms' table, then a part per arm (a note where there is no control to compare with)."""
    if not compared(comparison):
        return Section("verdict", "Verdict", (Paragraph((NOT_COMPARED,), "note"),))
    names = stage_labels(summary)
    bases = Bases(summary)
    rows: list[list[Inline]] = [
        [arm, comp.sharing or "-", Badge("control", "none") if comp.is_control else badge(_call(comp)),
         upto(comp, names) or "-", boundary_short(comp.boundary)] for arm, comp in comparison.arms.items()]
    blocks: list[Block] = [table(("arm", "sharing", "verdict", "worth it up to stage", "operating boundary"), rows,
                                 "verdict")]
    blocks += [_arm(arm, comp, names, bases, comparison.control) for arm, comp in comparison.arms.items()]
    return Section("verdict", "Verdict", tuple(blocks))
