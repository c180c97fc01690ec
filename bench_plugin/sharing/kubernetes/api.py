"""The Kubernetes API as plain JSON: objects go out and come back as dicts in the API's own (camelCase) form.

The official client (the ``kubernetes`` extra) loads the credentials (a kubeconfig, or the pod's service
account in-cluster) and carries the requests; its typed models are skipped on purpose: the backend
builds its objects as JSON-form dicts (manifests.py), the preflight reads them the same way, and a
dict read back can be compared with the dict sent. Every failure, the network's included, is one
``KubeError`` whose message names the request and the API server's own reason.

This module imports ``kubernetes`` only inside :func:`connect`, so ``bench_plugin`` imports without it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

Json = dict[str, Any]

EXTRA_HINT = "pip install 'bench-plugin[kubernetes]'"
REQUEST_TIMEOUT_S = 30.0
MERGE_PATCH = "application/merge-patch+json"


class KubeError(Exception):
    """A request the API server refused or never answered; ``status`` is the HTTP status (0: no answer)."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


class MissingClient(KubeError):
    """The ``kubernetes`` package is not importable."""


def load_client_module() -> Any:
    """The ``kubernetes`` package, or MissingClient naming the extra to install."""
    try:
        import kubernetes
    except ImportError as exc:
        raise MissingClient(f"the kubernetes backend needs the kubernetes extra ({EXTRA_HINT}): "
                            f"import kubernetes failed: {exc}") from None
    return kubernetes


def kubeconfig_source(kubeconfig: str | None) -> str:
    """Where credentials come from, in this order: ``--kubeconfig``, $KUBECONFIG, in-cluster, ~/.kube/config."""
    if kubeconfig:
        return kubeconfig
    if os.environ.get("KUBECONFIG"):
        return os.environ["KUBECONFIG"]
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        return "in-cluster"
    return str(Path("~/.kube/config").expanduser())


def connect(kubeconfig: str | None) -> Api:
    """An Api on the cluster named by ``kubeconfig`` (see :func:`kubeconfig_source`)."""
    kubernetes = load_client_module()
    from kubernetes import config

    source = kubeconfig_source(kubeconfig)
    try:
        if source == "in-cluster":
            configuration = kubernetes.client.Configuration()
            config.load_incluster_config(client_configuration=configuration)
            client = kubernetes.client.ApiClient(configuration)
        else:
            if ":" not in source and not Path(source).expanduser().is_file():
                raise KubeError(f"kubeconfig {source}: no such file (give --kubeconfig, or set KUBECONFIG)")
            # a KUBECONFIG with several files (a:b) is merged by the client, as kubectl does
            client = config.new_client_from_config(config_file=None if source == os.environ.get("KUBECONFIG")
                                                   else source)
    except KubeError:
        raise
    except Exception as exc:  # the client raises ConfigException, ValueError, OSError, yaml errors
        raise KubeError(f"kubeconfig {source}: cannot be loaded: {exc}") from None
    return Api(client, source)


@dataclass
class Api:
    """JSON requests on one cluster; ``source`` says where its credentials came from."""

    client: Any
    source: str

    @property
    def server(self) -> str:
        """The API server's URL."""
        return str(self.client.configuration.host)

    def request(self, method: str, path: str, body: Json | None = None, query: dict[str, str] | None = None,
                content_type: str = "application/json") -> Json:
        """``method path`` with ``body``; the reply's JSON, or KubeError (``status`` 404 for a missing object)."""
        params = self.client.param_serialize(
            method=method, resource_path=path, query_params=list((query or {}).items()),
            header_params={"Accept": "application/json", "Content-Type": content_type}, body=body,
            auth_settings=["BearerToken"],
        )
        try:
            reply = self.client.call_api(*params, _request_timeout=REQUEST_TIMEOUT_S)
            reply.read()
        except Exception as exc:  # urllib3's connection and TLS errors, timeouts
            raise KubeError(f"{method} {path}: no answer from the API server at {self.server}: "
                            f"{_short(exc)}") from None
        text = reply.data.decode("utf-8", errors="replace") if reply.data else ""
        if not 200 <= reply.status < 300:
            raise KubeError(f"{method} {path}: HTTP {reply.status}: {_status_message(text)}", reply.status)
        return json.loads(text) if text else {}

    def get(self, path: str) -> Json | None:
        """The object at ``path``, or None when there is none."""
        try:
            return self.request("GET", path)
        except KubeError as exc:
            if exc.status == 404:
                return None
            raise

    def list(self, path: str, *, labels: str | None = None, fields: str | None = None) -> list[Json]:
        """The items of the collection at ``path`` matching the label and field selectors."""
        query = {k: v for k, v in (("labelSelector", labels), ("fieldSelector", fields)) if v}
        return list(self.request("GET", path, query=query).get("items") or [])

    def create(self, path: str, body: Json) -> Json:
        """POST ``body`` to the collection at ``path``."""
        return self.request("POST", path, body)

    def merge_patch(self, path: str, body: Json) -> Json:
        """A JSON merge patch (RFC 7386): a None value removes that key."""
        return self.request("PATCH", path, body, content_type=MERGE_PATCH)

    def delete(self, path: str, propagation: str = "Background") -> bool:
        """Delete the object at ``path`` (its dependents by ``propagation``); False when it was not there."""
        try:
            self.request("DELETE", path, {"kind": "DeleteOptions", "apiVersion": "v1",
                                          "propagationPolicy": propagation})
        except KubeError as exc:
            if exc.status == 404:
                return False
            raise
        return True


def _status_message(text: str) -> str:
    try:
        status = json.loads(text)
    except ValueError:
        return text.strip()[:200] or "(no body)"
    return str(status.get("message") or status.get("reason") or text[:200])


def _short(exc: BaseException) -> str:
    reason = getattr(exc, "reason", None)
    return str(reason or exc).strip()[:240]


def selector(labels: dict[str, str]) -> str:
    """A label selector matching every label of ``labels``."""
    return ",".join(f"{key}={value}" for key, value in sorted(labels.items()))


def name_path(collection: str, name: str) -> str:
    """The path of object ``name`` in ``collection``."""
    return f"{collection}/{quote(name, safe='')}"


def namespaced(group: str, namespace: str, kind: str) -> str:
    """The collection path of ``kind`` (plural) in ``namespace``; ``group`` is ``""`` for the core API."""
    base = "/api/v1" if not group else f"/apis/{group}"
    return f"{base}/namespaces/{namespace}/{kind}"


NODES = "/api/v1/nodes"
NAMESPACES = "/api/v1/namespaces"
PRIORITY_CLASSES = "/apis/scheduling.k8s.io/v1/priorityclasses"
ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
VERSION = "/version"


def deployments(namespace: str) -> str:
    return namespaced("apps/v1", namespace, "deployments")


def replica_sets(namespace: str) -> str:
    return namespaced("apps/v1", namespace, "replicasets")


def services(namespace: str) -> str:
    return namespaced("", namespace, "services")


def pods(namespace: str) -> str:
    return namespaced("", namespace, "pods")


def events(namespace: str) -> str:
    return namespaced("", namespace, "events")


def config_maps(namespace: str) -> str:
    return namespaced("", namespace, "configmaps")
