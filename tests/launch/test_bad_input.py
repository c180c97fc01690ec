"""Bad input through the real `locust` command: a non-zero exit and a line naming file, key and value."""

from __future__ import annotations

import copy
import os
from pathlib import Path

import pytest
import yaml
from harness import ROOT, run_locust, scenario_variant, synthetic_server

SHORT = yaml.safe_load((ROOT / "scenarios" / "short.yaml").read_text())


def locust_error(scenario: Path | str, *extra: str, results: Path | None = None) -> tuple[int, str]:
    args = ["-f", "locustfiles/mixed.py", "--scenario", str(scenario), *extra]
    if results is not None:
        args += ["--results-dir", str(results)]
    done = run_locust(args, timeout=120)
    return done.returncode, done.stdout


def assert_clean_error(code: int, output: str, *expected: str) -> None:
    assert code != 0, output
    assert "Traceback" not in output, output
    lines = [line for line in output.splitlines() if line.startswith("bench_plugin: error:")]
    assert lines, output
    for text in expected:
        assert any(text in line for line in lines), (text, lines)


def test_unknown_key(tmp_path: Path) -> None:
    path = scenario_variant(tmp_path, "short", rollback={"max_p95_multiple": 5, "max_p99_multiple": 9})
    assert_clean_error(*locust_error(path), str(path), "rollback.max_p99_multiple: unknown key")


def test_wrong_type(tmp_path: Path) -> None:
    stages = [{"duration_s": "soon", "load": {"llm": 1, "embedding": 1, "asr": 1}}]
    path = scenario_variant(tmp_path, "short", stages=stages)
    assert_clean_error(*locust_error(path), str(path), "stages.0.duration_s", "'soon'")


def test_arm_changing_two_variables(tmp_path: Path) -> None:
    arms = [{"name": "exclusive", "control": True},
            {"name": "both", "sharing": "time-slicing", "classes": {"llm": {"priority": "high"}}}]
    path = scenario_variant(tmp_path, "short", arms=arms)
    assert_clean_error(*locust_error(path), str(path), "arm 'both' changes 2 variables",
                       "sharing, classes.llm.priority")


def test_missing_scenario_file(tmp_path: Path) -> None:
    path = tmp_path / "missing.yaml"
    assert_clean_error(*locust_error(path), f"{path}: scenario file not found")


def test_empty_scenario_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.yaml"
    path.write_text("")
    assert_clean_error(*locust_error(path), f"{path}: scenario file is empty")


def test_truncated_scenario_file(tmp_path: Path) -> None:
    text = (ROOT / "scenarios" / "short.yaml").read_text()
    path = tmp_path / "truncated.yaml"
    path.write_text(text[: text.index("stages:")] + "stages:\n  - {name: low, duration_s: 3, load: {llm: 2,")
    assert_clean_error(*locust_error(path), str(path), "not valid YAML at line")


def test_missing_request_set_file(tmp_path: Path) -> None:
    classes = copy.deepcopy(SHORT["classes"])  # SHORT is the module's: the other tests read it as the file has it
    classes["llm"]["requests"] = {"file": "prompts.jsonl"}
    path = scenario_variant(tmp_path, "short", classes=classes)
    assert_clean_error(*locust_error(path), f"{tmp_path / 'prompts.jsonl'}: request-set file not found")


def test_no_scenario_given() -> None:
    done = run_locust(["-f", "locustfiles/mixed.py"], timeout=60)
    assert_clean_error(done.returncode, done.stdout, "--scenario is required")


def test_results_dir_with_other_results(tmp_path: Path) -> None:
    (tmp_path / "old.txt").write_text("x")
    assert_clean_error(*locust_error(ROOT / "scenarios" / "short.yaml", results=tmp_path),
                       f"--results-dir {tmp_path}: exists and is not an empty directory")


def test_manual_backend_needs_one_arm(tmp_path: Path) -> None:
    code, output = locust_error(ROOT / "scenarios" / "short.yaml", "--host", "http://127.0.0.1:9")
    assert_clean_error(code, output, "manual backend", "--arm")


