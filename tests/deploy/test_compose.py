"""docker-compose.yml, checked without a container engine.

This project's machines have no Docker engine, so no image is built and no container runs here.
What can be held is checked instead: ``docker compose config`` (compose v5 itself, built from the Go
module proxy by tools/compose/build.sh, ``make compose-plugin``) validates the file for both profiles,
promtool checks the Prometheus config, and the servers' commands, taken from ``docker compose config
--format json``, run natively on loopback and serve one real request each. A command that would not
start in the container (a renamed flag, a wrong module) fails here.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml

from bench_plugin.live.exposition import FAMILIES
from bench_plugin.results.store import open_campaign, read_samples
from bench_plugin.scenario import load_scenario
from bench_plugin.servers.presets import DEFAULT_MODEL_NAMES
from bench_plugin.sharing.processes import ServerProcess, free_port

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker-compose.yml"
PROMETHEUS_CONFIG = ROOT / "deploy" / "prometheus" / "prometheus.yml"
DASHBOARD = ROOT / "deploy" / "grafana" / "bench-live.json"
DOCKER_CONFIG = ROOT / ".docker"
PLUGIN = DOCKER_CONFIG / "cli-plugins" / "docker-compose"
PROMTOOL = Path("/usr/bin/promtool")
SERVERS = ("llm", "embedding", "asr")
PORT_VARIABLES = {"llm": "BENCH_LLM_PORT", "embedding": "BENCH_EMBEDDING_PORT", "asr": "BENCH_ASR_PORT"}
# The image runs `python` and `locust` from /app, which is this repository's root (Dockerfile WORKDIR).
NATIVE_PROGRAMS = {"python": sys.executable, "locust": str(Path(sys.executable).parent / "locust")}
# Generous: two busy cores, three servers importing torch and warming up at once.
READY_TIMEOUT_S = 300.0
REQUEST_TIMEOUT_S = 120.0
CLIP = ROOT / "bench_plugin" / "data" / "asr" / "clip-01.wav"

Config = dict[str, Any]


def compose(*args: str, env: Mapping[str, str] | None = None,
            file: Path = COMPOSE_FILE) -> subprocess.CompletedProcess[str]:
    """Run ``docker compose -f FILE ARGS`` with the plugin built for the tests.

    The caller's BENCH_* and COMPOSE_* variables are dropped, so only ``env`` and the repo's .env
    decide the result. Without a docker client the plugin binary runs standalone (the same program).
    """
    if not PLUGIN.is_file():
        pytest.fail(f"docker compose is not built: {PLUGIN.relative_to(ROOT)} is missing; run `make compose-plugin` "
                    "(tools/compose/build.sh builds it from the Go module proxy)", pytrace=False)
    base = {k: v for k, v in os.environ.items() if not k.startswith(("BENCH_", "COMPOSE_"))}
    full_env = {**base, "DOCKER_CONFIG": str(DOCKER_CONFIG), **(env or {})}
    argv = ["docker", "compose"] if shutil.which("docker") else [str(PLUGIN)]
    return subprocess.run([*argv, "-f", str(file), *args], cwd=ROOT, env=full_env, capture_output=True, text=True,
                          timeout=120, check=False)


def resolved(*args: str, env: Mapping[str, str] | None = None) -> Config:
    """The project as compose resolves it (``config --format json``), profiles and variables applied."""
    done = compose(*args, "config", "--format", "json", env=env)
    assert done.returncode == 0, done.stderr
    config: Config = json.loads(done.stdout)
    return config


def option(command: list[str], name: str) -> str:
    """The value of ``--name=value`` in a command line (the form docker-compose.yml uses)."""
    values = [arg.split("=", 1)[1] for arg in command if arg.startswith(f"--{name}=")]
    assert len(values) == 1, f"--{name}= not exactly once in {command}"
    return values[0]


def answers_as(config: Config, name: str) -> str:
    """The service that answers to the host ``name`` on the default network (a name or an alias)."""
    for service, spec in config["services"].items():
        aliases = ((spec.get("networks") or {}).get("default") or {}).get("aliases") or []
        if name == service or name in aliases:
            return str(service)
    raise AssertionError(f"no service answers to {name!r}")


# --- the file itself -------------------------------------------------------------------------------


@pytest.mark.parametrize("profile", [[], ["--profile", "gpu"]], ids=["cpu-default", "gpu"])
def test_compose_config_is_valid(profile: list[str]) -> None:
    done = compose(*profile, "config", "-q")
    assert done.returncode == 0, done.stderr
    assert done.stderr == "", done.stderr  # no warnings either (an unset variable, an obsolete key)


def test_compose_config_catches_a_broken_file(tmp_path: Path) -> None:
    # the validator is not vacuous: a dependency on a service that does not exist is refused
    broken = COMPOSE_FILE.read_text().replace("master:\n        condition: service_started",
                                              "nosuchservice:\n        condition: service_started")
    assert broken != COMPOSE_FILE.read_text()
    (tmp_path / "docker-compose.yml").write_text(broken)
    done = compose("config", "-q", file=tmp_path / "docker-compose.yml")
    assert done.returncode != 0
    assert 'depends on undefined service "nosuchservice"' in done.stderr


def test_profiles_pick_one_set_of_servers() -> None:
    cpu = resolved()
    gpu = resolved("--profile", "gpu")
    always = {"master", "worker", "prometheus"}
    assert set(cpu["services"]) == always | set(SERVERS)
    assert set(gpu["services"]) == always | {f"{s}-gpu" for s in SERVERS} | {"exporter"}
    for name in SERVERS:
        assert option(cpu["services"][name]["command"], "device") == "cpu"
        assert answers_as(gpu, name) == f"{name}-gpu"
        assert option(gpu["services"][f"{name}-gpu"]["command"], "device") == "cuda"
    for name in [f"{s}-gpu" for s in SERVERS] + ["exporter"]:
        (device,) = gpu["services"][name]["deploy"]["resources"]["reservations"]["devices"]
        assert device["driver"] == "nvidia" and device["capabilities"] == ["gpu"], device
    for config in (cpu, gpu):
        master = config["services"]["master"]
        # the master waits for every server that runs to be healthy (the health check is /health)
        servers = [s for s in config["services"] if s not in {"master", "worker", "prometheus", "exporter"}]
        for server in servers:
            assert master["depends_on"][server]["condition"] == "service_healthy"
            port = option(config["services"][server]["command"], "port")
            assert f"127.0.0.1:{port}/health" in " ".join(config["services"][server]["healthcheck"]["test"])
        assert [p["target"] for p in master["ports"]] == [8089]
        assert "--scenario" not in " ".join(config["services"]["worker"]["command"])


@pytest.mark.parametrize(("profile", "env"), [
    ([], {}),
    (["--profile", "gpu"], {"BENCH_SCENARIO": "scenarios/day19-h200.yaml", "BENCH_ARM": "time-slicing"}),
], ids=["cpu-default", "gpu-day19-h200"])
def test_master_points_at_the_servers_with_a_matching_scenario(profile: list[str], env: dict[str, str]) -> None:
    # what README tells users to run: the served models are the scenario's, and the arm is one of its arms
    config = resolved(*profile, env=env)
    master = config["services"]["master"]["command"]
    scenario = load_scenario(ROOT / option(master, "scenario"), arm=option(master, "arm"))
    for name in SERVERS:
        match = re.fullmatch(r"http://([a-z-]+):(\d+)", option(master, f"{name}-host"))
        assert match, option(master, f"{name}-host")
        server = config["services"][answers_as(config, match[1])]["command"]
        assert option(server, "port") == match[2]
        assert server[:4] == ["python", "-m", "bench_plugin.servers", name]
        served = DEFAULT_MODEL_NAMES[name].format(size=option(server, "size"))
        assert scenario.classes.get(name).model == served


def test_prometheus_scrapes_the_compose_ports() -> None:
    scrape = yaml.safe_load(PROMETHEUS_CONFIG.read_text())["scrape_configs"]
    targets = {t for job in scrape for static in job["static_configs"] for t in static["targets"]}
    gpu = resolved("--profile", "gpu")
    expected = {f"{name}:{option(gpu['services'][answers_as(gpu, name)]['command'], 'port')}"
                for name in (*SERVERS, "exporter")}
    assert expected <= targets, f"prometheus.yml scrapes {sorted(targets)}; compose serves {sorted(expected)}"
    prometheus = gpu["services"]["prometheus"]
    assert any(v["source"] == str(PROMETHEUS_CONFIG) for v in prometheus["volumes"]), prometheus["volumes"]


def test_prometheus_scrapes_the_masters_live_figures_and_the_dashboard_asks_only_for_them() -> None:
    """The bench-live job reads /bench/metrics on the master's web port; the Grafana dashboard's queries name
    only families that /bench/metrics serves, and only labels it sets (tests/live/test_metrics_scrape.py runs
    them against a real Prometheus)."""
    scrape = {job["job_name"]: job for job in yaml.safe_load(PROMETHEUS_CONFIG.read_text())["scrape_configs"]}
    job = scrape["bench-live"]
    master = resolved()["services"]["master"]
    assert job["metrics_path"] == "/bench/metrics"
    assert [t for static in job["static_configs"] for t in static["targets"]] == [
        f"master:{option(master['command'], 'web-port')}"]
    board = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for panel in board["panels"] for t in panel["targets"]] + [
        a["expr"] for a in board["annotations"]["list"]]
    assert exprs and {name for expr in exprs for name in re.findall(r"\bbench_[a-z_]+", expr)} <= set(FAMILIES)
    labels = {label for expr in exprs for label in re.findall(r"([a-z_]+)=~?\"", expr)}
    assert labels <= {"class", "scope", "quantile", "figure", "arm", "stage", "repeat"}, labels


@pytest.mark.skipif(not PROMTOOL.exists(), reason="/usr/bin/promtool not installed (Debian package prometheus)")
def test_prometheus_config_passes_promtool() -> None:
    done = subprocess.run([str(PROMTOOL), "check", "config", str(PROMETHEUS_CONFIG)], capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


# --- the commands, run natively --------------------------------------------------------------------


def native_command(command: list[str], services: Mapping[str, Any]) -> list[str]:
    """A compose command for this host: programs from this venv, service host names -> 127.0.0.1."""
    program = NATIVE_PROGRAMS.get(command[0])
    assert program, f"{command[0]!r} is not a program the image provides natively here ({sorted(NATIVE_PROGRAMS)})"
    names = "|".join(re.escape(n) for n in sorted(services, key=len, reverse=True))
    out = [program]
    for arg in command[1:]:
        arg = re.sub(rf"//({names})(?=[:/]|$)", "//127.0.0.1", arg)  # URLs: http://llm:8000
        key, sep, value = arg.partition("=")
        if sep and value in services:  # --master-host=master
            arg = f"{key}=127.0.0.1"
        out.append(arg)
    return out


def start_service(config: Config, name: str, log_dir: Path, env: Mapping[str, str] | None = None) -> ServerProcess:
    """Start service ``name``'s command natively, with its environment, from the repository root.

    The caller's BENCH_*, COMPOSE_* and LOCUST_* variables are left out: only the compose command,
    the service's environment and ``env`` count.
    """
    spec = config["services"][name]
    inherited = {k: v for k, v in os.environ.items() if not k.startswith(("BENCH_", "COMPOSE_", "LOCUST_"))}
    service_env = {k: str(v) for k, v in (spec.get("environment") or {}).items() if v is not None}
    added = {**service_env, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1", **(env or {})}
    argv = native_command(spec["command"], config["services"])
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"{name}.log"
    with open(log_path, "wb") as log:
        # cwd: the image's commands run from /app, which is the repository root
        process = subprocess.Popen(argv, cwd=ROOT, env={**inherited, **added}, stdin=subprocess.DEVNULL,
                                   stdout=log, stderr=subprocess.STDOUT)
    return ServerProcess(name, argv, added, log_path, process)


def wait_healthy(process: ServerProcess, url: str, timeout_s: float = READY_TIMEOUT_S) -> None:
    """Poll GET url until 200; fail early, with the log, if the process exits."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.exit_code() is not None:
            pytest.fail(f"{process.name} exited with {process.exit_code()}: {process.log_tail(20)}")
        try:
            if requests.get(url, timeout=5).status_code == 200:
                return
        except requests.RequestException:
            pass  # not listening yet
        time.sleep(0.2)
    pytest.fail(f"{process.name}: {url} not 200 after {timeout_s:.0f} s: {process.log_tail(20)}")


