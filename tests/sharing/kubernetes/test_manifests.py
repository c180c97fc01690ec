"""The objects an arm becomes (manifests.py), the device plugin's config (deviceplugin.py) and what the backend
refuses before anything runs (checks.py): pure functions, checked on plain dicts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from k8s_backend_testlib import write_scenario

from bench_plugin.scenario import Scenario, ScenarioError, load_scenario
from bench_plugin.sharing.base import ApplyError
from bench_plugin.sharing.kubernetes import deviceplugin as dp
from bench_plugin.sharing.kubernetes.checks import check_arm, priority_conflict
from bench_plugin.sharing.kubernetes.manifests import arm_objects, gpu_resource, priority_class


def scenario(tmp_path: Path, arms: list[dict[str, Any]], **kwargs: Any) -> Scenario:
    path = write_scenario(tmp_path / "s.yaml", "bench", [{"name": "control", "control": True}, *arms], **kwargs)
    data = yaml.safe_load(path.read_text())
    data["allow_multiple_changes"] = True
    path.write_text(yaml.safe_dump(data))
    return load_scenario(path)


def objects(s: Scenario, arm: str) -> dict[str, dict[str, Any]]:
    found = arm_objects(s, s.kubernetes, s.arm(arm), s.classes.names(), namespace="bench", campaign="c1")
    return {f"{o['kind']}/{o['metadata']['name']}": o for o in found}


def test_each_sharing_mode_asks_its_gpu_resource(tmp_path: Path) -> None:
    mig = {"llm": {"device": "mig-3g.71gb"}, "embedding": {"device": "nvidia.com/mig-1g.18gb"}}
    s = scenario(tmp_path, [{"name": "ts", "sharing": "time-slicing"}, {"name": "mps", "sharing": "mps"},
                            {"name": "mig", "sharing": "mig", "classes": mig}], classes=("llm", "embedding"))
    wanted = {"control": ("nvidia.com/gpu", "nvidia.com/gpu"), "ts": ("nvidia.com/gpu.shared",) * 2,
              "mps": ("nvidia.com/gpu.shared",) * 2, "mig": ("nvidia.com/mig-3g.71gb", "nvidia.com/mig-1g.18gb")}
    for arm, resources in wanted.items():
        assert tuple(gpu_resource(s.arm(arm), n) for n in ("llm", "embedding")) == resources
        for name, resource in zip(("llm", "embedding"), resources, strict=True):
            container = objects(s, arm)[f"Deployment/bench-{name}"]["spec"]["template"]["spec"]["containers"][0]
            assert container["resources"] == {"requests": {resource: "1"}, "limits": {resource: "1"}}


def test_deployment_and_service_of_a_class(tmp_path: Path) -> None:
    s = scenario(tmp_path, [], section={"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists",
                                                         "effect": "NoSchedule"}], "image": "registry/bench:1"},
                 class_blocks={"llm": {"cpu": "4", "memory": "16Gi", "env": {"HF_HOME": "/cache"}}})
    found = objects(s, "control")
    assert sorted(found) == ["Deployment/bench-llm", "Service/bench-llm"]
    deployment, service = found["Deployment/bench-llm"], found["Service/bench-llm"]
    labels = {"app.kubernetes.io/managed-by": "bench-plugin", "app.kubernetes.io/name": "bench-llm",
              "bench-plugin/class": "llm", "bench-plugin/arm": "control", "bench-plugin/campaign": "c1"}
    assert deployment["metadata"] == {"name": "bench-llm", "namespace": "bench", "labels": labels}
    assert deployment["spec"]["replicas"] == 1 and deployment["spec"]["template"]["metadata"]["labels"] == labels
    pod = deployment["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"bench-test/pool": "bench"}
    assert pod["tolerations"] == [{"operator": "Exists", "key": "nvidia.com/gpu", "effect": "NoSchedule"}]
    assert "priorityClassName" not in pod and "affinity" not in pod
    [container] = pod["containers"]
    assert container["image"] == "registry/bench:1"
    assert container["command"] == ["python", "-m", "bench_plugin.servers", "llm", "--host", "0.0.0.0", "--port",
                                    "8000", "--size", "1b", "--model-name", "bench-synthetic", "--device", "cuda:0"]
    assert container["ports"] == [{"name": "http", "containerPort": 8000, "protocol": "TCP"}]
    assert container["readinessProbe"]["httpGet"] == {"path": "/health", "port": "http"}
    assert container["resources"]["requests"] == container["resources"]["limits"] == {
        "nvidia.com/gpu": "1", "cpu": "4", "memory": "16Gi"}
    assert {"name": "HF_HOME", "value": "/cache"} in container["env"]
    assert service["spec"]["selector"] == {"app.kubernetes.io/name": "bench-llm", "bench-plugin/campaign": "c1"}
    assert service["spec"]["ports"] == [{"name": "http", "port": 8000, "targetPort": "http", "protocol": "TCP"}]


def test_priority_and_affinity_arms(tmp_path: Path) -> None:
    priorities = {"llm": {"priority": "high"}, "embedding": {"priority": "low"}}
    s = scenario(tmp_path, [{"name": "prio", "classes": priorities},
                            {"name": "pinned", "classes": {"llm": {"node_labels": {"pool": "a", "zone": "z1"}}}}],
                 classes=("llm", "embedding"))
    found = objects(s, "prio")
    assert {k: (v["value"], v["preemptionPolicy"]) for k, v in found.items() if k.startswith("PriorityClass/")} == {
        "PriorityClass/bench-plugin-high": (1000000, "PreemptLowerPriority"),
        "PriorityClass/bench-plugin-low": (-1000, "Never")}
    assert found["PriorityClass/bench-plugin-high"]["metadata"]["labels"]["bench-plugin/campaign"] == "c1"
    spec = {n: found[f"Deployment/bench-{n}"]["spec"]["template"]["spec"] for n in ("llm", "embedding")}
    assert (spec["llm"]["priorityClassName"], spec["embedding"]["priorityClassName"]) == \
        ("bench-plugin-high", "bench-plugin-low")
    terms = objects(s, "pinned")["Deployment/bench-llm"]["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a"]},
                                           {"key": "zone", "operator": "In", "values": ["z1"]}]}]


def test_node_labels_are_one_variable_of_the_arm(tmp_path: Path) -> None:
    path = write_scenario(tmp_path / "s.yaml", "bench", [
        {"name": "control", "control": True},
        {"name": "both", "sharing": "time-slicing", "classes": {"llm": {"node_labels": {"pool": "a"}}}}])
    with pytest.raises(ScenarioError, match=r"changes 2 variables .*sharing, classes\.llm\.node_labels"):
        load_scenario(path)
    bad = write_scenario(tmp_path / "b.yaml", "bench", [
        {"name": "control", "control": True}, {"name": "x", "classes": {"llm": {"node_labels": {"pool": "a b"}}}}])
    with pytest.raises(ScenarioError, match=r"classes\.llm\.node_labels: label value 'a b'"):
        load_scenario(bad)


def test_the_kubernetes_section_defaults_and_refusals(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    data = yaml.safe_load(write_scenario(path, "bench", [{"name": "c", "control": True}]).read_text())
    del data["kubernetes"]
    path.write_text(yaml.safe_dump(data))
    section = load_scenario(path).kubernetes
    assert section is None  # the backend then uses the defaults
    data["kubernetes"] = {}
    path.write_text(yaml.safe_dump(data))
    defaults = load_scenario(path).kubernetes
    assert defaults is not None
    assert (defaults.namespace, defaults.image, defaults.rollout_timeout_s) == ("bench", "bench-plugin:0.1.0", 300)
    assert (defaults.device_plugin.config_map, defaults.device_plugin.namespace, defaults.device_plugin.replicas) == \
        ("bench-plugin-sharing", "nvidia-device-plugin", 4)
    for section, message in (({"device_plugin": {"replicas": 1}}, "kubernetes.device_plugin.replicas"),
                             ({"namespace": "Bench"}, "kubernetes.namespace: must be a DNS-1123 label"),
                             ({"nodeSelector": {}}, "kubernetes.nodeSelector: unknown key")):
        data["kubernetes"] = section
        path.write_text(yaml.safe_dump(data))
        with pytest.raises(ScenarioError, match=message):
            load_scenario(path)
    data["kubernetes"] = {}
    data["classes"]["llm"]["kubernetes"] = {"cpu": "four"}
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ScenarioError, match=r"classes\.llm\.kubernetes\.cpu: 'four' is not a Kubernetes quantity"):
        load_scenario(path)


@pytest.mark.parametrize(("arm", "message"), [
    ({"name": "m", "sharing": "mig"}, "classes.llm.device: sharing 'mig' needs the MIG resource"),
    ({"name": "m", "sharing": "mig", "classes": {"llm": {"device": "cuda:0"}}}, "'cuda:0' is not a MIG resource"),
    ({"name": "d", "classes": {"llm": {"device": "cuda:1"}}}, "the device plugin chooses a pod's GPU"),
    ({"name": "t", "sharing": "mps", "classes": {"llm": {"thread_percentage": 50}}}, "MPS daemon sets each replica"),
    ({"name": "ends-with-dash-", "sharing": "mps"}, "the arm's name labels its objects"),
    ({"name": "x" * 60, "sharing": "mps"}, "at most 63"),
    ({"name": "p", "cpu_affinity": {"llm": "0-3"}}, "cpu_affinity.llm: CPU affinity pins server processes of"),
])
def test_arms_the_backend_refuses(tmp_path: Path, arm: dict[str, Any], message: str) -> None:
    s = scenario(tmp_path, [arm])
    with pytest.raises(ApplyError, match="arm ") as info:
        check_arm(s, s.arm(arm["name"]))
    assert message in str(info.value)


def test_a_command_server_needs_its_pod_command(tmp_path: Path) -> None:
    path = write_scenario(tmp_path / "s.yaml", "bench", [{"name": "c", "control": True}])
    data = yaml.safe_load(path.read_text())
    data["classes"]["llm"]["server"] = {"kind": "command", "command": ["{python}", "serve.py", "{port}"]}
    path.write_text(yaml.safe_dump(data))
    s = load_scenario(path)
    with pytest.raises(ApplyError, match=r"classes\.llm\.server is a command line for this host"):
        check_arm(s, s.control)
    data["classes"]["llm"]["kubernetes"] = {"command": ["vllm", "serve"], "args": ["--port", "8000"]}
    path.write_text(yaml.safe_dump(data))
    s = load_scenario(path)
    check_arm(s, s.control)
    [container] = objects(s, "c")["Deployment/bench-llm"]["spec"]["template"]["spec"]["containers"]
    assert (container["command"], container["args"]) == (["vllm", "serve"], ["--port", "8000"])


def test_the_sharing_config_is_the_device_plugins_format() -> None:
    for sharing, section in (("time-slicing", "timeSlicing"), ("mps", "mps")):
        assert yaml.safe_load(dp.config_text(sharing, 4)) == {"version": "v1", "sharing": {section: {
            "renameByDefault": True, "failRequestsGreaterThanOne": True,
            "resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}}}
    assert dp.config_key("ts") == "bench-plugin-ts"


def node(allocatable: dict[str, str], count: str | None = "2", strategy: str | None = None) -> dict[str, Any]:
    labels = {"nvidia.com/gpu.product": "NVIDIA-H200"}
    if count is not None:
        labels["nvidia.com/gpu.count"] = count
    if strategy is not None:
        labels["nvidia.com/gpu.sharing-strategy"] = strategy
    return {"metadata": {"name": "n", "labels": labels}, "status": {"allocatable": allocatable}}


def test_when_a_node_serves_an_arm() -> None:
    shared = {"nvidia.com/gpu.shared": "8"}
    assert dp.not_yet_advertised(node(shared), "time-slicing", 4) is None
    assert dp.not_yet_advertised(node({"nvidia.com/gpu": "2"}), "time-slicing", 4) == \
        "allocatable nvidia.com/gpu.shared is 0, wanted 8 = 2 GPUs x 4 replicas"
    assert dp.not_yet_advertised(node(shared, strategy="time-slicing"), "mps", 4) == \
        "label nvidia.com/gpu.sharing-strategy is 'time-slicing', wanted 'mps'"
    assert dp.not_yet_advertised(node({"nvidia.com/gpu.shared": "3"}, count=None), "mps", 4) is None
    assert dp.not_yet_advertised(node({"nvidia.com/gpu": "2"}, strategy="none"), None, 4) is None
    assert dp.not_yet_advertised(node(shared), None, 4) == "allocatable nvidia.com/gpu is 0, wanted 2"
    assert dp.is_gpu_node(node({})) and not dp.is_gpu_node({"metadata": {"labels": {}}, "status": {}})


def test_arm_names_fit_their_labels(tmp_path: Path) -> None:
    s = scenario(tmp_path, [{"name": "a" * 50, "sharing": "mps"}])
    check_arm(s, s.arm("a" * 50))  # bench-plugin-<50 letters> is 63 characters: the longest label value
    assert len(dp.config_key(s.arm("a" * 50).name)) == 63


def test_an_existing_priority_class_serves_only_with_the_same_value_and_policy() -> None:
    wanted = priority_class("low", "c1")
    same = {"metadata": {"name": "bench-plugin-low"}, "value": -1000, "preemptionPolicy": "Never"}
    assert priority_conflict(same, wanted) is None
    default_policy = {"metadata": {"name": "bench-plugin-low"}, "value": -1000}  # the API's default: PreemptLower...
    assert priority_conflict(default_policy, wanted) == (
        "PriorityClass bench-plugin-low exists with value -1000 and preemptionPolicy PreemptLowerPriority (not made "
        "by bench-plugin); bench-plugin needs value -1000 and Never: delete or rename it")
