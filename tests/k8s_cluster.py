"""A real Kubernetes control plane for the tests, with kwok simulating GPU nodes.

etcd, kube-apiserver, kube-scheduler and kube-controller-manager run as processes on 127.0.0.1 (free
ports, a temporary directory), so scheduling, Pending reasons, events, preemption, eviction and node
failure are Kubernetes' own; kwok plays the kubelet of every node annotated kwok.x-k8s.io/node=fake (it
marks them Ready, renews their leases and fakes their pods' readiness: a Running pod here serves nothing).
The binaries come from tools/k8s/build.sh (``make k8s-cluster``, which ``make test`` runs), built from the
Go module proxy and cached by version; docs/kubernetes-test-cluster.md says how, and what it costs.

``Cluster`` owns the processes (Popen; terminate, wait, kill after a timeout) and the files: openssl
certificates and a kubeconfig (tests/k8s_pki.py), each process's log (named in every failure message).
Every wait polls a condition with a generous deadline: a busy 2-core machine is slow, never wrong.

The binaries are required: where they are missing, ``require_binaries`` FAILS the test, naming the build
step; BENCH_K8S_SKIP_MISSING=1 turns that into a skip, for a machine that cannot build them.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
import requests
import urllib3
from k8s_pki import Certificates, PkiError, make_certificates, write_kubeconfig
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.rest import ApiException

ROOT = Path(__file__).resolve().parent.parent
WRAPPERS = ROOT / "tools" / "k8s"
COMMANDS = ("etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager", "kubectl", "kwok")
STAGES = "kwok-stages.yaml"
"""kwok's stage files, concatenated by tools/k8s/build.sh next to the binaries."""
FAKE_NODE_ANNOTATION = ("kwok.x-k8s.io/node", "fake")
"""The annotation that hands a node to kwok (its --manage-nodes-with-annotation-selector)."""
START_DEADLINE_S = 120.0
"""Launch to usable takes 2.5-3.5 s on an idle 2-core machine; this is for a busy one."""
WAIT_DEADLINE_S = 90.0
STOP_TIMEOUT_S = 10.0
"""terminate -> SIGKILL. Each process stops in about a second."""
NODE_GRACE_S = 15
"""--node-monitor-grace-period and kwok's lease duration: a stopped kwok makes its nodes Unknown after
about this long (the defaults, 40-50 s, make a node-failure test slow). kwok renews every quarter of it,
so a renewal may be ~11 s late on a starved machine before a node flaps."""

T = TypeVar("T")


class ClusterError(RuntimeError):
    """The control plane did not start, stop or reach a state in time; the message names the logs."""


def required_version(wrapper: str, module: str) -> str:
    """The version of ``module`` that tools/k8s/<wrapper>/go.mod requires (what build.sh builds)."""
    for line in (WRAPPERS / wrapper / "go.mod").read_text().splitlines():
        words = line.split()
        if len(words) >= 3 and words[0] == "require" and words[1] == module:
            return words[2]
    raise ClusterError(f"no 'require {module} vX.Y.Z' line in {WRAPPERS / wrapper / 'go.mod'}")


def default_bin_dir() -> Path:
    """Where tools/k8s/build.sh caches the binaries of the versions the wrapper modules pin."""
    versions = (f"k8s-{required_version('kubernetes', 'k8s.io/kubernetes')}"
                f"-etcd-{required_version('etcd', 'go.etcd.io/etcd/server/v3')}"
                f"-kwok-{required_version('kwok', 'sigs.k8s.io/kwok')}")
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "bench-plugin" / "bin" / versions


def bin_dir() -> Path:
    """BENCH_K8S_BIN, or build.sh's cache entry."""
    configured = os.environ.get("BENCH_K8S_BIN")
    return Path(configured) if configured else default_bin_dir()


def missing_binaries(directory: Path | None = None) -> str | None:
    """Why the control plane cannot run here (one line), or None when it can."""
    directory = directory or bin_dir()
    missing = [name for name in (*COMMANDS, STAGES) if not (directory / name).is_file()]
    if not missing:
        return None
    return (f"Kubernetes test binaries missing in {directory} ({', '.join(missing)}): build them with "
            "`make k8s-cluster` (tools/k8s/build.sh; make test does) or set BENCH_K8S_BIN")