@dataclass
class LocustStack:
    """A natively started master and its workers; ``stop()`` ends them all."""

    master: ServerProcess
    workers: list[ServerProcess] = field(default_factory=list)
    web_url: str = ""

    def stop(self) -> None:
        """Workers first, then the master (which then writes its summary)."""
        for process in [*self.workers, self.master]:
            process.stop(grace_s=60.0)


def start_locust_stack(server_ports: Mapping[str, int], workers: int, results_dir: Path, log_dir: Path,
                       extra_env: Mapping[str, str] | None = None) -> LocustStack:
    """The compose stack's master and ``workers`` workers, natively, against servers on loopback.

    ``server_ports`` maps each class to the port of a server running on 127.0.0.1 (started with
    :func:`start_service`); the master's web UI and worker ports are free ports. All of them reach
    the commands through the compose file's own variables, and service host names become 127.0.0.1.
    ``extra_env`` takes Locust's own variables for master and workers (``LOCUST_HEADLESS``,
    ``LOCUST_EXPECT_WORKERS``, ...); the master writes its results to ``results_dir``. The caller
    must ``stop()`` the stack.
    """
    env = {"BENCH_BIND": "127.0.0.1", "BENCH_WEB_PORT": str(free_port()), "BENCH_MASTER_PORT": str(free_port()),
           **{PORT_VARIABLES[name]: str(port) for name, port in server_ports.items()}}
    config = resolved(env=env)
    extra = dict(extra_env or {})
    master = start_service(config, "master", log_dir, {"LOCUST_RESULTS_DIR": str(results_dir), **extra})
    stack = LocustStack(master, web_url=f"http://127.0.0.1:{env['BENCH_WEB_PORT']}")
    try:
        for index in range(workers):
            stack.workers.append(start_service(config, "worker", log_dir / f"worker-{index}", extra))
    except BaseException:
        stack.stop()
        raise
    return stack


