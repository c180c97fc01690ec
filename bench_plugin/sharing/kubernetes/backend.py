"""The kubernetes backend: each arm applied through the API, everything it changed put back afterwards.

Per arm (one segment: every class at once, never split): a time-slicing or MPS arm writes its device
plugin configuration (deviceplugin.py) into the plugin's ConfigMap, points the GPU nodes at it with the
``nvidia.com/device-plugin.config`` label and waits until they advertise ``nvidia.com/gpu.shared``; an
exclusive or MIG arm puts those labels back as they were. Then one Deployment and one Service per class
(manifests.py), and a wait until each Deployment has a Ready pod; a pod that never gets there fails the
trial with the cluster's own reason (the scheduler's FailedScheduling message, say). Ready is not the
model answering: the campaign then waits for each class to answer a real request at its URL (the
Service, or where ``--service-url`` says it is reachable from the load generators).

``release`` deletes the segment's Deployments and Services and waits until their pods are gone;
``restore`` also puts back every node label and ConfigMap key the campaign changed and deletes the
PriorityClasses (and namespace) it created. Only objects labelled with this campaign are deleted.
What ``restore`` could not undo is in ``leftovers()``, which fails the run.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from bench_plugin.results.facts import BackendFacts, DevicePluginFacts, NodeFacts
from bench_plugin.results.placement import ClassPlacement, Placement
from bench_plugin.results.samples import Sample
from bench_plugin.scenario import Arm, Disruption, KubernetesSettings, Scenario
from bench_plugin.sharing.base import ApplyError, SharingBackend
from bench_plugin.sharing.kubernetes import api as k8s
from bench_plugin.sharing.kubernetes import deviceplugin as dp
from bench_plugin.sharing.kubernetes import manifests as m
from bench_plugin.sharing.kubernetes import preflight
from bench_plugin.sharing.kubernetes.api import Api, Json, KubeError
from bench_plugin.sharing.kubernetes.changes import ClusterChanges
from bench_plugin.sharing.kubernetes.checks import check_arm, priority_conflict
from bench_plugin.sharing.kubernetes.disruption import Disruptor, Record
from bench_plugin.sharing.kubernetes.podwatch import PodWatch
from bench_plugin.sharing.kubernetes.rollout import WaitTimeout, describe_exit, poll, wait_gone, wait_ready

logger = logging.getLogger(__name__)

EXPECTED_PREEMPTION: dict[str, str] = {name: policy for name, _value, policy in m.PRIORITY_CLASSES.values()}
"""What each of the plugin's PriorityClasses means: high preempts lower priorities, low never preempts."""

SHARED = ("time-slicing", "mps")


def new_campaign_id() -> str:
    """A label-safe id for one campaign: its UTC start and a random suffix."""
    return f"{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{secrets.token_hex(3)}"


@dataclass(frozen=True)
class ClusterOptions:
    """The command line's say on the cluster: credentials, namespace, where the load generators reach a class."""

    kubeconfig: str | None = None
    namespace: str | None = None
    service_urls: dict[str, str] = field(default_factory=dict)
    """Class -> the URL its Service is reachable at from the load generators (kubectl port-forward)."""
    campaign: str = field(default_factory=new_campaign_id)