def require_binaries() -> None:
    """Fail the calling test (skip it under BENCH_K8S_SKIP_MISSING=1) when the binaries are missing."""
    why = missing_binaries()
    if why:
        if os.environ.get("BENCH_K8S_SKIP_MISSING") == "1":
            pytest.skip(why)
        pytest.fail(why)


def free_port() -> int:
    """A TCP port nothing listens on at 127.0.0.1 now (the caller binds it soon after)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(condition: Callable[[], T | None], what: str, deadline_s: float = WAIT_DEADLINE_S,
             interval_s: float = 0.2) -> T:
    """Poll ``condition`` until it returns something other than None or False; that value.

    Raises ClusterError naming ``what`` when ``deadline_s`` passes first.
    """
    deadline = time.monotonic() + deadline_s
    while True:
        value = condition()
        if value is not None and value is not False:
            return value
        if time.monotonic() > deadline:
            raise ClusterError(f"{what}: not within {deadline_s:.0f} s")
        time.sleep(interval_s)


@dataclass
class Process:
    """One control-plane process and its log file."""

    name: str
    popen: subprocess.Popen[bytes]
    log: Path

    @property
    def pid(self) -> int:
        return self.popen.pid

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> int:
        """Terminate, wait (SIGKILL after ``timeout`` s); the exit status."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            return self.popen.wait()


def _log_tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join(text[-lines:])


