"""Ctrl-C in the middle of a kubernetes campaign: exit status 130, and the cluster put back as it was.

The campaign is interrupted while a time-slicing arm is applied (the device plugin switched, the nodes
relabelled, the Deployments Ready, a long stage running): everything it made is deleted and every label
and ConfigMap key it changed is put back before the process ends.
"""

from __future__ import annotations

import signal
import sqlite3
from pathlib import Path

import pytest
from harness import start_locust, stop_process
from k8s_backend_testlib import (
    ObjectWatch,
    add_pool_node,
    assert_restored,
    campaign_args,
    create_config_map,
    shared_state,
    write_scenario,
)
from k8s_cluster import Cluster, wait_for
from k8s_deviceplugin import CONFIG_LABEL, DevicePluginStandIn

from bench_plugin.results.store import StoreError, open_campaign

pytestmark = pytest.mark.slow

CLASSES = ("llm", "embedding")


def stages_started(db_path: Path) -> int:
    """How many stages the campaign being written to ``db_path`` has started (0 before the store exists)."""
    if not db_path.exists():
        return 0
    try:
        with open_campaign(db_path) as reader:
            return sum(len(trial.stages) for trial in reader.trials())
    except (StoreError, sqlite3.OperationalError):  # the store is still being created
        return 0


def test_ctrl_c_mid_campaign_restores_the_cluster(k8s_cluster: Cluster, k8s_namespace: str, tmp_path: Path,
                                                  synthetic_url: str) -> None:
    ns = k8s_namespace
    node = add_pool_node(k8s_cluster, ns, "gpu", gpus=2)
    create_config_map(k8s_cluster, ns)
    arms = [{"name": "time-slicing", "sharing": "time-slicing"},
            {"name": "exclusive", "control": True, "sharing": "exclusive"}]
    scenario = write_scenario(tmp_path / "s.yaml", ns, arms, classes=CLASSES, stage_s=60)
    before = shared_state(k8s_cluster, ns, [node])
    log = tmp_path / "locust.log"

    with DevicePluginStandIn(k8s_cluster, [node], namespace=ns), ObjectWatch(k8s_cluster, ns) as watch:
        proc = start_locust(campaign_args(scenario, tmp_path / "results", k8s_cluster, synthetic_url, CLASSES,
                                          "--namespace", ns), log)
        try:
            def applied() -> bool:
                labels = k8s_cluster.node(node)["metadata"]["labels"]
                ready = [p for p in k8s_cluster.core.list_namespaced_pod(
                    ns, label_selector="app.kubernetes.io/managed-by=bench-plugin").items
                    if any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or [])]
                return labels.get(CONFIG_LABEL) == "bench-plugin-time-slicing" and len(ready) == len(CLASSES)

            wait_for(applied, "the time-slicing arm applied", 90)
            wait_for(lambda: stages_started(tmp_path / "results" / "results.sqlite") > 0, "the stage started", 60)
            proc.send_signal(signal.SIGINT)
            code = stop_process(proc, timeout=90)
        finally:
            if proc.poll() is None:
                proc.kill()
        output = log.read_text()
        assert code == 130, output[-3000:]
        assert "Traceback" not in output, output[-3000:]
        assert_restored(k8s_cluster, ns, before, [node])
    assert ("bench-llm", "time-slicing") in watch.deployments
    assert ("bench-llm", "exclusive") not in watch.deployments  # it stopped in the first trial
