"""The local backend's disruptions on real processes: synthetic servers behind fronts, restarted, killed and rolled
while requests keep coming; every phase recorded in order, and the requests see what each step should cost."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import gevent
import pytest
import requests
import yaml
from harness import RESTART_ORDER
from sharing_testlib import CPU, ROOT

from bench_plugin.results.samples import Sample
from bench_plugin.scenario import Disruption, load_scenario
from bench_plugin.sharing.local import LocalBackend
from bench_plugin.sharing.processes import port_of

READY_AFTER_S = 1.5
"""The synthetic server's /health answers 503 this long after it starts: a known cold start."""
LATENCY_MS = 20.0
"""Every synthetic embedding takes this long (ttft for llm)."""



def scenario_file(tmp_path: Path, second_start_fails: bool = False) -> Path:
    """day19 on synthetic servers with a known cold start; ``second_start_fails``: the embedding server's second
    start (a restart's new server) exits at once with code 3."""
    data = yaml.safe_load((ROOT / "scenarios" / "day19.yaml").read_text())
    command = [sys.executable, "-m", "bench_plugin.servers", "synthetic", "--host", "{host}", "--port", "{port}",
               "--model-name", "{model}", "--ready-after-s", str(READY_AFTER_S), "--latency-ms", str(LATENCY_MS),
               "--ttft-ms", str(LATENCY_MS), "--itl-ms", "1"]
    for name in data["classes"]:
        data["classes"][name]["server"] = {"kind": "command", "command": command}
    if second_start_fails:
        counter = tmp_path / "starts"
        data["classes"]["embedding"]["server"]["command"] = [
            "sh", "-c", f"n=$(cat {counter} 2>/dev/null || echo 0); n=$((n+1)); echo $n > {counter}; "
                        f"[ $n -eq 2 ] && exit 3; exec {' '.join(command)}"]
    data["disruption"] = {"kind": "restart", "at_s": 1, "classes": ["embedding"], "grace_s": 5}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


class Load:
    """Embedding requests through the front at a steady pace, each on a kept-alive session: what each got."""

    def __init__(self, url: str, model: str, every_s: float = 0.05) -> None:
        self.url, self.model, self.every_s = url, model, every_s
        self.results: list[tuple[float, bool, str]] = []
        self.session = requests.Session()
        self.greenlet = gevent.spawn(self._run)

    def _run(self) -> None:
        while True:
            sent = time.time()
            try:
                reply = self.session.post(self.url + "/v1/embeddings", json={"model": self.model, "input": ["a b"]},
                                          timeout=10)
                self.results.append((sent, reply.status_code == 200, str(reply.status_code)))
            except requests.RequestException as exc:
                self.results.append((sent, False, type(exc).__name__))
                self.session = requests.Session()
            gevent.sleep(max(0.0, sent + self.every_s - time.time()))

    def stop(self) -> list[tuple[float, bool, str]]:
        self.greenlet.kill()
        return self.results


def probe(backend: LocalBackend) -> Any:
    def send(name: str, url: str) -> Sample:
        model = backend.scenario.classes.get(name).model
        now = time.time()
        sample = Sample(workload=name, trial=0, segment=0, stage=-1, seq=0, item=-1, intended_s=now, sent_s=now,
                        end_s=0.0, ok=False, worker="test")
        try:
            reply = requests.post(url + "/v1/embeddings", json={"model": model, "input": ["probe"]}, timeout=5)
            sample.ok, sample.status = reply.status_code == 200, reply.status_code
        except requests.RequestException as exc:
            sample.error, sample.detail = "connection", str(exc)
        sample.end_s = time.time()
        return sample
    return send


