"""The manual backend: the user configured sharing themselves; the plugin only measures and labels.

Implied by an explicit --host (or per-class host) on the command line. Nothing is started or
switched, so one run measures one arm: the campaign refuses a multi-arm scenario unless --arm picks one.
"""

from __future__ import annotations

from bench_plugin.scenario import Arm, Scenario
from bench_plugin.sharing.base import ApplyError, ClassPlacement, Placement, SharingBackend


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

    def segments(self, arm: Arm, class_names: list[str]) -> list[list[str]]:
        return [list(class_names)]

    def apply(self, arm: Arm, class_names: list[str], trial_id: int, segment: int) -> Placement:
        return Placement({name: ClassPlacement(url=self.hosts[name]) for name in class_names})

    def release(self) -> None:
        """Nothing was started."""
