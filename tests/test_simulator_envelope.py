"""The envelope, its model and the capacity plan, checked against the contention simulator's known truth.

scenarios/simulator-envelope.yaml runs, through the real `locust --headless`, the exclusive control and a
time-slicing arm on the simulated device (servers/device.py): an M/M/1 FCFS queue of mean service S
(10 ms, 14 ms under time-slicing). A class of own latency L keeps a P95 SLO T while the device's total rate
is at most mu - ln(20) / (T - L), so the true boundary along every ray, the model's true parameters and the
least GPUs for any traffic are known in closed form. The tests check that:

- each ray's searched boundary is within the search's precision of the true one;
- the model, fit on the other rays, predicts the held-out ray within its stated error, and near the truth;
- `bench-plugin plan` gives the least GPUs that the true envelope allows, for five traffics (a test each),
  for both arms, and the report shows the envelope and the plan.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from harness import ROOT, run_locust, search_campaign_store
from packing_truth import fewest_gpus

from bench_plugin.cli import main as cli_main
from bench_plugin.results.plan import read_plan
from bench_plugin.results.summary import Summary, load_summary
from bench_plugin.results.words import Hold, SearchStatus
from bench_plugin.servers.device import arm_boundary_scale, max_total_rate

pytestmark = [pytest.mark.slow, pytest.mark.serial,  # timings against a known truth: alone on the machine
              pytest.mark.timeout(2700)]  # the campaign takes some 20 minutes on a 2-core machine

SCENARIO = ROOT / "scenarios" / "simulator-envelope.yaml"
SERVICE_S = {"exclusive": 0.010, "time-slicing": 0.014}
LIMITS = {"llm": (160.0, 40.0), "embedding": (130.0, 20.0), "asr": (200.0, 60.0)}
"""Class -> (its tightest P95 SLO in ms, its own latency there): llm's TTFT SLO and TTFT bind before its P95."""


def true_scale(arm: str, mix: dict[str, float]) -> float:
    """The true boundary scale along ``mix``: on one device (time-slicing), or each class on its own (exclusive)."""
    return arm_boundary_scale(mix, SERVICE_S[arm], LIMITS, alone=arm == "exclusive")


def true_gpus(arm: str, traffic: dict[str, float], headroom: float, off: float = 1.0) -> int:
    """The least GPUs the true envelope allows: each request/s takes S of a device, whose class c may keep it busy
    S * max_total_rate_c (times ``off``, to ask what an envelope measured that far off would give)."""
    service = SERVICE_S[arm]
    limits = {c: off * service * max_total_rate(service, *LIMITS[c]) for c in LIMITS}
    work = {c: service * t for c, t in traffic.items()}
    return fewest_gpus(work, limits, headroom, alone=arm == "exclusive")


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Summary]:
    results = tmp_path_factory.mktemp("envelope") / "results"
    done = run_locust(["-f", "locustfiles/mixed.py", "--scenario", str(SCENARIO), "--results-dir", str(results)],
                      timeout=2400)
    assert done.returncode == 0, done.stdout[-3000:]
    return results, load_summary(results / "summary.json")


def test_each_ray_is_within_the_search_precision_of_the_truth(campaign: tuple[Path, Summary]) -> None:
    """Every ray the search judged lands within its precision of the closed form. A ray whose load generator fell
    behind is not judged (analysis/probe.py: its event loop, sharing two cores with three servers, can be held
    over 10 ms); it must say so, and most rays must still be judged."""
    _, summary = campaign
    precision = yaml.safe_load(SCENARIO.read_text())["search"]["precision"]
    assert summary.comparison is not None
    checked = 0
    for arm, comparison in summary.comparison.arms.items():
        assert comparison.envelope is not None
        for ray in comparison.envelope.rays:
            truth = true_scale(arm, ray.mix)
            if SearchStatus.GENERATOR_LIMITED in ray.status:  # in one repeat or more
                assert any((r.stopped or "").startswith("the load generator fell behind at x") for r in ray.per_repeat)
                continue
            if ray.agreed == SearchStatus.ABOVE_MAXIMUM:
                assert ray.lo.mean is not None and truth >= ray.lo.mean * (1 - precision), (arm, ray.name)
                continue
            assert ray.agreed == SearchStatus.FOUND and ray.scale.mean is not None, (arm, ray.name, ray.status)
            assert abs(ray.scale.mean - truth) / truth <= precision, (arm, ray.name, ray.scale.mean, truth)
            checked += 1
            held = [r.sustain for r in ray.per_repeat]
            assert all(h in tuple(Hold) for h in held), "every found boundary was held"
    assert checked >= 7, "most rays judged"


def test_the_held_out_ray_is_predicted_within_the_stated_error(campaign: tuple[Path, Summary]) -> None:
    """The model, fit on noisy 10-s probes, predicts every ray (the held-out one too) within 20% of the closed form
    (seen: at most 16%); the held-out error it states, against the measured boundary (itself within the search's
    precision of the truth), is then at most 1.2 / (1 - precision) - 1, in each arm whose held-out ray was judged."""
    _, summary = campaign
    precision = yaml.safe_load(SCENARIO.read_text())["search"]["precision"]
    assert summary.comparison is not None
    stated = 0
    for arm in ("exclusive", "time-slicing"):
        envelope = summary.comparison.arms[arm].envelope
        assert envelope is not None and envelope.model is not None
        for ray in envelope.rays:
            predicted = envelope.model.rays[ray.name]
            assert predicted is not None
            assert abs(predicted - true_scale(arm, ray.mix)) / true_scale(arm, ray.mix) <= 0.2, (arm, ray.name)
        (held,) = [r for r in envelope.rays if r.held_out]
        assert held.name == "llm+asr" and held.name not in envelope.model.fitted_on
        error = envelope.model.held_out_error[held.name]
        if held.agreed != SearchStatus.FOUND:  # not judged (its load generator fell behind): no error to state
            assert error is None
            continue
        assert error is not None and abs(error) <= 1.2 / (1 - precision) - 1, (arm, error)
        assert f"within {abs(error):.0%}" in envelope.model.validated
        stated += 1
    assert stated >= 1, "the held-out ray judged in some arm"


