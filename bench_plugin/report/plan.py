"""The capacity plan in words: the terminal text of `bench-plugin plan`, and its section in report.html and report.md,
both trees of the document's blocks (report/page.py).

Each traffic gets one line per arm: its GPUs, how the classes are packed on them, the growth it absorbs
and what breaks first, its cost and what it saves against the control, and whether it rests on the
envelope model outside where the model was validated.
"""

from __future__ import annotations

from bench_plugin.report import page_text
from bench_plugin.report.page import Block, Bullets, Heading, Item, Paragraph, Section, bullets, table
from bench_plugin.results.limits import limits_text
from bench_plugin.results.plan import ArmPlan, GroupPlan, PlanDocument, TrafficPlan

AND = " and "
"""Between the criteria that break first together."""


def traffic_text(traffic: dict[str, float]) -> str:
    """``llm 20 req/s, embedding 200 req/s``."""
    return ", ".join(f"{name} {rate:g} req/s" for name, rate in traffic.items() if rate > 0)


def gpus_text(count: int) -> str:
    """``1 GPU``, ``4 GPUs``."""
    return f"{count} GPU{'s' if count != 1 else ''}"


def group_text(group: GroupPlan) -> str:
    """``embedding + asr shared on 3 GPUs (...; each GPU at 80% of where embedding p95 reaches its SLO)``."""
    how = "alone" if len(group.classes) == 1 else "shared"
    gpus = gpus_text(group.gpus)
    load = ", ".join(f"{c} {group.load[c]:.3g}" for c in group.classes)
    if group.floor is not None:
        return (f"{' + '.join(group.classes)} {how} on {gpus} ({load} req/s; each GPU at {group.used:.0%} of "
                f"{group.floor:.3g} req/s, the most its search tried, which held: its boundary is higher)")
    return (f"{' + '.join(group.classes)} {how} on {gpus} ({load} req/s; each GPU at {group.used:.0%} of "
            f"where {group.limited_by} reaches its SLO)")


def growth_text(plan: ArmPlan) -> str:
    """``absorbs +31% traffic before it needs another GPU; embedding p95 breaks first``."""
    if plan.growth is None:
        return ""
    verb = "break" if len(plan.first_limit) > 1 else "breaks"
    first = f"; {limits_text(plan.first_limit, AND)} {verb} first" if plan.first_limit else ""
    return f"absorbs {plan.growth - 1:+.0%} traffic before it needs another GPU{first}"


def money(value: float) -> str:
    return f"{value:,.2f}"


def saved_text(plan: ArmPlan) -> str | None:
    """``saves 1 GPU (2.50)``, ``saves none``, ``needs 2 more GPUs (5.00 more)``; None without a control's plan."""
    if plan.saved_gpus is None:
        return None
    if plan.saved_gpus == 0:
        return "saves none"
    more = plan.saved_gpus < 0
    cost = "" if plan.saved_cost is None else f" ({money(abs(plan.saved_cost))}{' more' if more else ''})"
    if not more:
        return f"saves {gpus_text(plan.saved_gpus)}{cost}"
    return f"needs {-plan.saved_gpus} more GPU{'s' if plan.saved_gpus != -1 else ''}{cost}"


def best_text(plan: TrafficPlan) -> str:
    """The best arm and why: ``time-slicing, with the fewest GPUs (3)``, or, of equal counts, the growth that
    decided; an arm with fewer GPUs whose plan is an extrapolation is named, and why it was passed over."""
    arms = {a.arm: a for a in plan.arms}
    best = arms.get(plan.best) if plan.best else None
    if best is None or best.gpus is None:
        return "none rests on validated ground"
    tied = [a.arm for a in plan.arms if a is not best and a.gpus == best.gpus and not a.extrapolation]
    if tied:
        growth = "" if best.growth is None else f" ({best.growth - 1:+.0%})"
        why = (f"at {gpus_text(best.gpus)} like {' and '.join(tied)}, but absorbing "
               f"{'more' if len(tied) == 1 else 'the most'} growth{growth}")
    else:
        why = f"with the fewest GPUs ({best.gpus})"
    passed = "".join(f"; {a.arm} needs {gpus_text(a.gpus)}, but its plan is an extrapolation"
                     for a in plan.arms if a.gpus is not None and a.gpus < best.gpus and a.extrapolation)
    return f"{best.arm}, {why}{passed}"


def arm_line(plan: ArmPlan, control: bool) -> str:
    """One arm's plan in one line (the terminal)."""
    name = plan.arm + (" (control)" if control else "")
    if plan.gpus is None:
        return f"{name}: no plan: {plan.note}"
    parts = [gpus_text(plan.gpus)]
    if (saved := saved_text(plan)) and not control:
        parts.append(saved)
    if plan.cost is not None:
        parts.append(f"cost {money(plan.cost)}")
    text = f"{name}: {'; '.join(parts)}: " + "; ".join(group_text(g) for g in plan.groups)
    if growth := growth_text(plan):
        text += f"; {growth}"
    if plan.extrapolation:
        text += f". EXTRAPOLATION: {'; '.join(plan.extrapolation)}"
    return text


def terminal(document: PlanDocument, control: str | None) -> str:
    """What `bench-plugin plan` prints: per traffic a bullet, its arms' plans and the best arm under it, written for
    a terminal (report.page_text)."""
    cost = f", GPU cost {money(document.gpu_cost)}" if document.gpu_cost is not None else ""
    items = tuple(Item((f"Plan for {traffic_text(plan.traffic)} (headroom {document.headroom:.0%}{cost}):",),
                       bullets([*(arm_line(arm, arm.arm == control) for arm in plan.arms),
                                f"best: {best_text(plan)}"]))
                  for plan in document.plans)
    return "".join(f"{text}\n" for text in page_text.block(Bullets(items)))


def _rows(plan: TrafficPlan, control: str | None) -> list[list[str]]:
    rows = []
    for arm in plan.arms:
        rows.append([
            arm.arm + (" (control)" if arm.arm == control else ""),
            "-" if arm.gpus is None else str(arm.gpus),
            "-" if arm.saved_gpus is None or arm.arm == control else f"{arm.saved_gpus:+d}",
            "-" if arm.cost is None else money(arm.cost),
            "; ".join(group_text(g) for g in arm.groups) if arm.groups else (arm.note or "-"),
            "-" if arm.growth is None else f"{arm.growth - 1:+.0%}" + (
                f" ({limits_text(arm.first_limit, AND)})" if arm.first_limit else ""),
            "; ".join(arm.extrapolation) or "no",
        ])
    return rows


HEADERS = ["arm", "GPUs", "saved vs control", "cost", "packing", "growth absorbed (breaks first)", "extrapolation"]


def section(document: PlanDocument, control: str | None) -> Section:
    """The "Capacity plan" section: how it was made, then per traffic its table and the best arm."""
    cost = f", GPU cost {money(document.gpu_cost)}" if document.gpu_cost is not None else ""
    blocks: list[Block] = [Paragraph((document.method,))]
    for plan in document.plans:
        blocks += [Heading(f"{traffic_text(plan.traffic)} (headroom {document.headroom:.0%}{cost})"),
                   table(HEADERS, _rows(plan, control)), Paragraph((f"Best: {best_text(plan)}.",))]
    return Section("plan", "Capacity plan", tuple(blocks))
