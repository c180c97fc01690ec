"""The scenario files a user copies run as they are: the seed's ConfigMap form, and vLLM/TEI endpoints.

scenarios/configmap.yaml runs through the real `locust --headless` on the reference servers (one arm,
one repeat, short stages: the file is the test, not its length); scenarios/vllm-tei.yaml runs on the
manual backend against three synthetic servers that each serve only the model name the file gives,
as vLLM does, at the per-class hosts a user would pass.
"""

from __future__ import annotations

import json
from contextlib import ExitStack
from pathlib import Path

import pytest
import yaml
from harness import ROOT, run_locust, synthetic_server

pytestmark = pytest.mark.slow


def test_the_configmap_example_loads_and_runs(tmp_path: Path) -> None:
    results = tmp_path / "results"
    done = run_locust(["-f", "locustfiles/mixed.py", "--scenario", str(ROOT / "scenarios" / "configmap.yaml"),
                       "--arm", "time-slicing", "--repeats", "1", "--stage-duration", "2",
                       "--results-dir", str(results)], timeout=300)
    assert done.returncode == 0, done.stdout[-3000:]
    summary = json.loads((results / "summary.json").read_text())
    assert summary["scenario"]["name"] == "day19-experiment"  # from the ConfigMap's metadata.name
    resolved = json.loads((results / "scenario.resolved.json").read_text())  # data.change etc. filled the fields
    assert resolved["change"] == "compare exclusive and the available sharing modes on the same mixed workload"
    assert resolved["fixed"] == "image, model, input" and resolved["repeats"] == 1  # --repeats 1 over data.repeats
    (trial,) = summary["trials"]
    assert trial["arm"] == "time-slicing" and [s["status"] for s in trial["stages"]] == ["completed"] * 2
    assert all(figures["requests"] > 0 for figures in trial["stages"][0]["classes"].values())


def test_the_vllm_tei_example_measures_given_endpoints(tmp_path: Path) -> None:
    scenario = yaml.safe_load((ROOT / "scenarios" / "vllm-tei.yaml").read_text())
    assert scenario["backend"] == "manual"
    hosts: list[str] = []
    with ExitStack() as stack:
        for name in ("llm", "embedding", "asr"):
            model = scenario["classes"][name]["model"]
            url = stack.enter_context(synthetic_server(tmp_path / f"{name}.log", "--model-name", model,
                                                       "--latency-ms", "5"))
            hosts += [f"--{name}-host", url]
        done = run_locust(["-f", "locustfiles/mixed.py", "--scenario", str(ROOT / "scenarios" / "vllm-tei.yaml"),
                           "--arm", "exclusive", "--repeats", "1", "--stage-duration", "1", *hosts,
                           "--results-dir", str(tmp_path / "results")], timeout=300)
    assert done.returncode == 0, done.stdout[-3000:]
    summary = json.loads((tmp_path / "results" / "summary.json").read_text())
    (trial,) = summary["trials"]
    for stage in trial["stages"]:
        assert stage["status"] == "completed"
        for name, figures in stage["classes"].items():
            assert figures["requests"] > 0 and figures["errors"] == 0, (name, figures)
