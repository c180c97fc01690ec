"""k8s/: every kustomization builds and passes a server-side dry-run on the real control plane, the RBAC is
least privilege (applied for real, asked with `kubectl auth can-i`), the experiment ConfigMap loads as the
plugin loads it, and the device plugin's configs follow its own format.

What a dry-run proves: the API server accepted every object, field by field (--validate=strict: an
unknown or misspelt field is an error), with its defaulting and validation (extended resources with
requests equal to limits, probes naming a container port, PodDisruptionBudget policies). What it cannot:
that an image pulls, that a GPU is there, that the device plugin shares one; that is for a GPU cluster.
The namespaces the manifests go into are created for real (a dry-run of a Namespace creates nothing, so
objects in it would be refused) and removed afterwards, with whatever RBAC the tests applied.
"""

from __future__ import annotations

import functools
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import k8s_plugin_config as dpc
import pytest
import yaml
from k8s_cluster import Cluster, bin_dir, wait_for
from kubernetes.client.rest import ApiException

from bench_plugin.analysis.planning import sample_warnings
from bench_plugin.scenario import load_scenario
from bench_plugin.scenario.loader import scenario_sha256

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "k8s"
NAMESPACES = ("bench", "nvidia-device-plugin")
SA = "system:serviceaccount:bench:bench-plugin"
CLASSES = ("llm", "embedding", "asr")
RBAC_KINDS = {"ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"}