def _one_request(name: str, url: str, model: str) -> None:
    if name == "llm":
        body = {"model": model, "messages": [{"role": "user", "content": "hello from compose"}], "max_tokens": 4}
        resp = requests.post(f"{url}/v1/chat/completions", json=body, timeout=REQUEST_TIMEOUT_S)
        assert resp.status_code == 200, resp.text
        assert resp.json()["choices"][0]["message"]["content"]
    elif name == "embedding":
        resp = requests.post(f"{url}/v1/embeddings", json={"model": model, "input": ["a b c", "d e"]},
                             timeout=REQUEST_TIMEOUT_S)
        assert resp.status_code == 200, resp.text
        assert [len(item["embedding"]) > 0 for item in resp.json()["data"]] == [True, True]
    else:
        files = {"file": (CLIP.name, CLIP.read_bytes(), "audio/wav")}
        resp = requests.post(f"{url}/v1/audio/transcriptions", files=files, data={"model": model},
                             timeout=REQUEST_TIMEOUT_S)
        assert resp.status_code == 200, resp.text
        assert resp.json()["text"]


@dataclass
class CpuServers:
    """The default profile's servers, running natively: each class's process and loopback port."""

    processes: dict[str, ServerProcess]
    ports: dict[str, int]

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.ports[name]}"