class Cluster:
    """A control plane on 127.0.0.1 with kwok nodes, in ``workdir``; ``start()``/``stop()`` or ``with``.

    ``kubeconfig`` and ``server`` reach it as cluster-admin; ``core`` is a CoreV1Api on it and
    ``api_client`` the client behind it (for other APIs); ``kubectl(...)`` runs the matching kubectl.
    """

    certs: Certificates
    """Made by start()."""

    def __init__(self, workdir: Path, *, binaries: Path | None = None, node_grace_s: int = NODE_GRACE_S) -> None:
        self.workdir = workdir
        self.binaries = binaries or bin_dir()
        self.node_grace_s = node_grace_s
        self.kubeconfig = workdir / "kubeconfig"
        self.logs = workdir / "logs"
        self.server = ""
        self.processes: dict[str, Process] = {}
        self.fake_nodes: set[str] = set()
        """Nodes added with add_gpu_node and not deleted since."""
        self._client: k8s.ApiClient | None = None
        self._ports: dict[str, int] = {}
        self._env = {**os.environ, "KUBECACHEDIR": str(workdir / "kube-cache"), "HOME": str(workdir / "home")}

    # -- lifecycle ---------------------------------------------------------------------------------

    def __enter__(self) -> Cluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        """Start every process and wait until the apiserver is ready and each component is healthy."""
        why = missing_binaries(self.binaries)
        if why:
            raise ClusterError(why)
        for sub in ("logs", "etcd", "kube-cache", "home", "flexvolume", "apiserver-certs"):
            (self.workdir / sub).mkdir(parents=True, exist_ok=True)
        self._ports = {name: free_port() for name in ("etcd", "etcd-peer", "apiserver", "scheduler",
                                                       "controller-manager")}
        self.server = f"https://127.0.0.1:{self._ports['apiserver']}"
        try:
            self.certs = make_certificates(self.workdir / "pki")
        except PkiError as error:
            raise ClusterError(str(error)) from None
        write_kubeconfig(self.kubeconfig, self.server, self.certs)
        try:
            self._launch("etcd", self._etcd_args())
            self._wait_healthy("etcd", f"http://127.0.0.1:{self._ports['etcd']}/health", verify=False)
            self._launch("kube-apiserver", self._apiserver_args())
            self._wait_healthy("kube-apiserver", f"{self.server}/readyz", verify=str(self.certs.ca),
                               cert=(str(self.certs.admin), str(self.certs.admin_key)))
            self._launch("kube-scheduler", self._component_args("scheduler"))
            self._launch("kube-controller-manager", [*self._component_args("controller-manager"),
                                                     *self._controller_manager_args()])
            self.start_kwok()
            for name in ("scheduler", "controller-manager"):
                self._wait_healthy(f"kube-{name}", f"https://127.0.0.1:{self._ports[name]}/healthz", verify=False)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop every process: the components first, then the apiserver, then etcd (each waited for)."""
        if self._client is not None:
            self._client.close()
            self._client = None
        order = ("kwok", "kube-controller-manager", "kube-scheduler", "kube-apiserver", "etcd")
        for name in sorted(self.processes, key=lambda n: order.index(n) if n in order else -1):
            self.processes.pop(name).stop()

    def pids(self) -> dict[str, int]:
        """Process name -> PID of every process this cluster started and has not stopped."""
        return {name: proc.pid for name, proc in self.processes.items()}

    def stop_kwok(self) -> None:
        """Stop kwok, as if every fake node's kubelet died: their leases stop being renewed."""
        proc = self.processes.pop("kwok", None)
        if proc is not None:
            proc.stop()

    def start_kwok(self) -> None:
        """Start kwok (again): it takes over the fake nodes once their old leases have expired."""
        if "kwok" in self.processes:
            return
        self._launch("kwok", [
            f"--kubeconfig={self.kubeconfig}", f"--config={self.binaries / STAGES}", "--manage-all-nodes=false",
            f"--manage-nodes-with-annotation-selector={'='.join(FAKE_NODE_ANNOTATION)}",
            "--cidr=10.244.0.0/16", "--node-ip=10.243.0.1",  # node IP outside the pod CIDR
            f"--node-lease-duration-seconds={self.node_grace_s}"])

    def _launch(self, name: str, args: list[str]) -> None:
        log = self.logs / f"{name}.log"
        with open(log, "ab") as fh:  # kwok's restarts append
            popen = subprocess.Popen([str(self.binaries / name), *args], stdout=fh, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=self._env, cwd=self.workdir)
        self.processes[name] = Process(name, popen, log)

    def _wait_healthy(self, name: str, url: str, *, verify: bool | str,
                      cert: tuple[str, str] | None = None) -> None:
        def healthy() -> bool:
            self.check_running()
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", urllib3.exceptions.InsecureRequestWarning)
                    reply = requests.get(url, verify=verify, cert=cert, timeout=5)
            except requests.RequestException:
                return False
            return reply.status_code == 200

        try:
            wait_for(healthy, f"{name} healthy at {url}", START_DEADLINE_S, interval_s=0.1)
        except ClusterError as error:
            raise ClusterError(f"{error}\n{self.describe_logs()}") from None

    def check_running(self) -> None:
        """Raise ClusterError, with the log, if a process this cluster started has exited."""
        for proc in self.processes.values():
            if proc.popen.poll() is not None:
                raise ClusterError(f"{proc.name} exited with status {proc.popen.returncode}; log {proc.log}:\n"
                                   f"{_log_tail(proc.log)}")

    def describe_logs(self, lines: int = 8) -> str:
        """Each process's log file and its last lines, for a failure message."""
        return "\n".join(f"--- {log} ---\n{_log_tail(log, lines)}" for log in sorted(self.logs.glob("*.log")))

    # -- command lines -----------------------------------------------------------------------------

    def _etcd_args(self) -> list[str]:
        client, peer = (f"http://127.0.0.1:{self._ports[p]}" for p in ("etcd", "etcd-peer"))
        return ["--name=test", f"--data-dir={self.workdir / 'etcd'}", "--unsafe-no-fsync", "--log-level=warn",
                f"--listen-client-urls={client}", f"--advertise-client-urls={client}",
                f"--listen-peer-urls={peer}", f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=test={peer}"]

    def _apiserver_args(self) -> list[str]:
        c = self.certs
        return [f"--etcd-servers=http://127.0.0.1:{self._ports['etcd']}", "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1", f"--secure-port={self._ports['apiserver']}",
                f"--cert-dir={self.workdir / 'apiserver-certs'}", "--authorization-mode=Node,RBAC",
                "--allow-privileged=true", f"--tls-cert-file={c.apiserver}",
                f"--tls-private-key-file={c.apiserver_key}",
                f"--client-ca-file={c.ca}", f"--service-account-key-file={c.service_account_pub}",
                f"--service-account-signing-key-file={c.service_account_key}",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                "--service-cluster-ip-range=10.96.0.0/12",
                # no kube-proxy or endpoints here: the default reconciler logs a loopback error every 10 s
                "--endpoint-reconciler-type=none"]

    def _component_args(self, name: str) -> list[str]:
        # no --authentication/authorization-kubeconfig: their delegated checks flood the logs
        return [f"--kubeconfig={self.kubeconfig}", "--bind-address=127.0.0.1",
                f"--secure-port={self._ports[name]}", "--leader-elect=false"]

    def _controller_manager_args(self) -> list[str]:
        return [f"--root-ca-file={self.certs.ca}",
                f"--service-account-private-key-file={self.certs.service_account_key}",
                "--node-monitor-period=2s", f"--node-monitor-grace-period={self.node_grace_s}s",
                # its default is /usr/libexec/kubernetes/..., which it would create on the host
                f"--flex-volume-plugin-dir={self.workdir / 'flexvolume'}"]

    # -- API ---------------------------------------------------------------------------------------

    @property
    def api_client(self) -> k8s.ApiClient:
        """A Python client (the `kubernetes` package) configured from ``kubeconfig``."""
        if self._client is None:
            self._client = k8s_config.new_client_from_config(config_file=str(self.kubeconfig))
        return self._client

    @property
    def core(self) -> k8s.CoreV1Api:
        return k8s.CoreV1Api(self.api_client)

    def kubectl(self, *args: str, input: str | None = None, check: bool = True,
                timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """Run the cluster's kubectl with ``args``; raises ClusterError on a non-zero exit when ``check``."""
        done = subprocess.run([str(self.binaries / "kubectl"), f"--kubeconfig={self.kubeconfig}", *args],
                              input=input, capture_output=True, text=True, env=self._env, timeout=timeout,
                              check=False)
        if check and done.returncode != 0:
            raise ClusterError(f"kubectl {' '.join(args)} exited {done.returncode}: {done.stderr.strip()}")
        return done

    def create_namespace(self, name: str) -> str:
        """Create namespace ``name`` and wait until pods can be created in it (its default ServiceAccount)."""
        self.core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=name)))
        self.wait_for_default_service_account(name)
        return name

    def delete_namespace(self, name: str) -> None:
        """Delete namespace ``name``, its pods at once (grace period 0), without waiting for the rest."""
        self.core.delete_collection_namespaced_pod(name, grace_period_seconds=0)
        self.core.delete_namespace(name)

    def wait_for_default_service_account(self, namespace: str, deadline_s: float = WAIT_DEADLINE_S) -> None:
        """Wait until the controller-manager has made ``namespace``'s default ServiceAccount: before it,
        the ServiceAccount admission plugin refuses pods."""
        def exists() -> bool:
            self.check_running()
            try:
                self.core.read_namespaced_service_account("default", namespace)
            except ApiException as error:
                if error.status == 404:
                    return False
                raise
            return True

        wait_for(exists, f"the default ServiceAccount of namespace {namespace}", deadline_s)

    def add_gpu_node(self, name: str, *, gpus: int = 8, resource: str = "nvidia.com/gpu", amount: int | None = None,
                     product: str = "NVIDIA-H200", labels: Mapping[str, str] | None = None,
                     taints: Iterable[Mapping[str, str]] = (), extra_resources: Mapping[str, str] | None = None,
                     cpu: str = "64", memory: str = "512Gi", pods: int = 110,
                     deadline_s: float = WAIT_DEADLINE_S) -> dict[str, Any]:
        """Create a fake GPU node that kwok runs and wait until it is Ready and schedulable; the node.

        It has ``gpus`` GPUs of ``product`` (the labels GPU feature discovery would set) and offers
        ``amount`` (default: ``gpus``) of ``resource``, e.g. nvidia.com/gpu.shared for time-slicing
        replicas, plus ``extra_resources`` (MIG profiles, say), cpu, memory and pods.
        """
        resources = {"cpu": cpu, "memory": memory, "pods": str(pods), resource: str(gpus if amount is None else amount),
                     **(extra_resources or {})}
        body: Any = {  # with the status a kubelet would report
            "apiVersion": "v1", "kind": "Node",
            "metadata": {
                "name": name,
                "annotations": {FAKE_NODE_ANNOTATION[0]: FAKE_NODE_ANNOTATION[1]},
                "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
                           "type": "kwok", "nvidia.com/gpu.product": product, "nvidia.com/gpu.count": str(gpus),
                           **(labels or {})},
            },
            "spec": {"taints": [dict(t) for t in taints]},
            "status": {"capacity": resources, "allocatable": resources, "phase": "Running",
                       # every field, as the client (37) validates a dict against its model before sending it
                       "nodeInfo": {"architecture": "amd64", "operatingSystem": "linux", "kubeletVersion": "fake",
                                    "containerRuntimeVersion": "kwok", "kernelVersion": "", "osImage": "",
                                    "kubeProxyVersion": "", "bootID": "", "machineID": "", "systemUUID": ""}},
        }
        self.core.create_node(body)
        self.fake_nodes.add(name)
        return self.wait_for_node_ready(name, deadline_s)

    def wait_for_node_ready(self, name: str, deadline_s: float = WAIT_DEADLINE_S) -> dict[str, Any]:
        """Wait until node ``name`` is Ready with no not-ready/unreachable taint left; the node (a dict)."""
        def ready() -> dict[str, Any] | None:
            self.check_running()
            node = self.node(name)
            schedulable = not any(t["key"] in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
                                  for t in node["spec"].get("taints") or [])
            return node if node_condition(node, "Ready") == "True" and schedulable else None

        try:
            return wait_for(ready, f"node {name} Ready", deadline_s)
        except ClusterError as error:
            raise ClusterError(f"{error}\n{self.describe_logs()}") from None

    def node(self, name: str) -> dict[str, Any]:
        """Node ``name`` as a dict with the API's own (camelCase) keys, as kubectl -o json shows it."""
        return self.as_dict(self.core.read_node(name))

    def as_dict(self, obj: Any) -> dict[str, Any]:
        """A client model object as a dict with the API's own (camelCase) keys."""
        return dict(self.api_client.sanitize_for_serialization(obj))

    def delete_node(self, name: str) -> None:
        """Delete node ``name`` (absent is fine)."""
        try:
            self.core.delete_node(name)
        except ApiException as error:
            if error.status != 404:
                raise
        self.fake_nodes.discard(name)

    def compact_etcd(self) -> int:
        """Compact etcd's history up to its current revision, as the API server does every 5 minutes; the revision.

        A watch of a resource the API server keeps no watch cache for (Events) from an older
        resourceVersion is then answered 410 Gone ("too old"), as a long run meets it.
        """
        etcd = f"http://127.0.0.1:{self._ports['etcd']}/v3"
        header = requests.post(f"{etcd}/kv/range", json={"key": "AA=="}, timeout=10).json()["header"]
        revision = int(header["revision"])
        requests.post(f"{etcd}/kv/compaction", json={"revision": revision, "physical": True},
                      timeout=60).raise_for_status()
        return revision