# What k8s/base/rbac.yaml's comments say the plugin may do: (namespace or None for cluster-scoped,
# API group, resource, resourceNames, verbs). The Roles must grant exactly this.
GRANTED: tuple[tuple[str | None, str, str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("bench", "apps", "deployments", (), ("create", "get", "list", "watch", "patch", "delete")),
    ("bench", "", "pods", (), ("get", "list", "watch")),
    ("bench", "", "pods/eviction", (), ("create",)),
    ("bench", "", "events", (), ("get", "list", "watch")),
    ("bench", "", "services", (), ("create", "get", "list", "delete")),
    ("bench", "apps", "replicasets", (), ("list",)),
    ("bench", "policy", "poddisruptionbudgets", (), ("get", "list", "watch")),
    (None, "", "nodes", (), ("get", "list", "watch", "patch")),
    (None, "scheduling.k8s.io", "priorityclasses", (), ("get", "list", "create", "delete")),
    (None, "", "namespaces", ("bench",), ("get",)),
    ("nvidia-device-plugin", "", "configmaps", ("bench-plugin-sharing",), ("get", "patch")),
)
# `kubectl auth can-i` arguments that must be refused.
REFUSED = (
    ("get", "secrets", "-n", "bench"),
    ("list", "secrets", "--all-namespaces"),
    ("delete", "nodes"),
    ("update", "nodes"),
    ("create", "deployments.apps", "-n", "kube-system"),
    ("patch", "configmaps/another-config", "-n", "nvidia-device-plugin"),
    ("patch", "configmaps", "-n", "nvidia-device-plugin"),
    ("get", "configmaps", "-n", "bench"),
    ("update", "deployments.apps", "-n", "bench"),
    ("create", "pods", "-n", "bench"),
    ("delete", "pods", "-n", "bench"),
    ("create", "pods", "--subresource=exec", "-n", "bench"),
    ("create", "clusterrolebindings.rbac.authorization.k8s.io"),
    ("impersonate", "serviceaccounts", "-n", "bench"),
)


def kustomization_dirs() -> dict[Path, str]:
    """Every directory under k8s/ with a kustomization.yaml -> its kind (Kustomization or Component)."""
    found = {}
    for file in sorted(K8S.rglob("kustomization.yaml")):
        found[file.parent] = (yaml.safe_load(file.read_text()) or {}).get("kind", "Kustomization")
    return found


KUSTOMIZATIONS = [d for d, kind in kustomization_dirs().items() if kind == "Kustomization"]


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


@functools.cache
def build(directory: Path) -> str:
    """`kubectl kustomize DIR` with the test cluster's kubectl (kustomize is built into it)."""
    done = subprocess.run([str(bin_dir() / "kubectl"), "kustomize", str(directory)], capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, f"kubectl kustomize {_rel(directory)}: {done.stderr.strip()}"
    return done.stdout


def objects(directory: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(build(directory)) if doc]


def find(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    matches = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(matches) == 1, f"{kind} {name}: {len(matches)} in the build"
    return matches[0]


def container(deployment: dict[str, Any]) -> dict[str, Any]:
    [only] = deployment["spec"]["template"]["spec"]["containers"]
    return dict(only)


@pytest.fixture(scope="module")
def namespaces(k8s_cluster: Cluster) -> Iterator[Cluster]:
    """bench and nvidia-device-plugin, created for real where missing; those it created are deleted after."""
    created = []
    for name in NAMESPACES:
        try:
            k8s_cluster.core.read_namespace(name)
        except ApiException as error:
            if error.status != 404:
                raise
            k8s_cluster.create_namespace(name)
            created.append(name)
    yield k8s_cluster
    for name in created:
        k8s_cluster.delete_namespace(name)
    for name in created:
        wait_for(functools.partial(namespace_gone, k8s_cluster, name), f"namespace {name} deleted")


def namespace_gone(cluster: Cluster, name: str) -> bool:
    try:
        cluster.core.read_namespace(name)
    except ApiException as error:
        if error.status == 404:
            return True
        raise
    return False


# -- every kustomization ---------------------------------------------------------------------------------


def test_every_component_is_built_by_some_kustomization() -> None:
    dirs = kustomization_dirs()
    components = {d for d, kind in dirs.items() if kind == "Component"}
    assert components, "k8s/examples has components"
    used = set()
    for directory in KUSTOMIZATIONS:
        spec = yaml.safe_load((directory / "kustomization.yaml").read_text())
        used |= {(directory / c).resolve() for c in spec.get("components", [])}
    assert components <= used, f"components no kustomization builds: {sorted(map(_rel, components - used))}"
    assert {_rel(d) for d in KUSTOMIZATIONS} >= {"k8s/base", "k8s/servers", "k8s/device-plugin",
                                                 "k8s/examples/vllm", "k8s/examples/tei"}


@pytest.mark.parametrize("directory", KUSTOMIZATIONS, ids=_rel)
def test_kustomization_passes_a_server_side_dry_run(namespaces: Cluster, directory: Path) -> None:
    docs = objects(directory)
    done = namespaces.kubectl("apply", "--dry-run=server", "--validate=strict", "-f", "-", input=build(directory),
                              check=False)
    assert done.returncode == 0, f"{_rel(directory)}: {done.stderr.strip()}"
    lines = done.stdout.strip().splitlines()
    assert len(lines) == len(docs) and all(line.endswith("(server dry run)") for line in lines), done.stdout


def test_the_dry_run_refuses_what_the_api_server_refuses(namespaces: Cluster) -> None:
    """The check has teeth: a GPU limit without an equal request, and a misspelt field, are refused."""
    docs = objects(K8S / "servers")
    llm = find(docs, "Deployment", "bench-llm")
    resources = llm["spec"]["template"]["spec"]["containers"][0]["resources"]
    resources["requests"]["nvidia.com/gpu"] = "2"
    done = namespaces.kubectl("apply", "--dry-run=server", "-f", "-", input=yaml.safe_dump(llm), check=False)
    assert done.returncode != 0 and "must be equal to nvidia.com/gpu limit" in done.stderr, done.stderr

    pdb = find(docs, "PodDisruptionBudget", "bench-llm")
    pdb["spec"]["unhealthyPodEvictionPolicies"] = pdb["spec"].pop("unhealthyPodEvictionPolicy")
    done = namespaces.kubectl("apply", "--dry-run=server", "--validate=strict", "-f", "-",
                              input=yaml.safe_dump(pdb), check=False)
    assert done.returncode != 0 and "unknown field" in done.stderr, done.stderr


# -- RBAC ------------------------------------------------------------------------------------------------


def rbac_objects() -> list[dict[str, Any]]:
    return [d for d in objects(K8S / "base") if d["kind"] in RBAC_KINDS]


def test_rbac_grants_exactly_what_its_comments_list() -> None:
    granted = set()
    for role in (d for d in rbac_objects() if d["kind"] in ("Role", "ClusterRole")):
        namespace = role["metadata"].get("namespace") if role["kind"] == "Role" else None
        for rule in role["rules"]:
            assert set(rule) <= {"apiGroups", "resources", "resourceNames", "verbs"}, rule
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    granted.add((namespace, group, resource, tuple(rule.get("resourceNames", ())),
                                 tuple(rule["verbs"])))
            assert "*" not in str(rule), f"a wildcard in {role['kind']} {role['metadata']['name']}: {rule}"
    assert granted == set(GRANTED)
    assert not any("secrets" in entry[2] for entry in granted)


def test_every_rbac_rule_carries_a_comment() -> None:
    lines = (K8S / "base" / "rbac.yaml").read_text().splitlines()
    rules = [i for i, line in enumerate(lines) if line.strip().startswith("- apiGroups:")]
    assert len(rules) == len(GRANTED)
    for i in rules:
        assert lines[i - 1].strip().startswith("#"), f"rbac.yaml line {i + 1}: a rule without its comment"


@pytest.fixture(scope="module")
def rbac_applied(namespaces: Cluster) -> Iterator[Cluster]:
    """k8s/base's ServiceAccount, Roles and bindings applied for real; removed after (those it created)."""
    text = yaml.safe_dump_all(rbac_objects())
    existed = set(namespaces.kubectl("get", "-f", "-", "-o", "name", "--ignore-not-found", input=text)
                  .stdout.split())
    namespaces.kubectl("apply", "-f", "-", input=text)
    yield namespaces
    mine = [d for d in rbac_objects() if _object_name(d) not in existed]
    if mine:
        namespaces.kubectl("delete", "-f", "-", "--ignore-not-found", "--wait=false", input=yaml.safe_dump_all(mine))


def _object_name(doc: dict[str, Any]) -> str:
    group = doc["apiVersion"].split("/")[0] if "/" in doc["apiVersion"] else ""
    kind = doc["kind"].lower() + (f".{group}" if group else "")
    return f"{kind}/{doc['metadata']['name']}"


def can_i(cluster: Cluster, *args: str) -> bool:
    done = cluster.kubectl("auth", "can-i", *args, f"--as={SA}", check=False)
    assert done.stdout.strip() in ("yes", "no"), f"can-i {' '.join(args)}: {done.stdout} {done.stderr}"
    return done.stdout.strip() == "yes"


def granted_questions() -> list[tuple[str, ...]]:
    """One `kubectl auth can-i` question per verb and resource of GRANTED."""
    questions = []
    for namespace, group, resource, names, verbs in GRANTED:
        base, _, sub = resource.partition("/")
        target = f"{base}.{group}" if group else base
        for verb in verbs:
            for name in names or ("",):
                args = [verb, f"{target}/{name}" if name else target]
                if sub:
                    args.append(f"--subresource={sub}")
                if namespace:
                    args += ["-n", namespace]
                questions.append(tuple(args))
    return questions


def test_the_plugin_can_do_each_thing_its_rbac_lists(rbac_applied: Cluster) -> None:
    questions = granted_questions()
    # the authorizer learns of new bindings through its informers: wait for the first to show
    wait_for(lambda: can_i(rbac_applied, *questions[0]), f"can-i {' '.join(questions[0])} for {SA}", 30)
    with ThreadPoolExecutor(max_workers=4) as pool:
        answers = dict(zip(questions, pool.map(lambda q: can_i(rbac_applied, *q), questions), strict=True))
    assert [q for q, yes in answers.items() if not yes] == []
    assert len(questions) == sum(len(v) * max(1, len(n)) for _, _, _, n, v in GRANTED)


def test_the_plugin_cannot_do_what_it_must_not(rbac_applied: Cluster) -> None:
    wait_for(lambda: can_i(rbac_applied, *granted_questions()[0]), f"the RBAC of {SA} in force", 30)
    with ThreadPoolExecutor(max_workers=4) as pool:
        answers = dict(zip(REFUSED, pool.map(lambda q: can_i(rbac_applied, *q), REFUSED), strict=True))
    assert [q for q, yes in answers.items() if yes] == []


# -- the experiment ConfigMap ----------------------------------------------------------------------------


def test_the_experiment_loads_as_the_master_reads_it(tmp_path: Path) -> None:
    docs = objects(K8S / "base")
    master = find(docs, "Deployment", "bench-master")
    args = container(master)["args"]
    scenario_arg = next(a for a in args if a.startswith("--scenario="))
    mounted = Path(scenario_arg.removeprefix("--scenario="))
    mount = next(m for m in container(master)["volumeMounts"] if m["mountPath"] == str(mounted.parent))
    volume = next(v for v in master["spec"]["template"]["spec"]["volumes"] if v["name"] == mount["name"])
    # the file the master reads: key scenario.yaml of the generated ConfigMap it mounts
    generated = find(docs, "ConfigMap", volume["configMap"]["name"])
    path = tmp_path / mounted.name
    path.write_text(generated["data"][mounted.name])
    in_pod = load_scenario(path)

    # the seed-form ConfigMap in the cluster, as `kubectl get configmap -o yaml` gives it
    experiment = find(docs, "ConfigMap", "day19-experiment")
    assert set(experiment["data"]) == {"change", "fixed", "metrics", "repeats", "scenario"}
    as_applied = tmp_path / "day19-experiment.yaml"
    as_applied.write_text(yaml.safe_dump(experiment))
    assert scenario_sha256(load_scenario(as_applied)) == scenario_sha256(in_pod)

    assert in_pod.name == "day19-experiment"  # from metadata.name: data.scenario names none
    assert in_pod.repeats == 3 and in_pod.change == experiment["data"]["change"]
    assert [(a.name, a.sharing) for a in in_pod.arms] == [("exclusive", "exclusive"),
                                                          ("time-slicing", "time-slicing"), ("mps", "mps")]
    assert sample_warnings(in_pod) == []


def test_the_reference_servers_serve_what_the_experiment_names(tmp_path: Path) -> None:
    experiment = find(objects(K8S / "base"), "ConfigMap", "day19-experiment")
    path = tmp_path / "experiment.yaml"
    path.write_text(yaml.safe_dump(experiment))
    scenario = load_scenario(path)
    servers = objects(K8S / "servers")
    for name in CLASSES:
        spec = scenario.classes.get(name)
        server = container(find(servers, "Deployment", f"bench-{name}"))
        assert server["command"] == ["python", "-m", "bench_plugin.servers", name]
        assert f"--model-name={spec.model}" in server["args"]
        assert f"--size={spec.server.size}" in server["args"]
        flags = [f"{a}={b}" for a, b in zip(spec.server.args[::2], spec.server.args[1::2], strict=True)]
        assert set(flags) <= set(server["args"]), (name, flags)


# -- the Locust master and workers -----------------------------------------------------------------------


def test_master_and_workers() -> None:
    docs = objects(K8S / "base")
    master, worker = find(docs, "Deployment", "bench-master"), find(docs, "Deployment", "bench-worker")
    args = container(master)["args"]
    assert container(master)["command"] == ["locust"]
    for flag in ("-f", "locustfiles/mixed.py", "--master", "--backend=kubernetes", "--namespace=bench",
                 "--expect-workers=2", "--scenario=/etc/bench-plugin/scenario.yaml"):
        assert flag in args
    assert any(a.startswith("--results-dir=/results/") for a in args)
    assert master["spec"]["template"]["spec"]["serviceAccountName"] == "bench-plugin"
    assert master["spec"]["replicas"] == 1 and master["spec"]["strategy"]["type"] == "Recreate"
    results = next(v for v in master["spec"]["template"]["spec"]["volumes"] if v["name"] == "results")
    assert find(docs, "PersistentVolumeClaim", results["persistentVolumeClaim"]["claimName"])

    assert worker["spec"]["replicas"] == 2
    assert container(worker)["args"][-2:] == ["--master-host=bench-master", "--master-port=5557"]
    assert worker["spec"]["template"]["spec"]["automountServiceAccountToken"] is False
    for deployment in (master, worker):
        resources = container(deployment)["resources"]
        assert resources["requests"] == resources["limits"] and resources["limits"]["cpu"] == "1"

    service = find(docs, "Service", "bench-master")
    assert {(p["name"], p["port"]) for p in service["spec"]["ports"]} == {("master", 5557), ("web", 8089)}
    assert service["spec"]["selector"] == master["spec"]["selector"]["matchLabels"]


def test_the_manual_example_sends_each_class_to_its_service_under_an_arm_of_the_experiment(tmp_path: Path) -> None:
    docs = objects(K8S / "examples" / "manual")
    args = container(find(docs, "Deployment", "bench-master"))["args"]
    assert not any(a.startswith(("--backend", "--namespace")) for a in args)
    for name in CLASSES:
        service = find(docs, "Service", f"bench-{name}")
        assert f"--{name}-host=http://{service['metadata']['name']}:{service['spec']['ports'][0]['port']}" in args
    arm = next(a for a in args if a.startswith("--arm=")).removeprefix("--arm=")
    path = tmp_path / "experiment.yaml"
    path.write_text(yaml.safe_dump(find(docs, "ConfigMap", "day19-experiment")))
    # the servers as shipped hold a whole GPU each: the exclusive arm
    assert load_scenario(path, arm=arm).arms[0].sharing == "exclusive"
    base = container(find(objects(K8S / "base"), "Deployment", "bench-master"))["args"]
    assert [a for a in args if a.startswith(("--scenario", "--results-dir", "--expect-workers"))] == \
        [a for a in base if a.startswith(("--scenario", "--results-dir", "--expect-workers"))]


# -- the servers -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("directory", ["servers", "examples/vllm", "examples/tei", "examples/vllm-tei",
                                       "examples/manual"])
def test_servers_keep_the_names_labels_and_probes_the_plugin_relies_on(directory: str) -> None:
    docs = objects(K8S / directory)
    for name in CLASSES:
        deployment = find(docs, "Deployment", f"bench-{name}")
        labels = {"app.kubernetes.io/name": f"bench-{name}", "bench-plugin/class": name}
        pod = deployment["spec"]["template"]
        assert labels.items() <= deployment["metadata"]["labels"].items()
        assert labels.items() <= pod["metadata"]["labels"].items()
        server = container(deployment)
        assert server["ports"] == [{"name": "http", "containerPort": 8000}]
        resources = server["resources"]
        assert resources["requests"] == resources["limits"] and resources["limits"]["nvidia.com/gpu"] == "1"
        assert server["readinessProbe"]["httpGet"] == {"path": "/health", "port": "http"}
        assert server["livenessProbe"]["httpGet"]["port"] == "http"

        service = find(docs, "Service", f"bench-{name}")
        assert service["spec"]["type"] == "ClusterIP"
        assert service["spec"]["ports"] == [{"name": "http", "port": 8000, "targetPort": "http"}]
        assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]

        pdb = find(docs, "PodDisruptionBudget", f"bench-{name}")
        assert pdb["spec"]["minAvailable"] < deployment["spec"]["replicas"]
        assert pdb["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow"
        assert pdb["spec"]["selector"] == deployment["spec"]["selector"]

    priorities = {d["metadata"]["name"]: (d["value"], d["preemptionPolicy"])
                  for d in docs if d["kind"] == "PriorityClass"}
    assert priorities == {"bench-plugin-high": (1000000, "PreemptLowerPriority"),
                          "bench-plugin-low": (-1000, "Never")}


def test_reference_servers_are_the_projects_image_with_live_and_ready_probes() -> None:
    docs = objects(K8S / "servers")
    for name in CLASSES:
        server = container(find(docs, "Deployment", f"bench-{name}"))
        assert server["image"] == "bench-plugin:0.1.0"
        assert "--port=8000" in server["args"] and "--host=0.0.0.0" in server["args"]
        assert server["livenessProbe"]["httpGet"]["path"] == "/health/live"


def test_the_examples_replace_only_their_class() -> None:
    images = {}
    for directory in ("vllm", "tei", "vllm-tei"):
        docs = objects(K8S / "examples" / directory)
        images[directory] = {n: container(find(docs, "Deployment", f"bench-{n}"))["image"] for n in CLASSES}
    ours, vllm, tei = "bench-plugin:0.1.0", "vllm/vllm-openai:v0.11.0", \
        "ghcr.io/huggingface/text-embeddings-inference:hopper-1.9.3"
    assert images["vllm"] == {"llm": vllm, "embedding": ours, "asr": ours}
    assert images["tei"] == {"llm": ours, "embedding": tei, "asr": ours}
    assert images["vllm-tei"] == {"llm": vllm, "embedding": tei, "asr": ours}

    docs = objects(K8S / "examples" / "vllm-tei")
    vllm_args = container(find(docs, "Deployment", "bench-llm"))["args"]
    assert "--port=8000" in vllm_args and any(a.startswith("--model=") for a in vllm_args)
    tei_args = container(find(docs, "Deployment", "bench-embedding"))["args"]
    assert {"--port=8000", "--hostname=0.0.0.0"} <= set(tei_args)
    assert any(a.startswith("--model-id=") for a in tei_args)
    for name in ("llm", "embedding"):
        probe = container(find(docs, "Deployment", f"bench-{name}"))["startupProbe"]
        assert probe["httpGet"] == {"path": "/health", "port": "http"}


# -- the device plugin's sharing configurations ----------------------------------------------------------


def sharing_configs() -> dict[str, Any]:
    configmap = find(objects(K8S / "device-plugin"), "ConfigMap", "bench-plugin-sharing")
    assert configmap["metadata"]["namespace"] == "nvidia-device-plugin"
    return {key: yaml.safe_load(text) for key, text in configmap["data"].items()}


def test_device_plugin_configs_follow_its_format() -> None:
    configs = sharing_configs()
    assert set(configs) == {"exclusive", "time-slicing", "mps"}
    assert {key: dpc.problems(config) for key, config in configs.items()} == {key: [] for key in configs}

    assert "sharing" not in configs["exclusive"]
    assert dpc.advertised(configs["exclusive"]) == {"nvidia.com/gpu": 1}
    for key, strategy in (("time-slicing", "timeSlicing"), ("mps", "mps")):
        config = configs[key]
        assert set(config["sharing"]) == {strategy}
        # a shared replica is never offered as a whole GPU
        assert dpc.advertised(config) == {"nvidia.com/gpu.shared": 3}
        assert config["sharing"][strategy]["failRequestsGreaterThanOne"] is True
        # replicas on as few physical GPUs as possible, so the classes really share one
        assert config["flags"]["plugin"]["sharedDevicesAllocationPolicy"] == "packed"


@pytest.mark.parametrize(("config", "problem"), [
    ({"version": "v2"}, "version: must be v1"),
    ({"flags": {"migStrategy": "none"}}, "version: missing"),
    ({"version": "v1", "sharing": {"timeslicing": {}}}, "sharing.timeslicing: not a sharing strategy"),
    ({"version": "v1", "sharing": {"timeSlicing": {"resources": []}}}, "resources: required"),
    ({"version": "v1", "sharing": {"mps": {"resources": [{"name": "nvidia.com/gpu", "replicas": 1}]}}},
     "replicas: required, a whole number >= 2"),
    ({"version": "v1", "sharing": {"mps": {"renameByDefault": "yes", "resources": [
        {"name": "nvidia.com/gpu", "replicas": 2}]}}}, "renameByDefault: must be true or false"),
    ({"version": "v1", "sharing": {"timeSlicing": {"resources": [
        {"name": "nvidia.com/gpu", "replicas": 2, "rename": "gpu-shared"}]}}}, "rename: ignored"),
    ({"version": "v1", "sharing": {"timeSlicing": {"resources": [
        {"name": "nvidia.com/gpu", "replicas": 2, "devices": [0]}]}}}, "devices: ignored"),
    ({"version": "v1", "flags": {"migStrategy": "mixed"}, "sharing": {"mps": {"resources": [
        {"name": "nvidia.com/gpu", "replicas": 2}]}}}, "refuses MPS with migStrategy mixed"),
    ({"version": "v1", "sharing": {"mps": {"resources": [{"name": "nvidia.com/mig-1g.18gb", "replicas": 2}]},
                                   "timeSlicing": {"resources": [{"name": "gpu", "replicas": 2}]}}},
     "mutually exclusive"),
    ({"version": "v1", "flags": {"plugin": {"sharedDevicesAllocationPolicy": "spread"}}}, "is not one of"),
    ({"version": "v1", "flags": {"plugin": {"allocationPolicy": "packed"}}}, "not a plugin flag"),
])
def test_the_format_check_catches_what_the_device_plugin_would_ignore_or_refuse(config: Any, problem: str) -> None:
    found = dpc.problems(config)
    assert any(problem in line for line in found), found
