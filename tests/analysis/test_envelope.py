"""A ray's boundary in a trial comes from that ray's own search, ended, in every segment that loads its classes.

A trial cut short holds the results of the rays that ended before the cut. Another ray must not borrow one
of them: a shared arm's segment whose only ended search is the embedding ray still runs all three classes,
so the mix ray there is not decided (it once read the embedding ray's boundary, scaled, as its own).
"""

from __future__ import annotations

from analysis_builders import stage, stats

from bench_plugin.analysis.envelope import envelope_rays, ray_repeat
from bench_plugin.results.summary import SearchProbe, SearchResult, TrialSummary
from bench_plugin.results.words import SearchStatus

MIX = {"llm": 2.0, "embedding": 10.0, "asr": 2.0}
EMBEDDING = {"embedding": 10.0}
RAYS = {"mix": MIX, "embedding": EMBEDDING}


def result(segment: int, ray: str, mix: dict[str, float], estimate: float | None, status: str = SearchStatus.FOUND,
           ) -> SearchResult:
    lo = None if estimate is None else estimate * 0.9
    hi = None if estimate is None else estimate * 1.1
    return SearchResult(segment=segment, classes=list(mix), mix=mix, status=status, lo=lo, hi=hi, estimate=estimate,
                        precision=0.2, runs=5, fixed_sweep_runs=12, ray=ray)


def shared_trial(search: list[SearchResult], probes: list[SearchProbe] | None = None) -> TrialSummary:
    stages = [stage(0, {c: stats() for c in MIX}, {c: 2 * r for c, r in MIX.items()}, status="aborted")]
    return TrialSummary(id=1, arm="time-slicing", repeat=0, status="interrupted", reason="cut", placement={},
                        stages=stages, search=search, probes=probes or [])


def test_a_shared_segment_cut_before_its_mix_ray_ended_gives_that_ray_nothing() -> None:
    # the embedding ray ended at 4.12; the mix ray's probe at x2 failed, and the cut came before it ended
    failed = SearchProbe(segment=0, ray="mix", phase="probe", scale=2.0, passed=False, stages=[0])
    trial = shared_trial([result(0, "embedding", EMBEDDING, 4.12)], [failed])
    assert ray_repeat(trial, MIX) is None
    embedding = ray_repeat(trial, EMBEDDING)
    assert embedding is not None and embedding[0].scale == 4.12
    assert [ray.name for ray in envelope_rays([trial], RAYS, [])] == ["embedding"]


def test_without_its_probes_a_segment_still_does_not_lend_a_ray_to_a_mix_it_does_not_cover() -> None:
    trial = shared_trial([result(0, "embedding", EMBEDDING, 4.12)])
    assert ray_repeat(trial, MIX) is None


def test_an_ended_mix_ray_is_its_own_boundary() -> None:
    trial = shared_trial([result(0, "embedding", EMBEDDING, 4.12), result(0, "mix", MIX, 1.5)])
    found = ray_repeat(trial, MIX)
    assert found is not None and found[0].scale == 1.5 and found[0].status == SearchStatus.FOUND


def test_a_ray_still_being_searched_has_no_scale_but_keeps_the_load_it_held() -> None:
    trial = shared_trial([result(0, "mix", MIX, 1.6, status="bisecting")])
    found = ray_repeat(trial, MIX)
    assert found is not None
    repeat, limit = found
    assert repeat.status == "bisecting" and repeat.scale is None and limit == []
    assert repeat.lo is not None and abs(repeat.lo - 1.44) < 1e-9
    [ray] = envelope_rays([trial], {"mix": MIX}, [])
    assert ray.scale.mean is None and ray.boundary == {}


def exclusive_trial(search: list[SearchResult]) -> TrialSummary:
    return TrialSummary(id=2, arm="exclusive", repeat=0, status="interrupted", reason="cut", placement={},
                        stages=[], search=search)


def test_an_exclusive_arm_decides_a_mix_only_once_every_class_was_searched_alone() -> None:
    # each class alone in its own segment, at its own rate; the mix's boundary is the lowest, scaled to the mix
    llm = result(0, "llm", {"llm": 4.0}, 8.0)  # scale 8 of 4 req/s: 32 req/s, 16 of the mix's 2
    embedding = result(1, "embedding", {"embedding": 10.0}, 3.0)  # 30 req/s: 3 of the mix's 10
    asr = result(2, "asr", {"asr": 2.0}, 5.0)
    assert ray_repeat(exclusive_trial([llm, embedding]), MIX) is None  # asr's segment never ran
    found = ray_repeat(exclusive_trial([llm, embedding, asr]), MIX)
    assert found is not None and found[0].scale == 3.0
