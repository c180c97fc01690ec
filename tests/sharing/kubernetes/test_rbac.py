"""The least-privilege RBAC of k8s/base is enough: a whole campaign runs as the plugin's ServiceAccount.

k8s/base/rbac.yaml is applied for real, a token of ServiceAccount bench/bench-plugin is requested, and a
campaign with an exclusive control and a time-slicing arm runs with a kubeconfig holding only that token,
in namespace bench with the device plugin's ConfigMap nvidia-device-plugin/bench-plugin-sharing (the
defaults). tests/k8s/test_manifests.py checks each verb with `kubectl auth can-i`; this checks that the
verbs listed are the ones the backend uses.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from harness import ROOT, run_locust
from k8s_backend_testlib import (
    CLASSES,
    POOL_LABEL,
    SHIPPED_KEYS,
    add_pool_node,
    assert_restored,
    create_config_map,
    leftovers,
    shared_state,
)
from k8s_cluster import Cluster, wait_for
from k8s_deviceplugin import DevicePluginStandIn

pytestmark = pytest.mark.slow

NAMESPACE = "bench"
DEVICE_PLUGIN_NAMESPACE = "nvidia-device-plugin"
RBAC = ROOT / "k8s" / "base" / "rbac.yaml"
ARMS = [{"name": "exclusive", "control": True, "sharing": "exclusive"},
        {"name": "time-slicing", "sharing": "time-slicing"}]


@pytest.fixture
def plugin_rbac(k8s_cluster: Cluster) -> Iterator[None]:
    """Namespaces bench and nvidia-device-plugin with k8s/base's RBAC in them, removed afterwards."""
    made = [ns for ns in (NAMESPACE, DEVICE_PLUGIN_NAMESPACE)
            if k8s_cluster.kubectl("get", "namespace", ns, check=False).returncode != 0]
    for ns in made:
        k8s_cluster.create_namespace(ns)
    k8s_cluster.kubectl("apply", "-f", str(RBAC))
    yield
    k8s_cluster.kubectl("delete", "-f", str(RBAC), "--ignore-not-found")
    for ns in made:
        k8s_cluster.delete_namespace(ns)
    for ns in made:  # gone, not terminating: the next test may make them again
        wait_for(lambda ns=ns: k8s_cluster.kubectl("get", "namespace", ns, check=False).returncode != 0,
                 f"namespace {ns} deleted", deadline_s=120)


def token_kubeconfig(cluster: Cluster, path: Path) -> Path:
    """A kubeconfig that authenticates as ServiceAccount bench/bench-plugin and nothing else."""
    token = cluster.kubectl("create", "token", "bench-plugin", "-n", NAMESPACE, "--duration", "1h").stdout.strip()
    admin = yaml.safe_load(cluster.kubeconfig.read_text())
    server = admin["clusters"][0]["cluster"]
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "test", "cluster": server}],
        "users": [{"name": "bench-plugin", "user": {"token": token}}],
        "contexts": [{"name": "bench-plugin", "context": {"cluster": "test", "user": "bench-plugin",
                                                          "namespace": NAMESPACE}}],
        "current-context": "bench-plugin"}))
    return path


def test_a_campaign_runs_as_the_plugins_service_account(k8s_cluster: Cluster, k8s_namespace: str,
                                                        plugin_rbac: None, tmp_path: Path,
                                                        synthetic_url: str) -> None:
    pool = k8s_namespace  # the test's own nodes; the campaign itself runs in namespace bench
    node = add_pool_node(k8s_cluster, pool, "gpu", gpus=2)
    create_config_map(k8s_cluster, DEVICE_PLUGIN_NAMESPACE)
    scenario = tmp_path / "s.yaml"
    scenario.write_text(yaml.safe_dump({
        "name": "k8s-rbac", "repeats": 1, "seed": 1, "readiness_timeout_s": 30, "drain_timeout_s": 10,
        "backend": "kubernetes",
        "kubernetes": {"node_selector": {POOL_LABEL: pool}, "rollout_timeout_s": 30},  # the shipped defaults else
        "warmup": {"requests": "none"},
        "classes": {name: CLASSES[name] for name in ("llm", "embedding")},
        "arms": ARMS,
        "stages": [{"duration_s": 2.0, "load": {"llm": 2, "embedding": 2}}],
    }, sort_keys=False))
    kubeconfig = token_kubeconfig(k8s_cluster, tmp_path / "bench-plugin.kubeconfig")
    before = shared_state(k8s_cluster, DEVICE_PLUGIN_NAMESPACE, [node])
    urls = [arg for name in ("llm", "embedding") for arg in ("--service-url", f"{name}={synthetic_url}")]
    with DevicePluginStandIn(k8s_cluster, [node], namespace=DEVICE_PLUGIN_NAMESPACE):
        done = run_locust(["-f", "locustfiles/mixed.py", "--scenario", str(scenario), "--results-dir",
                           str(tmp_path / "results"), "--backend", "kubernetes", "--kubeconfig", str(kubeconfig),
                           *urls], timeout=240)
        assert done.returncode == 0, done.stdout[-3000:]
        assert "campaign completed" in done.stdout
    assert leftovers(k8s_cluster, NAMESPACE) == []
    assert_restored(k8s_cluster, DEVICE_PLUGIN_NAMESPACE, before, [node])
    assert shared_state(k8s_cluster, DEVICE_PLUGIN_NAMESPACE, [node]).config == SHIPPED_KEYS
