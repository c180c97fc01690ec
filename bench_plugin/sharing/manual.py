"""The manual backend: the user configured sharing themselves; the plugin only measures and labels.

Implied by an explicit --host (or per-class host) on the command line. Nothing is started or
switched, so one run measures one arm: the campaign refuses a multi-arm scenario unless --arm picks one.
The arm's knobs are labels of what the user set up; a ``cpu_affinity`` that gives classes served at one
URL (one process) different cores is refused, since no setup matches it.
"""

from __future__ import annotations

from bench_plugin.results.placement import ClassPlacement, Placement
from bench_plugin.scenario import Arm, CpuPlacement, Scenario
from bench_plugin.sharing.base import ApplyError, SharingBackend


class ManualBackend(SharingBackend):
    """Endpoints given by the user; arms are labels."""

    name = "manual"

    def __init__(self, scenario: Scenario, hosts: dict[str, str]) -> None:
        super().__init__(scenario)
        self.hosts = hosts

    def check(self, arm: Arm) -> None:
        if len(self.scenario.arms) > 1:
            names = ", ".join(a.name for a in self.scenario.arms)
            raise ApplyError(
                f"an explicit host means the manual backend, which cannot switch arms; pick the arm you "
                f"configured with --arm (arms: {names})"
            )
        missing = [c for c in self.scenario.classes.names() if c not in self.hosts]
        if missing:
            raise ApplyError(f"no host for class(es) {', '.join(missing)}: give --host or --{missing[0]}-host")
        self._check_affinity_label(arm)

    def _check_affinity_label(self, arm: Arm) -> None:
        """``cpu_affinity`` is a label here; one that gives two classes served by one URL different cores
        describes no possible setup (a process runs on one set), so it is refused."""
        served: dict[str, str] = {}
        for name in self.scenario.classes.names():
            url = self.hosts[name].rstrip("/")
            other = served.setdefault(url, name)
            if other == name:
                continue
            mine, theirs = arm.cpu_affinity.get(name), arm.cpu_affinity.get(other)  # type: ignore[call-overload]
            if mine != theirs:
                raise ApplyError(f"arm '{arm.name}': classes {other} and {name} are served by one process ({url}), "
                                 f"but cpu_affinity gives {other} {_label(theirs)} and {name} {_label(mine)}; one "
                                 "process runs on one set of cores")

    def segments(self, arm: Arm, class_names: list[str]) -> list[list[str]]:
        return [list(class_names)]

    def apply(self, arm: Arm, class_names: list[str], trial_id: int, segment: int) -> Placement:
        return Placement({name: ClassPlacement(url=self.hosts[name]) for name in class_names})

    def release(self) -> None:
        """Nothing was started."""


def _label(placement: CpuPlacement | None) -> str:
    return placement.label() if placement is not None else "no cpu_affinity"
