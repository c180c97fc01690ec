"""Where a campaign's device time went: per arm, per segment's phases and per ray, from its own store.

    python benchmarks/campaign_time.py RESULTS_DIR_OR_TARBALL [--json]

Each trial's segments are cut into phases, from the store's own records (times as the campaign recorded
them, so a campaign cut into slices and resumed counts only what its slices ran):

- ``start``: from the segment's beginning (the trial's start, or the previous segment's release) to its
  last class ready: the arm applied, the servers started, loaded and answering;
- ``warm-up``: its unmeasured warm-up, first request to last;
- ``probes``: the stages of the search's probes, their extensions and the stages set aside included (a
  sweep's stages count here too);
- ``holds``: the stages that held a boundary found (``search.sustain_s``);
- ``release``: from the last stage's end to the segment's release (the last drain, the servers stopped);
- ``other``: the rest (drains between stages, the gaps in which each probe is decided and the next
  announced);
- ``redone``: stages an earlier attempt ran that a resume superseded (run again after a cut).

Printed per arm (minutes, summed over its repeats, and their mean per repeat; ``--json`` gives each repeat's
own, ``per_repeat_s``, in run order), then per arm and ray (stage-runs, minutes
of probes and holds, the bracket each repeat ended with and its precision). ``--json`` prints the same as
one JSON object.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path

from bench_plugin.results.archive import ArchiveError, results_dir
from bench_plugin.results.store import CampaignReader, StoreError, TrialRecord, open_campaign
from bench_plugin.results.words import Phase

PHASES = ("start", "warm-up", "probes", "holds", "release", "other", "redone")
UNDECIDED = "(no probe decided)"
"""The ray of a stage no probe decided: a sweep's, or one cut short before its probe was."""


@dataclass
class RayTime:
    """One ray of one arm over its repeats."""

    runs: int = 0
    """Stage-runs of its probes (extensions and stages set aside included) and holds."""
    probes_s: float = 0.0
    holds_s: float = 0.0
    ended: list[str] = field(default_factory=list)
    """Per repeat: its status, bracket and precision (``found [4, 4.5] 11%``)."""


@dataclass
class ArmTime:
    """One arm's device time by phase (seconds, over its repeats), and by ray."""

    repeats: int = 0
    phases: dict[str, float] = field(default_factory=lambda: dict.fromkeys(PHASES, 0.0))
    per_repeat_s: list[float] = field(default_factory=list)
    """Each repeat's own total, in run order."""
    rays: dict[str, RayTime] = field(default_factory=lambda: defaultdict(RayTime))

    @property
    def total_s(self) -> float:
        return sum(self.phases.values())


def _stage_s(started: float | None, ended: float | None) -> float:
    return max(0.0, ended - started) if started is not None and ended is not None else 0.0


def trial_time(reader: CampaignReader, trial: TrialRecord, arm: ArmTime) -> None:
    """Add ``trial``'s phases and rays to ``arm``."""
    arm.repeats += 1
    before = arm.total_s
    classes = {segment.index: segment.classes for segment in trial.segments}

    def label(ray: str, segment: int) -> str:  # an arm of several segments (the solo control) names the segment's
        return ray if len(classes) < 2 else f"{ray} ({'+'.join(classes.get(segment, []))})"

    owner: dict[tuple[int, int], tuple[str, str]] = {}  # (segment, stage) -> (ray, phase)
    for step in reader.search_steps(trial.id):
        stages = [*step.decision.stages, *step.decision.set_aside] if step.decision else [step.stage]
        for index in stages:
            owner[(step.segment, index)] = (label(step.ray, step.segment), step.phase)
        arm.rays[label(step.ray, step.segment)].runs += len(stages)
    begin = trial.started_s
    for segment in sorted(trial.segments, key=lambda s: s.index):
        stages = sorted((s for s in trial.stages if s.segment == segment.index and s.started_s is not None),
                        key=lambda s: s.started_s or 0.0)
        ended = [s.ended_s for s in stages if s.ended_s is not None]
        end = segment.released_s or (max(ended) if ended else None)
        if begin is None or end is None:
            begin = end
            continue
        ready = max(segment.ready.values(), default=segment.applied_s or begin)
        start = max(0.0, ready - begin)
        warm = (max(w.ended_s for w in segment.warmup.values()) - min(w.started_s for w in segment.warmup.values())
                if segment.warmup else 0.0)
        probes = holds = 0.0
        for stage in stages:
            seconds = _stage_s(stage.started_s, stage.ended_s)
            ray, phase = owner.get((segment.index, stage.index), (UNDECIDED, "probe"))
            if phase == Phase.SUSTAIN:
                holds += seconds
                arm.rays[ray].holds_s += seconds
            else:
                probes += seconds
                arm.rays[ray].probes_s += seconds
        release = max(0.0, segment.released_s - max(ended)) if segment.released_s and ended else 0.0
        span = end - begin
        arm.phases["start"] += start
        arm.phases["warm-up"] += warm
        arm.phases["probes"] += probes
        arm.phases["holds"] += holds
        arm.phases["release"] += release
        arm.phases["other"] += max(0.0, span - start - warm - probes - holds - release)
        begin = end
    for result in reader.search_results(trial.id):
        bracket = f"[{result.lo:.3g}, {result.hi:.3g}]" if result.lo is not None and result.hi is not None else (
            f"lo {result.lo:.3g}" if result.lo is not None else f"hi {result.hi:.3g}" if result.hi is not None
            else "no bracket")
        precision = f" {result.precision:.0%}" if result.precision is not None else ""
        arm.rays[label(result.ray, result.segment)].ended.append(f"{result.status} {bracket}{precision}")
    arm.phases["redone"] += sum(_stage_s(started, ended) for started, ended in reader.superseded_stages(trial.id))
    arm.per_repeat_s.append(arm.total_s - before)


