"""Bad kubernetes options through the real `locust` command: one line naming the option and value, exit 2.

None of these reach a cluster: each is refused before the backend connects (a missing client, a
kubeconfig that is not there) or before a backend is chosen (a malformed value).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from harness import LOCUST, ROOT
from k8s_backend_testlib import write_scenario

pytestmark = pytest.mark.slow

ARMS = [{"name": "exclusive", "control": True}, {"name": "time-slicing", "sharing": "time-slicing"}]


def locust(tmp_path: Path, *args: str, pythonpath: str | None = None,
           env_vars: dict[str, str] | None = None) -> tuple[int, str]:
    """A kubernetes campaign of two classes with ``args``: its exit status and output."""
    scenario = write_scenario(tmp_path / "s.yaml", "bench", ARMS, classes=("llm", "embedding"))
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    for name in ("LOCUST_BACKEND", "LOCUST_SERVICE_URL", "LOCUST_NAMESPACE", "LOCUST_KUBECONFIG", "KUBECONFIG"):
        env.pop(name, None)
    env.update(env_vars or {})
    if pythonpath is not None:
        env["PYTHONPATH"] = os.pathsep.join([pythonpath, env.get("PYTHONPATH") or str(ROOT)])
    done = subprocess.run([LOCUST, "--headless", "--only-summary", "-f", "locustfiles/mixed.py", "--scenario",
                           str(scenario), "--results-dir", str(tmp_path / "results"), *args], cwd=ROOT,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120, env=env,
                          check=False)
    return done.returncode, done.stdout


def one_line(code: int, output: str) -> str:
    """The one error line of a refused run (exit status 2, no traceback)."""
    assert code == 2, output
    assert "Traceback" not in output, output
    lines = [line for line in output.splitlines() if line.startswith("bench_plugin: error:")]
    assert len(lines) == 1, output
    return lines[0]


@pytest.mark.parametrize(("args", "expected"), [
    (["--service-url", "llm"], "--service-url 'llm': expected CLASS=URL"),
    (["--service-url", "asr=http://127.0.0.1:9"], "--service-url 'asr=http://127.0.0.1:9': 'asr' is not a class of "
                                                  "this scenario (classes: llm, embedding)"),
    (["--service-url", "llm=127.0.0.1:9"], "'127.0.0.1:9' is not an http(s) URL"),
    (["--backend", "slurm"], "--backend 'slurm': not a backend (one of local, manual, kubernetes)"),
    (["--namespace", "Bench_NS"], "--namespace 'Bench_NS': must be a DNS-1123 label"),
    (["--backend", "kubernetes", "--host", "http://127.0.0.1:9"], "--backend kubernetes: an explicit host"),
    (["--kubeconfig", "/nonexistent/kubeconfig"], "kubeconfig /nonexistent/kubeconfig: no such file"),
], ids=["no-equals", "unknown-class", "not-a-url", "unknown-backend", "bad-namespace", "host-and-kubernetes",
        "missing-kubeconfig"])
def test_bad_option_is_one_line(tmp_path: Path, args: list[str], expected: str) -> None:
    line = one_line(*locust(tmp_path, *args))
    assert expected in line, line
    assert not (tmp_path / "results").exists()


def test_kubernetes_backend_without_the_client(tmp_path: Path) -> None:
    shim = tmp_path / "shim" / "kubernetes"
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text('raise ImportError("hidden by the test: no kubernetes client here")\n')
    line = one_line(*locust(tmp_path, "--backend", "kubernetes", pythonpath=str(shim.parent)))
    assert "the kubernetes backend needs the kubernetes extra (pip install 'bench-plugin[kubernetes]')" in line, line
    assert "hidden by the test" in line, line


def test_service_urls_from_the_environment_are_checked_too(tmp_path: Path) -> None:
    line = one_line(*locust(tmp_path, env_vars={"LOCUST_SERVICE_URL": "llm=http://127.0.0.1:9,embedding"}))
    assert "--service-url 'embedding': expected CLASS=URL" in line, line