TRAFFICS = [
    {"llm": 10.0, "embedding": 10.0, "asr": 5.0},
    {"llm": 20.0, "embedding": 20.0, "asr": 5.0},
    {"llm": 0.0, "embedding": 30.0, "asr": 20.0},
    {"llm": 0.0, "embedding": 20.0, "asr": 5.0},
    {"llm": 40.0, "embedding": 10.0, "asr": 0.0},
]
"""Traffics whose least GPU count stays the same for every arm with each class's capacity 20% off either way (the
model's tolerance above), so a plan on a fair measurement must give the true count: 3 and 1, 3 and 2, 2 and 2, 2 and 1,
2 and 2 GPUs (exclusive, time-slicing)."""


@pytest.mark.parametrize("traffic", TRAFFICS, ids=lambda t: "-".join(f"{c}{r:g}" for c, r in t.items() if r))
def test_each_plan_traffic_leaves_room_for_the_measurement(traffic: dict[str, float]) -> None:
    """Fewer GPUs never fit with less capacity, so the two ends of the range bound every measurement within it."""
    for arm in ("exclusive", "time-slicing"):
        assert true_gpus(arm, traffic, 0.2, 0.8) == true_gpus(arm, traffic, 0.2) == true_gpus(arm, traffic, 0.2, 1.2)
    assert [true_gpus(a, traffic, 0.2) for a in ("exclusive", "time-slicing")] in ([3, 1], [3, 2], [2, 2], [2, 1])


@pytest.mark.parametrize("traffic", TRAFFICS, ids=lambda t: "-".join(f"{c}{r:g}" for c, r in t.items() if r))
def test_plan_gives_the_least_gpus_the_true_envelope_allows(campaign: tuple[Path, Summary], traffic: dict[str, float],
                                                            tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results, _ = campaign
    text = ",".join(f"{c}={r:g}" for c, r in traffic.items())
    assert cli_main(["plan", str(results), "--traffic", text, "--headroom", "0.2", "--gpu-cost", "3", "--json"]) == 0
    printed: dict[str, Any] = json.loads(capsys.readouterr().out)
    document = read_plan(results / "plan.json")
    assert printed == json.loads(document.model_dump_json(by_alias=True))
    (plan,) = document.plans
    by_arm = {p.arm: p for p in plan.arms}
    for arm in ("exclusive", "time-slicing"):
        truth = true_gpus(arm, traffic, 0.2)
        assert by_arm[arm].gpus == truth, (arm, by_arm[arm], truth)
        placed = sum(g.load.get(c, 0.0) for g in by_arm[arm].groups for c in traffic)
        assert placed == pytest.approx(sum(traffic.values())), "every request/s placed once"
        assert by_arm[arm].cost == pytest.approx(3 * truth)
    assert by_arm["time-slicing"].saved_gpus == by_arm["exclusive"].gpus - by_arm["time-slicing"].gpus  # type: ignore[operator]


def test_the_report_shows_the_envelope_and_the_plan(campaign: tuple[Path, Summary]) -> None:
    results, _ = campaign
    assert cli_main(["plan", str(results), "--traffic", "llm=20,embedding=30,asr=20"]) == 0
    html = (results / "report.html").read_text()
    assert 'id="envelope"' in html and 'id="envelope-picture"' in html and 'id="plan"' in html
    markdown = (results / "report.md").read_text()
    assert "## Operating envelope" in markdown and "## Capacity plan" in markdown and "(held out)" in markdown


@pytest.mark.parametrize(("args", "message"), [
    (["--traffic", "llm=x"], "'x' is not a number of requests per second"),
    (["--traffic", "gpu=3"], "'gpu' is not a class of this campaign"),
    (["--traffic", "llm=0"], "give some class a rate above 0"),
    (["--traffic", "llm=3", "--headroom", "-1"], "--headroom -1: give a fraction from 0 to 10"),
    (["--traffic", "llm=3", "--gpu-cost", "0"], "--gpu-cost 0: give a positive cost per GPU"),
])
def test_bad_plan_input_is_one_line_and_exit_2(campaign: tuple[Path, Summary], args: list[str], message: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    results, _ = campaign
    assert cli_main(["plan", str(results), *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and "Traceback" not in err


def test_plan_refuses_a_campaign_without_rays(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A real H200 search along one mix only (docs/results/h200-boundary): nothing to plan on, said in one line."""
    results = search_campaign_store(tmp_path)
    (results / "scenario.resolved.json").write_text("{}")
    assert cli_main(["plan", str(results), "--traffic", "llm=3"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no envelope to plan on: the campaign searched no rays" in err
    assert not (results / "plan.json").exists()
    assert cli_main(["plan", str(tmp_path / "nothing"), "--traffic", "llm=3"]) == 2
    assert "not a results directory" in capsys.readouterr().err