@pytest.fixture(scope="module")
def cpu_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CpuServers]:
    """The default profile's three servers from their compose commands, on free ports, once for the tests
    that send them requests (each server imports torch and warms up: seconds of CPU); stopped at the end,
    and each must then have exited."""
    ports = {name: free_port() for name in SERVERS}
    config = resolved(env={"BENCH_BIND": "127.0.0.1", **{PORT_VARIABLES[n]: str(p) for n, p in ports.items()}})
    log_dir = tmp_path_factory.mktemp("compose-servers")
    started: dict[str, ServerProcess] = {}
    try:
        for name in SERVERS:
            started[name] = start_service(config, name, log_dir)
        servers = CpuServers(started, ports)
        for name in SERVERS:
            wait_healthy(started[name], f"{servers.url(name)}/health")
        yield servers
    finally:
        for process in started.values():
            process.stop()
    assert all(p.exit_code() is not None for p in started.values())


@pytest.mark.slow
def test_server_commands_serve_real_requests(cpu_servers: CpuServers) -> None:
    for name in SERVERS:
        url = cpu_servers.url(name)
        (card,) = requests.get(f"{url}/v1/models", timeout=30).json()["data"]
        _one_request(name, url, card["id"])
        metrics = requests.get(f"{url}/metrics", timeout=30)  # what Prometheus scrapes
        assert metrics.status_code == 200 and "# TYPE" in metrics.text


