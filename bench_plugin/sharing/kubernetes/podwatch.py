"""Pod watch: follows one namespace's workload pods, and the Events about them, for one trial.

Usage (the backend, per trial)::

    watch = PodWatch(api_client, "bench", "bench-plugin/campaign=c1,bench-plugin/arm=mps",
                     record=lambda event: recorder.pod_event(trial_id, event))
    watch.start()          # lists pods, then Events, and follows both until stop()
    ...                    # apply the arm, run the stages, restore
    watch.stop()

Each stream is the informer's pattern, by hand: list (with its resourceVersion), then watch from that
version; a watch that the server ends (``watch_s``) is opened again from the last version seen; one
that has expired (410 Gone: etcd compacted the history it would replay, which happens to Events, as
the API server keeps no watch cache for them) is listed again; a pod missing from that list went
while the watch was away. PodTimeline (podevents.py) makes each transition a PodEvent once, whatever
the lists repeat, and ``record`` gets each one as it arrives (not in time order: store them and sort
on reading).

Both streams run in a ``threading.Thread``; under Locust, gevent's monkey-patching makes those
greenlets and the client's sockets cooperative, so the same code runs in both worlds. ``stop()``
shuts the open watch connections down (kubernetes.watch.Watch.stop) so neither waits for its server
timeout. ``record`` is called by one stream at a time. The ``kubernetes`` client is imported in
start(), never at import.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from bench_plugin.results.pod_events import PodEvent
from bench_plugin.sharing.base import ApplyError
from bench_plugin.sharing.kubernetes.clusterview import api_reason
from bench_plugin.sharing.kubernetes.podevents import PodTimeline
from bench_plugin.sharing.kubernetes.semantics import Json

logger = logging.getLogger(__name__)

Record = Callable[[PodEvent], None]
WATCH_S = 60
"""How long one watch request lasts on the server before it is opened again (its timeoutSeconds)."""
REQUEST_S = 30.0
"""Client-side limit on a list call, and on a watch beyond its server timeout (a connection gone quiet)."""
PAGE = 500
KEPT_ERRORS = 20


class PodWatchError(ApplyError):
    """The watch could not start (its first list failed); one line naming the list and the reason.

    An ApplyError: raised while a trial's arm is applied, it stops the run with that line, as a
    preflight refusal does (a pod timeline the run cannot record is a setup error, not a result).
    """


class _Expired(Exception):
    """The watch's resourceVersion is too old (410 Gone): list again."""


class _Stream:
    """One list-then-watch loop over pods or Events of the namespace."""

    def __init__(self, what: str, call: Callable[..., Any], handle: Callable[[str, Json], None], watch_s: int,
                 listed: Callable[[set[str]], None] | None = None) -> None:
        self.what = what
        self.call = call
        self.handle = handle
        self.watch_s = watch_s
        self.listed = listed
        """Called after each complete list with the uids it held."""
        self.resource_version: str | None = None
        self._watch: Any = None

    def list(self) -> None:
        """List every object (paged), hand each to ``handle`` as ``LISTED``, and keep the list's version."""
        token: str | None = None
        uids: set[str] = set()
        while True:
            page: dict[str, Any] = {"limit": PAGE, "_preload_content": False, "_request_timeout": REQUEST_S}
            if token:
                page["_continue"] = token
            answer = json.loads(self.call(**page).data)
            for item in answer.get("items") or []:
                uids.add(str((item.get("metadata") or {}).get("uid")))
                self.handle("LISTED", item)
            meta = answer.get("metadata") or {}
            if not token:
                self.resource_version = meta.get("resourceVersion")
            token = meta.get("continue")
            if not token:
                if self.listed is not None:
                    self.listed(uids)
                return

    def watch(self) -> None:
        """Follow changes from the kept version until the server ends the watch; _Expired on 410."""
        from kubernetes import watch as k8s_watch
        from kubernetes.client.rest import ApiException

        self._watch = k8s_watch.Watch()
        try:
            for change in self._changes(self._watch):
                obj = change.get("raw_object") or change.get("object") or {}
                version = (obj.get("metadata") or {}).get("resourceVersion")
                if change.get("type") != "BOOKMARK":
                    self.handle(str(change.get("type")), obj)
                if version:
                    self.resource_version = version
        except ApiException as error:
            if error.status == 410:
                raise _Expired(str(error.reason)) from None
            raise
        finally:
            self._watch = None

    def _changes(self, watch: Any) -> Iterator[dict[str, Any]]:
        # ``call`` is a lambda, whose return type the client cannot find: it then hands back the raw JSON
        # (``raw_object``) without building its models, which is all the timeline reads.
        changes: Iterator[dict[str, Any]] = watch.stream(
            self.call, resource_version=self.resource_version, timeout_seconds=self.watch_s,
            allow_watch_bookmarks=True, _request_timeout=self.watch_s + REQUEST_S)
        return changes

    def interrupt(self) -> None:
        """End the open watch now (its connection is shut down)."""
        watch = self._watch
        if watch is not None:
            watch.stop()