@pytest.mark.parametrize("kind", ["rollout-restart", "restart", "kill"])
def test_each_step_replaces_the_server_behind_its_front_in_order(tmp_path: Path, kind: str) -> None:
    scenario = load_scenario(scenario_file(tmp_path))
    backend = LocalBackend(scenario, tmp_path / "logs")
    backend.devices = CPU
    arm = scenario.control
    steps: list[dict[str, Any]] = []
    try:
        placement = backend.apply(arm, ["llm", "embedding"], 1, 0)
        embedding = placement.classes["embedding"]
        assert embedding.server_url is not None and port_of(embedding.url) != port_of(embedding.server_url)
        assert set(backend.fronts) == {"llm", "embedding"}
        old = backend.server("embedding")
        assert old is not None
        deadline = time.time() + 60
        for name, where in placement.classes.items():  # each first server's cold start, through its front
            while not probe(backend)(name, where.url).ok:
                assert time.time() < deadline, f"{name}'s first server never answered"
                time.sleep(0.2)
        load = Load(embedding.url, scenario.classes.get("embedding").model)
        other = Load(placement.classes["llm"].url, scenario.classes.get("llm").model)
        gevent.sleep(1.0)
        # a drain takes well under a second; the grace is for a busy host, where an old server was once still
        # exiting 5 s after its SIGTERM (and was killed, which a graceful stop must not need)
        spec = Disruption(kind=kind, at_s=1, classes=["embedding"], grace_s=20)  # type: ignore[arg-type]
        backend.disrupt(spec, ["embedding"], lambda **step: steps.append(step), probe(backend))
        gevent.sleep(1.0)
        results, co_tenant = load.stop(), other.stop()

        actions = [step["action"] for step in steps]
        assert actions == RESTART_ORDER[kind], steps
        times = [step["t"] for step in steps]
        assert times == sorted(times), steps
        at = {step["action"]: step for step in steps}
        assert at["co-tenant"]["target"] == "class/llm" and at["co-tenant"]["survived"] is True
        assert at["healthy"]["t"] - at["spawn"]["t"] >= READY_AFTER_S  # the server's own signal, not a guess
        new = backend.server("embedding")
        assert new is not None and new.pid == at["spawn"]["pid"] != old.pid and old.exit_code() is not None
        assert old not in backend.running and backend.exited("embedding") is None
        assert at["stopped"]["exit_code"] == (-9 if kind == "kill" else 0)

        failed = [(t, why) for t, ok, why in results if not ok]
        if kind == "rollout-restart":
            # the new server took the new connections before the old one stopped; only a request sent on the one
            # kept-alive connection the old server held, as it closed it to drain, can fail (HTTP/1.1's race)
            assert sum(at["route"]["open"].values()) <= 2 and len(failed) <= 1, failed
            assert all(at["stop"]["t"] - 0.5 <= t <= at["stopped"]["t"] for t, _ in failed), failed
        else:
            down, up = at["refuse" if kind == "restart" else "kill"]["t"], at["route"]["t"]
            assert failed and all(down - 0.5 <= t <= up for t, _ in failed), (failed, down, up)
            assert up - down >= READY_AFTER_S
        assert all(ok for _, ok, _ in co_tenant), "the other class's server was never touched"
        assert [t for t, ok, _ in results if ok and t > at["route"]["t"]], "the new server answers through the front"
    finally:
        fronts = list(backend.fronts.values())
        backend.release()
    assert not backend.running and not backend.fronts
    assert all(front.process.poll() is not None for front in fronts)


def test_a_rollout_whose_new_server_never_answers_leaves_the_old_one_serving(tmp_path: Path) -> None:
    scenario = load_scenario(scenario_file(tmp_path, second_start_fails=True))
    backend = LocalBackend(scenario, tmp_path / "logs")
    backend.devices = CPU
    steps: list[dict[str, Any]] = []
    try:
        placement = backend.apply(scenario.control, ["embedding"], 1, 0)
        url = placement.classes["embedding"].url
        deadline = time.time() + 30
        while not probe(backend)("embedding", url).ok:
            assert time.time() < deadline
            time.sleep(0.2)
        old = backend.server("embedding")
        load = Load(url, scenario.classes.get("embedding").model)
        gevent.sleep(0.5)
        spec = Disruption(kind="rollout-restart", at_s=1, classes=["embedding"], grace_s=5)
        backend.disrupt(spec, ["embedding"], lambda **step: steps.append(step), probe(backend))
        gevent.sleep(0.5)
        results = load.stop()
        assert [step["action"] for step in steps] == ["start", "spawn", "error", "end"]
        assert "exited (code 3) before it was listening" in steps[2]["result"]
        assert backend.server("embedding") is old and old is not None and old.exit_code() is None
        assert backend.exited("embedding") is None and len(backend.running) == 1
        assert results and all(ok for _, ok, _ in results), "the old server went on serving"
    finally:
        backend.release()