def campaign_time(results: Path) -> dict[str, ArmTime]:
    """Arm -> its device time, from the store in ``results``."""
    arms: dict[str, ArmTime] = {}
    with open_campaign(results / "results.sqlite") as reader:
        for trial in sorted(reader.trials(), key=lambda t: t.position):
            if trial.started_s is None:
                continue
            trial_time(reader, trial, arms.setdefault(trial.arm, ArmTime()))
    return arms


def render(arms: dict[str, ArmTime]) -> str:
    """The two tables, in minutes."""
    lines = ["| arm | repeats | minutes | per repeat | " + " | ".join(PHASES) + " |",
             "|---|---:|---:|---:|" + "---:|" * len(PHASES)]
    for name, arm in arms.items():
        per_repeat = arm.total_s / 60 / max(arm.repeats, 1)
        lines.append(f"| {name} | {arm.repeats} | {arm.total_s / 60:.1f} | {per_repeat:.1f} | "
                     + " | ".join(f"{arm.phases[p] / 60:.1f}" for p in PHASES) + " |")
    total = sum(a.total_s for a in arms.values())
    lines += [f"| all | | {total / 60:.1f} | | " + " | ".join(
        f"{sum(a.phases[p] for a in arms.values()) / 60:.1f}" for p in PHASES) + " |", ""]
    lines += ["| arm | ray | stage-runs | probes, min | holds, min | per repeat |", "|---|---|---:|---:|---:|---|"]
    for name, arm in arms.items():
        for ray, t in arm.rays.items():
            lines.append(f"| {name} | {ray} | {t.runs} | {t.probes_s / 60:.2f} | {t.holds_s / 60:.2f} | "
                         f"{'; '.join(t.ended) or 'not ended'} |")
    return "\n".join(lines)


def as_json(arms: dict[str, ArmTime]) -> str:
    return json.dumps({name: {"repeats": arm.repeats, "total_s": round(arm.total_s, 1),
                              "per_repeat_s": [round(v, 1) for v in arm.per_repeat_s],
                              "phases_s": {p: round(v, 1) for p, v in arm.phases.items()},
                              "rays": {ray: {**asdict(t), "probes_s": round(t.probes_s, 1),
                                             "holds_s": round(t.holds_s, 1)} for ray, t in arm.rays.items()}}
                       for name, arm in arms.items()}, indent=2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", help="a results directory, or a tarball holding one")
    parser.add_argument("--json", action="store_true", help="print JSON instead of the tables")
    args = parser.parse_args(argv)
    given = Path(args.results)
    try:
        with results_dir(given) as directory:
            arms = campaign_time(directory)
    except (ArchiveError, StoreError) as exc:
        print(f"campaign_time: {exc}" if isinstance(exc, ArchiveError) else f"campaign_time: {given}: {exc}",
              file=sys.stderr)
        return 2
    print(as_json(arms) if args.json else render(arms))
    return 0


if __name__ == "__main__":
    sys.exit(main())