class PodWatch:
    """The pods of ``namespace`` that match ``label_selector``, and the Events about them, as PodEvents.

    ``api_client`` is a ``kubernetes.client.ApiClient``; ``record`` gets each new PodEvent (see the
    module docstring). ``errors`` keeps the last one-line problems the streams met and recovered from
    (each is also logged); ``relists`` counts the lists made again after a watch expired.
    """

    def __init__(self, api_client: Any, namespace: str, label_selector: str, record: Record, *,
                 watch_s: int = WATCH_S) -> None:
        self.api_client = api_client
        self.namespace = namespace
        self.label_selector = label_selector
        self.record = record
        self.watch_s = watch_s
        self.errors: list[str] = []
        self.relists = 0
        self.recorded = 0
        self._timeline = PodTimeline()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._streams: list[_Stream] = []
        self._threads: list[threading.Thread] = []

    @property
    def running(self) -> bool:
        """Whether a stream is still following the cluster."""
        return any(t.is_alive() for t in self._threads)

    def start(self) -> None:
        """List the pods, then the Events (so a listed Event finds its pod), and follow both in threads.

        PodWatchError (one line) when a first list fails: nothing is followed then.
        """
        if self._threads:
            raise PodWatchError(f"pod watch of namespace {self.namespace}: already started")
        from urllib3.exceptions import HTTPError

        from kubernetes import client as k8s
        from kubernetes.client.rest import ApiException

        core = k8s.CoreV1Api(self.api_client)
        namespace, selector = self.namespace, self.label_selector
        self._streams = [
            _Stream(f"pods ({selector})",
                    lambda **kw: core.list_namespaced_pod(namespace, label_selector=selector, **kw),
                    self._on_pod, self.watch_s, listed=self._on_pods_listed),
            _Stream("events",
                    lambda **kw: core.list_namespaced_event(namespace, field_selector="involvedObject.kind=Pod", **kw),
                    self._on_event, self.watch_s),
        ]
        for stream in self._streams:
            try:
                stream.list()
            except ApiException as error:
                raise PodWatchError(f"pod watch: cannot list {stream.what} in namespace {namespace}: "
                                    f"{api_reason(error)}") from None
            except (HTTPError, OSError, ValueError) as error:
                raise PodWatchError(f"pod watch: cannot list {stream.what} in namespace {namespace}: "
                                    f"{error}") from None
        self._stopping.clear()
        self._threads = [threading.Thread(target=self._follow, args=(s,), name=f"podwatch-{s.what.split()[0]}",
                                          daemon=True) for s in self._streams]
        for thread in self._threads:
            thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop following: end the open watches and wait (up to ``timeout_s``) for both streams to finish."""
        self._stopping.set()
        deadline = time.monotonic() + timeout_s
        while self.running and time.monotonic() < deadline:
            for stream in self._streams:
                stream.interrupt()  # again each turn: a watch opened since the last one is ended too
            for thread in self._threads:
                thread.join(0.05)
        if self.running:
            self._note(f"pod watch of namespace {self.namespace}: a stream did not end within {timeout_s:g} s")

    def _follow(self, stream: _Stream) -> None:
        from kubernetes.client.rest import ApiException

        pause = 0.5
        while not self._stopping.is_set():
            try:
                if stream.resource_version is None:
                    stream.list()
                stream.watch()
                pause = 0.5
            except _Expired as expired:
                logger.info("pod watch: %s expired (%s); listing again", stream.what, expired)
                stream.resource_version = None
                self.relists += 1
            except Exception as error:  # the connection, the API, a reply: recover and say so
                if self._stopping.is_set():
                    return
                why = api_reason(error) if isinstance(error, ApiException) else f"{type(error).__name__}: {error}"
                self._note(f"pod watch: {stream.what} in namespace {self.namespace}: {why}; retrying in {pause:g} s")
                self._stopping.wait(pause)
                pause = min(pause * 2, 10.0)

    def _on_pod(self, change: str, obj: Json) -> None:
        with self._lock:
            self._record(self._timeline.pod(obj, deleted=change == "DELETED"))

    def _on_pods_listed(self, uids: set[str]) -> None:
        with self._lock:  # a relist after 410: pods deleted meanwhile are in no list and sent no DELETED
            self._record(self._timeline.missing(uids))

    def _on_event(self, change: str, obj: Json) -> None:
        if change == "DELETED":  # an Event expiring (its TTL) says nothing new
            return
        with self._lock:
            self._record(self._timeline.event(obj))

    def _record(self, events: list[PodEvent]) -> None:
        for event in events:
            try:
                self.record(event)
            except Exception as error:  # a store that fails must not end the watch; the loss is said
                self._note(f"pod watch: recording {event.kind} of pod {event.pod} failed: "
                           f"{type(error).__name__}: {error}")
                continue
            self.recorded += 1

    def _note(self, line: str) -> None:
        logger.warning("%s", line)
        self.errors = [*self.errors[-(KEPT_ERRORS - 1):], line]
