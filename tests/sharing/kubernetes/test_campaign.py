"""Whole campaigns on the kubernetes backend, through the real `locust` command and a real control plane.

An exclusive control and a time-slicing arm: the Deployments ask whole GPUs, then shared replicas once
the device plugin (a stand-in here: tests/k8s_deviceplugin.py) advertises them; afterwards the cluster
holds nothing of the plugin's and every label and ConfigMap key is as before. An arm asking more GPUs
than are free (the cluster's other work holds one) fails its trial with the scheduler's own
FailedScheduling message, and the run still puts everything back; one asking more than the nodes
allocate at all is refused by the preflight before anything is created.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from harness import run_locust
from k8s_backend_testlib import (
    SHIPPED_KEYS,
    ObjectWatch,
    add_pool_node,
    assert_restored,
    campaign_args,
    create_config_map,
    filler,
    shared_state,
    write_scenario,
)
from k8s_cluster import Cluster, wait_for
from k8s_deviceplugin import CONFIG_LABEL, DevicePluginStandIn

from bench_plugin.results.store import open_campaign

pytestmark = pytest.mark.slow

CLASSES = ("llm", "embedding")
ARMS = [{"name": "exclusive", "control": True, "sharing": "exclusive"},
        {"name": "time-slicing", "sharing": "time-slicing"}]


def gpu_limits(spec: dict) -> tuple[dict, dict]:
    resources = spec["containers"][0]["resources"]
    return ({k: v for k, v in resources["requests"].items() if k.startswith("nvidia.com/")},
            {k: v for k, v in resources["limits"].items() if k.startswith("nvidia.com/")})


def test_exclusive_then_time_slicing_campaign(k8s_cluster: Cluster, k8s_namespace: str, tmp_path: Path,
                                              synthetic_url: str) -> None:
    ns = k8s_namespace
    node = add_pool_node(k8s_cluster, ns, "gpu", gpus=2, labels={CONFIG_LABEL: "exclusive"})
    create_config_map(k8s_cluster, ns)
    scenario = write_scenario(tmp_path / "s.yaml", ns, ARMS, classes=CLASSES)
    before = shared_state(k8s_cluster, ns, [node])

    with DevicePluginStandIn(k8s_cluster, [node], namespace=ns) as plugin, ObjectWatch(k8s_cluster, ns) as watch:
        done = run_locust(campaign_args(scenario, tmp_path / "results", k8s_cluster, synthetic_url, CLASSES,
                                        "--namespace", ns), timeout=180)
        assert done.returncode == 0, done.stdout[-3000:]
        assert_restored(k8s_cluster, ns, before, [node])
        wait_for(lambda: k8s_cluster.node(node)["status"]["allocatable"].get("nvidia.com/gpu") == "2",
                 "two whole GPUs advertised again", 30)

    summary = json.loads((tmp_path / "results" / "summary.json").read_text())
    trials = {t["arm"]: t for t in summary["trials"]}
    assert [t["status"] for t in summary["trials"]] == ["completed", "completed"]
    wanted = {"exclusive": {"nvidia.com/gpu": "1"}, "time-slicing": {"nvidia.com/gpu.shared": "1"}}
    for arm, resources in wanted.items():
        for name in CLASSES:
            # what the cluster ran, as the backend read it back from the pod
            where = trials[arm]["placement"][name]
            assert where["resources"] == resources and where["node"] == node
            assert where["pod"].startswith(f"{ns}/bench-{name}-") and where["url"] == synthetic_url
            # what the Deployment asked, as seen during the run
            spec = watch.pod_spec(f"bench-{name}", arm)
            assert gpu_limits(spec) == (resources, resources)
            assert spec["containers"][0]["readinessProbe"]["httpGet"] == {"path": "/health", "port": "http",
                                                                          "scheme": "HTTP"}
            assert spec["containers"][0]["command"][:4] == ["python", "-m", "bench_plugin.servers", name]
            assert spec["nodeSelector"] == {"bench-test/pool": ns}
    deployment = watch.deployments[("bench-llm", "time-slicing")]
    assert deployment["metadata"]["labels"] == {
        "app.kubernetes.io/managed-by": "bench-plugin", "app.kubernetes.io/name": "bench-llm",
        "bench-plugin/class": "llm", "bench-plugin/arm": "time-slicing",
        "bench-plugin/campaign": summary["conditions"]["backend"]["campaign"]}
    # the device plugin was switched to the arm's key, then back to the node's own
    assert [key for _, key in plugin.switches] == ["exclusive", "bench-plugin-time-slicing", "exclusive"]
    backend = summary["conditions"]["backend"]
    assert backend["backend"] == "kubernetes" and backend["server_version"].startswith("v1.34")
    assert backend["nodes"] == [{"name": node, "gpu_product": "NVIDIA-H200", "gpu_count": "2",
                                 "device_plugin_config": "exclusive", "allocatable": {"nvidia.com/gpu": "2"}}]
    # the devices charged: two whole GPUs for the control, one shared GPU for the arm
    assert {arm: len({w["gpu"] for w in t["placement"].values()}) for arm, t in trials.items()} == \
        {"exclusive": 2, "time-slicing": 1}


def test_arm_short_of_gpus_fails_with_the_schedulers_reason(k8s_cluster: Cluster, k8s_namespace: str,
                                                             tmp_path: Path, synthetic_url: str) -> None:
    ns = k8s_namespace
    node = add_pool_node(k8s_cluster, ns, "gpu", gpus=2)
    # the cluster's other work holds one of the two GPUs: the preflight passes (the node allocates 2, what
    # the control asks), and the scheduler, which sees the GPU in use, has the last word
    k8s_cluster.core.create_namespaced_pod(ns, filler("filler-0", node))
    wait_for(lambda: k8s_cluster.core.read_namespaced_pod("filler-0", ns).status.phase == "Running", "filler Running")
    create_config_map(k8s_cluster, ns)
    # the shared arm runs first (it fits: 4 replicas a GPU), then the exclusive control asks 2 whole GPUs
    arms = [ARMS[1], ARMS[0]]
    scenario = write_scenario(tmp_path / "s.yaml", ns, arms, classes=CLASSES, section={"rollout_timeout_s": 4})
    before = shared_state(k8s_cluster, ns, [node])

    with DevicePluginStandIn(k8s_cluster, [node], namespace=ns):
        done = run_locust(campaign_args(scenario, tmp_path / "results", k8s_cluster, synthetic_url, CLASSES,
                                        "--namespace", ns), timeout=180, report=True)
        assert done.returncode == 2, done.stdout[-3000:]
        assert_restored(k8s_cluster, ns, before, [node])

    failure = next(line for line in done.stdout.splitlines() if line.startswith("bench_plugin: error: campaign"))
    assert "trial 2 (arm exclusive, repeat 1)" in failure, failure
    assert f": pod {ns}/bench-" in failure and " Pending: 0/1 nodes are available: 1 Insufficient nvidia.com/gpu" \
        in failure, failure
    trials = json.loads((tmp_path / "results" / "summary.json").read_text())["trials"]
    assert [(t["arm"], t["status"]) for t in trials] == [("time-slicing", "completed"), ("exclusive", "failed")]
    assert "Insufficient nvidia.com/gpu" in trials[1]["reason"]
    assert shared_state(k8s_cluster, ns, [node]).config == SHIPPED_KEYS
    assert k8s_cluster.core.read_namespaced_pod("filler-0", ns).status.phase == "Running"  # not the plugin's
    # the pod timeline: the scheduler's own message on the failed trial's pods, in the store and the summary
    pods = trials[1]["pods"]
    pending = [pod for pod in pods if pod["failed_scheduling"]]
    # each stayed Pending until the trial's teardown: never bound, or bound only once the teardown had deleted
    # a sibling and freed its GPU (the scheduler may bind it before its own deletion; timestamps are whole seconds)
    teardown = min((pod["deleted_s"] for pod in pods if pod["deleted_s"] is not None), default=None)
    assert pending and all(pod["pending_until"] in ("deleted", "trial end")
                           or (teardown is not None and pod["scheduled_s"] >= teardown) for pod in pending), pods
    assert any("Insufficient nvidia.com/gpu" in reason for pod in pending for reason in pod["failed_scheduling"])
    assert "Insufficient nvidia.com/gpu" in pending[0]["first_failed_scheduling"]
    summary = json.loads((tmp_path / "results" / "summary.json").read_text())
    assert any("Insufficient nvidia.com/gpu" in r for r in summary["arms"]["exclusive"]["pods"]["reasons"])
    assert all(pod["ready_s"] is not None for pod in trials[0]["pods"])  # the shared arm's pods ran
    with open_campaign(tmp_path / "results" / "results.sqlite") as reader:
        kinds = {event.kind for event in reader.pod_events(2)}
    assert {"created", "failed_scheduling", "deleted"} <= kinds, kinds
    assert "filler-0" not in {pod["pod"] for trial in trials for pod in trial["pods"]}  # only the plugin's pods
    report = (tmp_path / "results" / "report.md").read_text()
    assert "Insufficient nvidia.com/gpu" in report


def test_an_arm_the_nodes_can_never_hold_is_refused_by_the_preflight(k8s_cluster: Cluster, k8s_namespace: str,
                                                                    tmp_path: Path, synthetic_url: str) -> None:
    ns = k8s_namespace
    node = add_pool_node(k8s_cluster, ns, "gpu", gpus=1)
    create_config_map(k8s_cluster, ns)
    scenario = write_scenario(tmp_path / "s.yaml", ns, [ARMS[0]], classes=CLASSES)
    before = shared_state(k8s_cluster, ns, [node])
    watch = ObjectWatch(k8s_cluster, ns)
    with watch, DevicePluginStandIn(k8s_cluster, [node], namespace=ns):
        done = run_locust(campaign_args(scenario, tmp_path / "results", k8s_cluster, synthetic_url, CLASSES,
                                        "--namespace", ns), timeout=180)
        assert done.returncode == 2, done.stdout[-3000:]
        assert_restored(k8s_cluster, ns, before, [node])
    failure = next(line for line in done.stdout.splitlines() if line.startswith("bench_plugin: error:"))
    assert "arm 'exclusive': preflight: Deployment " in failure, failure  # at the start, before any trial
    assert "2 in total with bench-embedding (1); the nodes they may use allocate 1" in failure, failure
    assert not watch.deployments, "the preflight refuses before anything is created"
    assert "Shape test starting" not in done.stdout  # no load was sent
    assert sum("preflight: " in line for line in done.stdout.splitlines()) >= 1


def test_a_label_left_by_an_earlier_campaign_is_refused(k8s_cluster: Cluster, k8s_namespace: str, tmp_path: Path,
                                                        synthetic_url: str) -> None:
    ns = k8s_namespace
    node = add_pool_node(k8s_cluster, ns, "gpu", gpus=2, labels={CONFIG_LABEL: "bench-plugin-time-slicing"})
    create_config_map(k8s_cluster, ns)
    scenario = write_scenario(tmp_path / "s.yaml", ns, ARMS, classes=CLASSES)
    before = shared_state(k8s_cluster, ns, [node])

    done = run_locust(campaign_args(scenario, tmp_path / "results", k8s_cluster, synthetic_url, CLASSES,
                                    "--namespace", ns), timeout=120)
    assert done.returncode == 2, done.stdout[-3000:]
    [line] = [line for line in done.stdout.splitlines() if line.startswith("bench_plugin: error:")]
    assert f"node {node} has {CONFIG_LABEL}=bench-plugin-time-slicing, left by an earlier bench-plugin campaign" \
        in line, line
    assert shared_state(k8s_cluster, ns, [node]) == before