class KubernetesBackend(SharingBackend):
    """Applies arms as device-plugin configurations, node labels, Deployments and Services."""

    name = "kubernetes"
    replaces_servers = True

    def __init__(self, scenario: Scenario, options: ClusterOptions) -> None:
        super().__init__(scenario)
        self.section = scenario.kubernetes or KubernetesSettings()
        self.namespace = options.namespace or self.section.namespace
        self.options = options
        self.campaign = options.campaign
        self._api: Api | None = None
        self._changes: ClusterChanges | None = None
        self._namespace_exists = False
        self.placed: dict[str, str] = {}
        """Class -> its pod (namespace/name) in the segment now applied."""
        self._leftovers: list[str] = []
        self._disruptor: Disruptor | None = None
        self._watch: PodWatch | None = None

    # -- the connection ----------------------------------------------------------------------------

    @property
    def api(self) -> Api:
        """The API (connected on first use)."""
        if self._api is None:
            self._api = k8s.connect(self.options.kubeconfig)
            self._changes = ClusterChanges(self._api)
        return self._api

    @property
    def changes(self) -> ClusterChanges:
        """The campaign's changes to objects it does not own."""
        self.api  # noqa: B018  # connects, which makes the ledger
        assert self._changes is not None
        return self._changes

    @property
    def selector(self) -> str:
        """The label selector of everything this campaign made."""
        return k8s.selector(m.campaign_labels(self.campaign))

    # -- before anything runs ----------------------------------------------------------------------

    def check(self, arm: Arm) -> None:
        try:
            check_arm(self.scenario, arm)
            self._check_cluster()
            self._check_arm_on_cluster(arm)
        except KubeError as exc:
            raise ApplyError(str(exc)) from None

    def _check_cluster(self) -> None:
        """Once: the API answers, the namespace exists or may be created, no foreign bench-<class> objects."""
        if self._namespace_exists or (self._changes is not None and self._changes.namespace):
            return
        api = self.api
        api.request("GET", k8s.VERSION)
        self._check_stale_labels()
        if api.get(k8s.name_path(k8s.NAMESPACES, self.namespace)) is None:
            review = api.create(k8s.ACCESS_REVIEWS, {
                "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                "spec": {"resourceAttributes": {"verb": "create", "resource": "namespaces"}}})
            if not review.get("status", {}).get("allowed"):
                raise KubeError(f"namespace {self.namespace} does not exist and {api.source} may not create it: "
                                "create it, or give another with --namespace")
            return
        self._namespace_exists = True
        for kind, path in (("Deployment", k8s.deployments(self.namespace)), ("Service", k8s.services(self.namespace))):
            for name in self.scenario.classes.names():
                found = api.get(k8s.name_path(path, m.object_name(name)))
                if found is not None:
                    owner = (found["metadata"].get("labels") or {}).get(m.CAMPAIGN_LABEL)
                    whose = f"left by bench-plugin campaign {owner}" if owner else "not made by bench-plugin"
                    raise KubeError(f"{kind} {self.namespace}/{m.object_name(name)} already exists ({whose}): "
                                    "delete it, or give another namespace with --namespace")

    def _check_stale_labels(self) -> None:
        """Refuse GPU nodes still pointed at a bench-plugin config: a campaign that could not restore left them,
        and putting back "the value before" would then keep its value."""
        for node in self._gpu_nodes():
            value = (node["metadata"].get("labels") or {}).get(dp.CONFIG_LABEL) or ""
            if value.startswith(dp.config_key("")):
                name = node["metadata"]["name"]
                raise KubeError(f"node {name} has {dp.CONFIG_LABEL}={value}, left by an earlier bench-plugin campaign "
                                f"that did not restore it: put back the node's own value first (kubectl label node "
                                f"{name} {dp.CONFIG_LABEL}=<its own config> --overwrite, or {dp.CONFIG_LABEL}- for "
                                "the default)")

    def _check_arm_on_cluster(self, arm: Arm) -> None:
        api = self.api
        if arm.sharing in SHARED:
            plugin = self.section.device_plugin
            if api.get(k8s.name_path(k8s.config_maps(plugin.namespace), plugin.config_map)) is None:
                raise KubeError(f"arm '{arm.name}': the device plugin's ConfigMap {plugin.namespace}/"
                                f"{plugin.config_map} was not found: deploy the NVIDIA device plugin with it as its "
                                f"config (helm --set config.name={plugin.config_map}), or set "
                                "kubernetes.device_plugin")
            if not self._gpu_nodes():
                raise KubeError(f"arm '{arm.name}': no GPU node matches kubernetes.node_selector "
                                f"{self.section.node_selector or '{}'} (a GPU node has the {dp.PRODUCT_LABEL} label "
                                f"or an nvidia.com/gpu resource); sharing '{arm.sharing}' configures their device "
                                "plugin")
        for obj in self._objects(arm, self.scenario.classes.names()):
            if obj["kind"] == "PriorityClass":
                existing = api.get(k8s.name_path(k8s.PRIORITY_CLASSES, obj["metadata"]["name"]))
                problem = priority_conflict(existing, obj) if existing is not None else None
                if problem:
                    raise KubeError(f"arm '{arm.name}': {problem}")
        self._preflight_ahead(arm, self._objects(arm, self.scenario.classes.names()))

    def _preflight_ahead(self, arm: Arm, objects: list[Json]) -> None:
        """The preflight of ``arm`` before the campaign sends any load: against the cluster as the device
        plugin will advertise it under the arm (``nvidia.com/gpu.shared`` = GPUs x replicas on the
        selected GPU nodes of a sharing arm, whole GPUs otherwise). Applying the arm judges it again,
        against what the cluster then really advertises."""
        view = preflight.read_cluster(self.api.client, self.namespace)
        if arm.sharing != "mig":
            sharing = arm.sharing if arm.sharing in SHARED else None
            selected = {node["metadata"]["name"] for node in self._gpu_nodes()}
            replicas = self.section.device_plugin.replicas
            view = replace(view, nodes=tuple(
                dp.as_advertised(dict(node), sharing, replicas) if node["metadata"]["name"] in selected else node
                for node in view.nodes))
        conflicts = preflight.check(objects, view, EXPECTED_PREEMPTION)
        for conflict in conflicts:
            logger.error("preflight of arm '%s': %s", arm.name, conflict.line())
        try:
            preflight.refuse(conflicts)
        except preflight.PreflightError as exc:
            raise ApplyError(f"arm '{arm.name}': preflight: {exc}") from None

    # -- per segment -------------------------------------------------------------------------------

    def segments(self, arm: Arm, class_names: list[str]) -> list[list[str]]:
        return [list(class_names)]

    def apply(self, arm: Arm, class_names: list[str], trial_id: int, segment: int) -> Placement:
        self.release()
        try:
            self._ensure_namespace()
            self._switch_device_plugin(arm)
            objects = self._objects(arm, class_names)
            self._preflight(objects)
            for obj in objects:
                self._create(obj)
            pods = wait_ready(self.api, self.namespace, {
                name: k8s.selector({m.NAME_LABEL: m.object_name(name), m.CAMPAIGN_LABEL: self.campaign})
                for name in class_names}, self.section.rollout_timeout_s)
        except WaitTimeout as exc:
            raise ApplyError(str(exc)) from None
        except KubeError as exc:
            raise ApplyError(f"arm '{arm.name}': {exc}") from None
        return Placement({name: self._placement(arm, name, pods[name]) for name in class_names})

    def _preflight(self, objects: list[Json]) -> None:
        """Judge the arm's objects against the cluster before any of them is created (preflight.py).

        ``objects`` are the arm's PriorityClasses, Deployments and Services as JSON-form dicts
        (manifests.arm_objects). It is called once the device plugin advertises what the arm asks for
        (``nvidia.com/gpu.shared`` after a switch), so capacity is judged against what the arm will get.
        Every conflict is logged on its own line; the first (with how many more) fails the trial before
        anything is created.
        """
        conflicts = preflight.check(objects, preflight.read_cluster(self.api.client, self.namespace),
                                    EXPECTED_PREEMPTION)
        for conflict in conflicts:
            logger.error("preflight: %s", conflict.line())
        preflight.refuse(conflicts)

    def _objects(self, arm: Arm, class_names: list[str]) -> list[Json]:
        return m.arm_objects(self.scenario, self.section, arm, class_names, namespace=self.namespace,
                             campaign=self.campaign)

    def _ensure_namespace(self) -> None:
        if self._namespace_exists:
            return
        if self.api.get(k8s.name_path(k8s.NAMESPACES, self.namespace)) is None:
            self.api.create(k8s.NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {
                "name": self.namespace, "labels": m.campaign_labels(self.campaign)}})
            self.changes.namespace = self.namespace
        self._namespace_exists = True

    def _create(self, obj: Json) -> None:
        name = obj["metadata"]["name"]
        if obj["kind"] == "PriorityClass":
            path = k8s.name_path(k8s.PRIORITY_CLASSES, name)
            existing = self.api.get(path)
            if existing is None:
                self.api.create(k8s.PRIORITY_CLASSES, obj)
                self.changes.priority_classes.append(name)
            elif problem := priority_conflict(existing, obj):
                raise KubeError(problem)
            return
        collection = k8s.deployments(self.namespace) if obj["kind"] == "Deployment" else k8s.services(self.namespace)
        self.api.create(collection, obj)

    def _gpu_nodes(self) -> list[Json]:
        labels = k8s.selector(self.section.node_selector) if self.section.node_selector else None
        return [node for node in self.api.list(k8s.NODES, labels=labels) if dp.is_gpu_node(node)]

    def _switch_device_plugin(self, arm: Arm) -> None:
        """Shared arm: its config key and the nodes' label, then wait; otherwise put the labels back (and wait)."""
        plugin = self.section.device_plugin
        if arm.sharing in SHARED:
            key = dp.config_key(arm.name)
            self.changes.set_config_key(plugin.namespace, plugin.config_map, key,
                                        dp.config_text(arm.sharing, plugin.replicas))
            nodes = self._gpu_nodes()
            for node in nodes:
                self.changes.set_node_label(node, dp.CONFIG_LABEL, key)
            self._wait_advertised({n["metadata"]["name"]: f"its label {dp.CONFIG_LABEL} was set to {key}"
                                   for n in nodes}, arm.sharing)
            return
        changed = self.changes.put_back_node_labels()
        if arm.sharing == "exclusive" and changed:
            # MIG arms are not waited for: which MIG resources a node offers is the plugin's MIG strategy, and a
            # pod asking one the node does not offer yet waits Pending (the rollout's timeout names it)
            self._wait_advertised({name: f"its label {dp.CONFIG_LABEL} was put back to its own value "
                                         f"({labels.get(dp.CONFIG_LABEL) or 'none: the default config'}), which "
                                         "must serve whole GPUs for an exclusive arm"
                                   for name, labels in changed.items()}, None)

    def _wait_advertised(self, nodes: dict[str, str], sharing: str | None) -> None:
        """Wait until every node of ``nodes`` (node -> what was changed on it) serves ``sharing`` (None: whole GPUs)."""
        replicas = self.section.device_plugin.replicas
        timeout = self.section.rollout_timeout_s
        last: dict[str, str] = {}

        def done() -> bool | None:
            last.clear()
            for name in nodes:
                node = self.api.get(k8s.name_path(k8s.NODES, name))
                why = dp.not_yet_advertised(node, sharing, replicas) if node is not None else None
                if why is not None:
                    last[name] = why
                    return None
            return True

        if poll(done, timeout) is None:
            name, why = next(iter(last.items()))
            plugin = self.section.device_plugin
            raise KubeError(f"node {name}: {why}, {timeout:g} s after {nodes[name]}; is the NVIDIA device plugin "
                            f"running there with ConfigMap {plugin.namespace}/{plugin.config_map} as its config?")

    def _placement(self, arm: Arm, name: str, pod: Json) -> ClassPlacement:
        node = pod.get("spec", {}).get("nodeName")
        ref = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
        self.placed[name] = ref
        server: Json = next((c for c in pod.get("spec", {}).get("containers") or [] if c.get("name") == m.CONTAINER),
                            {})
        limits = {resource: str(amount) for resource, amount in ((server.get("resources") or {}).get("limits")
                                                                  or {}).items() if resource.startswith("nvidia.com/")}
        command = [*(server.get("command") or []), *(server.get("args") or [])] or None
        env = {e["name"]: str(e.get("value", "")) for e in server.get("env") or [] if "name" in e}
        port = self.scenario.classes.get(name).kubernetes.port
        url = self.options.service_urls.get(name) or f"http://{m.object_name(name)}.{self.namespace}.svc:{port}"
        # the device plugin does not say which GPU a replica or MIG instance is on: shares on one node count as one
        gpu = f"{node}: GPU of pod {ref}" if arm.sharing == "exclusive" else f"{node}: {arm.sharing} GPU"
        return ClassPlacement(url=url, gpu=gpu, command=command, env=env, node=node, pod=ref, resources=limits)

    def exited(self, name: str) -> str | None:
        ref = self.placed.get(name)
        if ref is None:
            return None
        try:
            pod = self.api.get(k8s.name_path(k8s.pods(self.namespace), ref.split("/", 1)[1]))
        except KubeError:
            return None  # the API is unreachable for a moment: readiness goes on waiting
        if pod is None or pod["metadata"].get("deletionTimestamp"):
            return f"pod {ref} is gone (deleted, evicted or preempted: see its events)"
        for status in pod.get("status", {}).get("containerStatuses") or []:
            last = (status.get("lastState") or {}).get("terminated")
            if status.get("restartCount") and last:
                return f"pod {ref}: container {status.get('name')} restarted {status['restartCount']} times; " \
                       f"last {describe_exit(last)}"
        return None

    def observe(self, arm: Arm, trial_id: int, record: Callable[[Any], None]) -> None:
        """Follow the trial's workload pods and the Events about them (podwatch.py) until ``end_observe``."""
        self.end_observe()
        try:
            self._ensure_namespace()  # the watch lists the namespace before the arm's objects are made in it
        except KubeError as exc:
            raise ApplyError(f"arm '{arm.name}': {exc}") from None
        selector = k8s.selector({**m.campaign_labels(self.campaign), m.ARM_LABEL: arm.name})
        self._watch = PodWatch(self.api.client, self.namespace, selector, record)
        self._watch.start()

    def end_observe(self) -> list[str]:
        watch, self._watch = self._watch, None
        if watch is None:
            return []
        watch.stop()
        return list(watch.errors)

    def disrupt(self, spec: Disruption, classes: list[str], record: Record,
                probe: Callable[[str, str], Sample]) -> None:
        """Do ``spec`` to ``classes`` now (disruption.py); blocks until it is done, records every step. The
        rollout's own readiness (the pods' probes) decides when a new pod serves: ``probe`` is not used."""
        self._disruptor = Disruptor(self.api, self.namespace, self.campaign, spec, record,
                                    self.section.rollout_timeout_s)
        self._disruptor.run(classes)

    def end_disruption(self) -> None:
        """Rejoin and uncordon what the last disruption left; ApplyError if the API refuses."""
        disruptor, self._disruptor = self._disruptor, None
        if disruptor is None:
            return
        try:
            disruptor.end()
        except KubeError as exc:
            self._disruptor = disruptor  # restore tries again
            raise ApplyError(f"putting back the nodes after the {disruptor.spec.kind}: {exc}") from None

    def release(self) -> None:
        """Delete the campaign's Deployments and Services; wait until their pods are gone."""
        self.placed.clear()
        if self._api is None or not self._namespace_exists:
            return
        try:
            for path in (k8s.deployments(self.namespace), k8s.services(self.namespace)):
                for obj in self.api.list(path, labels=self.selector):
                    self.api.delete(k8s.name_path(path, obj["metadata"]["name"]))
            wait_gone(self.api, self.namespace, self.selector, self.section.rollout_timeout_s)
        except (KubeError, WaitTimeout) as exc:
            raise ApplyError(f"releasing the workloads of namespace {self.namespace}: {exc}") from None

    # -- after the campaign ------------------------------------------------------------------------

    def restore(self) -> None:
        """Workloads, then node labels, ConfigMap keys, created PriorityClasses and namespace; never raises."""
        if self._api is None:
            return
        problems = []
        try:
            self.end_disruption()
        except ApplyError as exc:
            problems.append(str(exc))
            logger.error("kubernetes restore: %s", exc)
        try:
            self.release()
        except ApplyError as exc:
            problems.append(str(exc))
            logger.error("kubernetes restore: %s", exc)
        problems += self.changes.undo()
        self.end_observe()
        self._leftovers = problems

    def leftovers(self) -> list[str]:
        return list(self._leftovers)

    def describe(self) -> BackendFacts:
        plugin = self.section.device_plugin
        cluster: dict[str, Any]
        try:
            cluster = {"kubeconfig": self.api.source, "server": self.api.server,
                       "server_version": self.api.request("GET", k8s.VERSION).get("gitVersion"),
                       "nodes": [_describe_node(node) for node in self._gpu_nodes()]}
        except KubeError as exc:
            cluster = {"error": str(exc)}
        return BackendFacts(
            backend=self.name, campaign=self.campaign, namespace=self.namespace,
            device_plugin=DevicePluginFacts(config_map=f"{plugin.namespace}/{plugin.config_map}",
                                            replicas=plugin.replicas),
            node_selector=dict(self.section.node_selector), service_urls=dict(self.options.service_urls), **cluster)


def _describe_node(node: Json) -> NodeFacts:
    node_labels = node["metadata"].get("labels") or {}
    return NodeFacts(
        name=node["metadata"]["name"],
        gpu_product=node_labels.get(dp.PRODUCT_LABEL),
        gpu_count=node_labels.get(dp.COUNT_LABEL),
        device_plugin_config=node_labels.get(dp.CONFIG_LABEL),
        allocatable={k: v for k, v in (node.get("status", {}).get("allocatable") or {}).items()
                     if k.startswith("nvidia.com/")},
    )