def node_condition(node: Mapping[str, Any], kind: str) -> str | None:
    """The status ("True", "False", "Unknown") of condition ``kind`` of a node dict, or None without one."""
    for condition in node.get("status", {}).get("conditions") or []:
        if condition.get("type") == kind:
            return str(condition.get("status"))
    return None


class ClusterPoller:
    """A test's own client of the cluster that calls ``poll()`` every ``interval_s`` in a thread while it is
    entered (``with``): an API or transport error is kept in ``errors`` and the next poll tries again."""

    def __init__(self, cluster: Cluster, name: str, interval_s: float = 0.1) -> None:
        self.interval_s = interval_s
        self.client = k8s_config.new_client_from_config(config_file=str(cluster.kubeconfig))
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def poll(self) -> None:
        """One pass; ApiException means "try again"."""
        raise NotImplementedError

    def __enter__(self) -> ClusterPoller:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self.client.close()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.poll()
            except ApiException as error:  # an object the fixture deleted, the apiserver busy: try again
                self.errors.append(f"{error.status} {error.reason}")
            except Exception as error:  # a transport failure (urllib3, a socket) on a loaded host: try again too,
                # or the thread ends and what it stands in for stops (a stand-in device plugin left a node as it was)
                self.errors.append(f"{type(error).__name__}: {error}")
            self._stop.wait(self.interval_s)