@pytest.mark.slow
@pytest.mark.skipif(Path("/dev/nvidiactl").exists(), reason="a GPU host: these would load GPU-sized models")
def test_gpu_server_commands_parse_and_ask_for_cuda(tmp_path: Path) -> None:
    # On a CPU host the gpu profile's servers cannot serve; they must get past every flag and stop
    # exactly at the missing device (exit 2, one line), not at a usage error.
    config = resolved("--profile", "gpu", env={"BENCH_BIND": "127.0.0.1"})
    started = {name: start_service(config, f"{name}-gpu", tmp_path) for name in SERVERS}
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while any(p.exit_code() is None for p in started.values()) and time.monotonic() < deadline:
            time.sleep(0.2)
        for name, process in started.items():
            log = process.log_path.read_text()
            assert process.exit_code() == 2, f"{name}: {log}"
            assert "CUDA is not available" in log and "unrecognized" not in log, f"{name}: {log}"
    finally:
        for process in started.values():
            process.stop()


@pytest.mark.slow
def test_exporter_command_runs(tmp_path: Path) -> None:
    # gpu profile only: here (no NVML) it must exit 2 with one line; on a GPU host it must serve /health
    port = free_port()
    config = resolved("--profile", "gpu", env={"BENCH_BIND": "127.0.0.1", "BENCH_EXPORTER_PORT": str(port)})
    exporter = start_service(config, "exporter", tmp_path)
    try:
        deadline = time.monotonic() + 120
        while exporter.exit_code() is None and time.monotonic() < deadline:
            try:
                if requests.get(f"http://127.0.0.1:{port}/health", timeout=5).status_code == 200:
                    return
            except requests.RequestException:
                time.sleep(0.2)
        assert exporter.exit_code() == 2, exporter.log_tail(20)
        assert "nothing to export" in exporter.log_tail(5)
    finally:
        exporter.stop()


@pytest.mark.slow
def test_the_stack_runs_a_campaign_with_two_workers(cpu_servers: CpuServers, tmp_path: Path) -> None:
    """The compose stack's own commands, natively: three CPU servers, the master (headless) and 2 workers."""
    results = tmp_path / "results"
    stack = start_locust_stack(cpu_servers.ports, 2, results, tmp_path / "locust", {
        "LOCUST_HEADLESS": "true", "LOCUST_ONLY_SUMMARY": "true", "LOCUST_EXPECT_WORKERS": "2",
        "LOCUST_REPEATS": "1"})
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while stack.master.exit_code() is None and time.monotonic() < deadline:
            time.sleep(0.5)
        assert stack.master.exit_code() == 0, stack.master.log_tail(40)
    finally:
        stack.stop()
    summary = json.loads((results / "summary.json").read_text())
    assert summary["status"]["status"] == "completed"
    with open_campaign(results / "results.sqlite") as reader:
        samples = read_samples(reader.db)  # every sample of the campaign
        problems = [event.detail["problems"] for event in reader.events("stage_accounting")]
    workers: dict[str, set[str]] = {}
    for sample in samples:
        workers.setdefault(sample.workload, set()).add(sample.worker)
    per_class = {name: len(names) for name, names in workers.items()}
    assert per_class == {"llm": 2, "embedding": 2, "asr": 2}
    assert problems and all(p == [] for p in problems)