@pytest.mark.parametrize(("option", "value", "expected"), [
    ("--host", "localhost:8000", "--host 'localhost:8000': not an http(s) base URL with a host; write e.g. "
                                 "http://localhost:8000"),
    ("--llm-host", "http://127.0.0.1:99999", "--llm-host 'http://127.0.0.1:99999': the port is not a number"),
])
def test_a_host_that_is_no_url_is_refused_before_any_request(tmp_path: Path, option: str, value: str,
                                                              expected: str) -> None:
    # the scenario waits up to 300 s for readiness: a refusal this run outlives is one made before it
    path = scenario_variant(tmp_path, "short", readiness_timeout_s=300)
    extra = [option, value] if option == "--host" else ["--host", "http://127.0.0.1:9", option, value]
    code, output = locust_error(path, *extra, "--arm", "shared", results=tmp_path / "results")
    assert_clean_error(code, output, expected)
    assert not (tmp_path / "results").exists(), "refused after the campaign had begun"


BLOCK_SERVER_EXTRA = """
import sys


class _Missing:  # this interpreter as a core install without the 'servers' extra would be
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("aiohttp", "torch"):
            raise ModuleNotFoundError(f"No module named {name!r}")
        return None


sys.meta_path.insert(0, _Missing())
"""


def test_the_local_backend_without_the_servers_extra_is_refused_before_any_server(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_leftover_servers: None) -> None:
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(BLOCK_SERVER_EXTRA)
    paths = [str(tmp_path / "site"), *filter(None, [os.environ.get("PYTHONPATH")])]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(paths))
    code, output = locust_error(ROOT / "scenarios" / "short.yaml", results=tmp_path / "results")
    assert_clean_error(code, output, "reference servers for llm, embedding, asr, which need aiohttp, torch (not "
                                     "installed): install the 'servers' extra (pip install '.[servers]'), or "
                                     "measure your own servers with --host")
    assert not (tmp_path / "results").exists()


def test_a_model_the_endpoint_does_not_serve_is_refused_at_its_first_answer(tmp_path: Path) -> None:
    path = scenario_variant(tmp_path, "calibration", readiness_timeout_s=300)  # outlived: refused at once
    with synthetic_server(tmp_path / "server.log", "--model-name", "someone-elses-model") as url:
        code, output = locust_error(path, "--host", url, results=tmp_path / "results")
    assert_clean_error(code, output, f"llm endpoint {url}: serves someone-elses-model, not 'bench-synthetic' "
                                     "(classes.llm.model)")


@pytest.mark.slow
def test_unreachable_endpoint(tmp_path: Path, no_leftover_servers: None) -> None:
    path = scenario_variant(tmp_path, "short", readiness_timeout_s=2)
    code, output = locust_error(path, "--host", "http://127.0.0.1:9", "--arm", "shared",
                                results=tmp_path / "results")
    assert_clean_error(code, output, "not ready after 2 s", "llm at http://127.0.0.1:9")
    assert (tmp_path / "results" / "results.sqlite").is_file()


def test_a_disruption_needs_the_kubernetes_backend(tmp_path: Path) -> None:
    path = scenario_variant(tmp_path, "short", backend="kubernetes", disruption={"kind": "drain", "at_s": 0.5})
    assert_clean_error(*locust_error(path, "--backend", "local", results=tmp_path / "r"),
                       "disruption (kind drain) needs the kubernetes backend, not local")


def test_a_metrics_url_that_is_no_url_and_prometheus_without_a_prometheus_are_refused(tmp_path: Path) -> None:
    classes = copy.deepcopy(SHORT["classes"])
    classes["embedding"]["metrics_url"] = "localhost:9000/metrics"
    path = scenario_variant(tmp_path, "short", name="no-url.yaml", classes=classes)
    assert_clean_error(*locust_error(path), "classes.embedding.metrics_url",
                       "'localhost:9000/metrics': give an http:// or https:// URL, 'prometheus' or 'off'")
    classes["embedding"]["metrics_url"] = "prometheus"
    path = scenario_variant(tmp_path, "short", name="through.yaml", classes=classes)
    assert_clean_error(*locust_error(path, results=tmp_path / "r"),
                       "classes.embedding.metrics_url: 'prometheus' needs --prometheus-url")
    assert not (tmp_path / "r" / "results.sqlite").exists()  # refused before any server or store
