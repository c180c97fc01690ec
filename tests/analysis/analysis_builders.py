"""Hand-built records for the analysis tests: every figure is chosen so the right answer is known."""

from __future__ import annotations

from bench_plugin.analysis.objectives import ClassObjectives
from bench_plugin.results.summary import ClassStats, StageSummary, TrialSummary
from bench_plugin.scenario import Slo


def stats(thr: float = 10.0, p95: float | None = 100.0, *, requests: int | None = None, errors: int = 0,
          ttft: float | None = None, tpot: float | None = None, goodput: float | None = None,
          duration: float = 10.0) -> ClassStats:
    """One class in one stage: ``thr`` req/s of successes over ``duration`` s, with this P95."""
    ok = round(thr * duration)
    total = requests if requests is not None else ok + errors
    good = goodput if goodput is not None else thr
    return ClassStats(
        requests=total, errors=errors, errors_by_kind={"http_500": errors} if errors else {}, duration_s=duration,
        throughput_rps=thr, latency_ms={"p50": p95, "p95": p95}, queue_ms={"p50": 0.0, "p95": 0.0},
        ttft_ms={"p95": ttft} if ttft is not None else None, tpot_ms={"p95": tpot} if tpot is not None else None,
        slo_met=round(good * duration), slo_attainment=good * duration / total if total else None,
        goodput_rps=good,
    )


def stage(index: int, classes: dict[str, ClassStats], offered: dict[str, float] | None = None,
          status: str = "completed", skipped: tuple[str, ...] = ()) -> StageSummary:
    """A stage; classes in ``skipped`` have an offered load but no figures (skipped after a rollback)."""
    loads = offered or {name: float(index + 1) for name in [*classes, *skipped]}
    return StageSummary(index=index, name=None, offered=loads, arrival={n: "poisson" for n in loads},
                        duration_s=10.0, status=status, reason="rolled back" if status == "aborted" else None,
                        classes=dict(classes))


def trial(arm: str, repeat: int, stages: list[StageSummary], devices: int = 1) -> TrialSummary:
    """A completed trial charged ``devices`` devices."""
    return TrialSummary(id=repeat, arm=arm, repeat=repeat, status="completed", reason=None, placement={},
                        stages=stages, devices_charged=devices)


def objectives(p95: float = 1000.0, budget: float = 0.01, ttft: float | None = None,
               tpot: float | None = None, names: tuple[str, ...] = ("llm", "embedding", "asr")
               ) -> dict[str, ClassObjectives]:
    """The same P95 SLO and error budget for every class (TTFT/TPOT apply to llm only)."""
    return {n: ClassObjectives(Slo(p95_ms=p95, ttft_p95_ms=ttft, tpot_p95_ms=tpot), budget) for n in names}
