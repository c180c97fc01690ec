"""Which arms' stages one per-stage table shows: those that ran the same load.

In a fixed sweep every arm runs the scenario's stages, so stage i is one load for every arm and a
table per stage index puts like beside like. In an adaptive search each arm climbs its own scales,
so position i of one arm is another load than position i of the next, and one arm's repeats reach a
scale at different stages: there a table per distinct offered load, from the lowest up, holds only
the arms that ran exactly that load, and its heading names the load, not a stage. An exclusive
control searches each class alone; a table of a shared load then shows, for each of its classes,
the control's run of that class alone at the same rate (what the throughput ratio is taken
against). The tables of the arms side by side come first, from the lowest load up; then those of
the control's runs that no other arm's load matches, class by class.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from bench_plugin.analysis.summary import is_searched, load_key
from bench_plugin.results.summary import ArmClassFigures, Summary
from bench_plugin.scenario import class_rank

Load = tuple[tuple[str, float], ...]


@dataclass(frozen=True)
class Member:
    """One arm's figures in a table: its position in the arm's stages, and which of its classes are shown."""

    arm: str
    index: int
    classes: tuple[str, ...] | None = None
    """None: every class of that stage; else only these (the control's class run alone)."""

    def shows(self, name: str) -> bool:
        """Whether class ``name``'s row is in the table."""
        return self.classes is None or name in self.classes


@dataclass(frozen=True)
class StageGroup:
    """One per-stage table: the load, and the arms' figures that ran it."""

    offered: dict[str, float]
    members: list[Member]
    index: int | None
    """The stage index of the load in a fixed sweep; None in a search, where it is no one stage."""
    arrival: dict[str, str] | None
    """The arrival process per class of the load's stages (from the first trial that ran it)."""
    alone: str | None = None
    """The control arm whose rows are its classes run alone at the load's rates, where there is one."""

    def heading(self, offered: str) -> str:
        """The table's heading, given the load as text."""
        if self.index is not None:
            return f"Stage {self.index}: offered {offered}"
        alone = f" ({self.alone}'s rows: each class run alone at its rate)" if self.alone else ""
        return f"Offered {offered}{alone}"


def group_rows(summary: Summary, group: StageGroup) -> Iterator[tuple[str, int, str, ArmClassFigures]]:
    """The rows of ``group``'s table in order: arm, its stage position, class, and that class's figures."""
    for member in group.members:
        for name, fig in summary.arms[member.arm].stages[member.index].classes.items():
            if member.shows(name):
                yield member.arm, member.index, name, fig


def stage_groups(summary: Summary) -> list[StageGroup]:
    """The per-stage tables of ``summary``: by stage index in a fixed sweep, by offered load when searched."""
    if not is_searched(summary.trials):
        return _by_index(summary)
    loads: dict[Load, list[Member]] = {}
    for arm, figures in summary.arms.items():
        for stage in figures.stages:
            if stage.classes:  # else no run of it was measured (each was cut short: report.cut_short shows them)
                loads.setdefault(load_key(stage.offered), []).append(Member(arm, stage.index))
    control = summary.control
    solo = {key: members for key, members in loads.items() if len(key) == 1}
    used: set[Load] = set()
    groups = []
    for key in sorted(loads, key=lambda key: (sum(v for _, v in key), key)):
        members = loads[key]
        alone = None
        if len(key) > 1 and control is not None and all(m.arm != control for m in members):
            matched = [(name, m) for name, rate in _ordered(summary, dict(key)).items()
                       for m in solo.get(((name, rate),), []) if m.arm == control]
            if matched:
                alone = control
                used |= {((name, rate),) for name, rate in key}
                members = [Member(control, m.index, (name,)) for name, m in matched] + members
        groups.append((key, members, alone))
    out = []
    for key, members, alone in groups:
        if key in used and all(m.arm == control for m in members):
            continue  # shown beside the shared load it matches
        offered = dict(key)
        # the arrival of the load's own stages: the last member ran it whole (a control's class alone did not)
        out.append(StageGroup(offered=_ordered(summary, offered), members=_in_arm_order(summary, members),
                              index=None, arrival=_arrival(summary, members[-1].arm, offered), alone=alone))
    # the arms side by side first, from the lowest load up; then the control's own runs that no other arm
    # ran, class by class
    return sorted(out, key=lambda g: (0, sum(g.offered.values()), 0) if any(m.arm != control for m in g.members)
                  else (1, min(map(class_rank, g.offered)), sum(g.offered.values())))


def _by_index(summary: Summary) -> list[StageGroup]:
    first = next(iter(summary.arms.values()), None)
    groups = []
    for stage in first.stages if first is not None else []:
        members = [Member(arm, stage.index) for arm, figures in summary.arms.items()
                   if stage.index < len(figures.stages) and figures.stages[stage.index].classes]
        if not members:
            continue  # no run of this stage was measured (each was cut short: report.cut_short shows them)
        arrival = next((dict(t.stages[stage.index].arrival) for t in summary.trials if stage.index < len(t.stages)),
                       None)
        offered = summary.arms[members[0].arm].stages[stage.index].offered
        groups.append(StageGroup(offered=dict(offered), members=members, index=stage.index, arrival=arrival))
    return groups


def _in_arm_order(summary: Summary, members: list[Member]) -> list[Member]:
    order = {arm: i for i, arm in enumerate(summary.arms)}
    return sorted(members, key=lambda m: order.get(m.arm, len(order)))  # stable: a control's classes keep theirs


def _ordered(summary: Summary, offered: dict[str, float]) -> dict[str, float]:
    """``offered`` in the order the arms' own figures list their classes."""
    for figures in summary.arms.values():
        for stage in figures.stages:
            if dict(stage.offered) == offered:
                return dict(stage.offered)
    return offered


def _arrival(summary: Summary, arm: str, offered: dict[str, float]) -> dict[str, str] | None:
    for trial in summary.trials:
        if trial.arm == arm:
            for stage in trial.stages:
                if dict(stage.offered) == offered:
                    return dict(stage.arrival)
    return None
