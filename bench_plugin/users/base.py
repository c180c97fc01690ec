"""WorkloadUser: the user class of one workload class, and the sender of that class's share of each stage.

A Locust user normally models one closed-loop client. Open-loop load needs requests to leave at
their intended times whether or not earlier ones have returned, so the plugin makes one instance of
each class's user class per load-generating process (``sender``) and its LoadState runs that
instance's share of every stage (loadgen/state.py): a greenlet per arrival, on the instance's
FastHttpUser connection pool. Locust never spawns these users (the campaign's shape asks for none),
so how Locust spreads users over workers cannot change who sends what. Latency is measured from the
intended send time; the gap to the actual send is the client's queueing. Closed loop
(``arrival: closed``) runs N request loops instead, and is labelled so in every result.

Every request is reported to Locust's own statistics once, with ``request_type`` = the class, so Locust's
table splits per class and its total RPS counts requests. TTFT and TPOT are not entries there (Locust
would add them to its RPS, counting each LLM request three times): the plugin's own tabs, /bench/metrics
and the results hold them.
"""

from __future__ import annotations

import http.client
import itertools
import json
import math
import time
import zlib
from dataclasses import dataclass, field
from typing import Any, ClassVar

import gevent
from gevent.lock import BoundedSemaphore
from locust import constant, task
from locust.contrib.fasthttp import FastHttpUser, ResponseContextManager
from locust.env import Environment

from bench_plugin.loadgen.alarm import wait_until
from bench_plugin.loadgen.arrivals import OPEN_LOOP, arrival_offsets, item_order
from bench_plugin.loadgen.shares import Share
from bench_plugin.loadgen.state import ClassLoad, LoadState, StageAssignment
from bench_plugin.results.samples import Sample
from bench_plugin.scenario.request_sets import RequestItem
from bench_plugin.users.body import TooLarge, read_all

PREPARE_AHEAD_S = 0.005
"""Each request is taken (built the first time its item is drawn in a stage) at least this long before its
send time, so building it never delays the send; it then waits for its time on the process's alarm
(loadgen/alarm.py), which wakes it to a fraction of a millisecond without spinning. The arrival loop wakes
this long before an arrival and takes with it every arrival that follows the one before within this long (up
to TAKE_AHEAD_MAX_S past the wake), not one wake per arrival: the process is then never idle longer than this
before a send, whether an alarm wakes it or the loop (at 150 req/s, Poisson, about half the loop's wakes go).

Waking the arrival loop at the send time instead saves that early wake (about 5% of the CPU per request at
20 ASR req/s on the project's 2-core machine), and costs the send's precision: the send lag P50 went from
0.14 to 0.31 ms and its P99 from 0.37 to 1.8-2.8 ms, both when the loop handed the request over from its wake
and when it sent the request itself (its own work after the send). What differs is how long the process
slept before the wake that sends: 5 ms after the early wake, or the whole gap since the last request, and a
process woken after tens of milliseconds idle comes back later (on a virtual machine the idle virtual CPU is
halted). The early wake keeps the process warm for the send (docs/benchmarks.md, "Where the ASR class's
excess goes")."""

TAKE_AHEAD_MAX_S = 0.02
"""The furthest past its wake the arrival loop takes arrivals (PREPARE_AHEAD_S): a stage stopped early (a
rollback) still sends what was taken, so at most this much of its arrivals."""


class RequestFailed(Exception):
    """A request that came back wrong; the message says how (shown in Locust's failures table)."""

    def __init__(self, message: str, kind: str | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        """The sample's error kind, when the raiser knows it better than the HTTP status does."""


@dataclass(frozen=True)
class Prepared:
    """A request ready to go: absolute URL, Locust entry name, encoded body and headers.

    Built once per request-set item and stage, and sent as often as the stage draws that item.
    """

    url: str
    name: str
    body: bytes
    headers: dict[str, str]
    expect: dict[str, Any] = field(default_factory=dict)
    """What a correct reply must hold (e.g. the exact output length)."""
    sizes: dict[str, Any] = field(default_factory=dict)
    """Sample fields the request fixes (inputs, input_tokens, audio_s), copied into each of its samples."""


Built = dict[int, "Prepared | RequestFailed"]
"""A stage's requests built so far, by request-set item (or why an item's could not be built)."""


REQUEST_ID = "X-Request-Id"
"""Every request carries one, so a server's own log can be matched to the samples request by request."""


def request_id(sample: Sample) -> str:
    """``<worker>/<trial>.<segment>.<stage>/<class>/<arrival>``: unique within a campaign."""
    return f"{sample.worker}/{sample.trial}.{sample.segment}.{sample.stage}/{sample.workload}/{sample.seq}"


def json_request(url: str, name: str, body: dict[str, Any], sizes: dict[str, Any], **expect: Any) -> Prepared:
    """A Prepared JSON POST."""
    return Prepared(url, name, json.dumps(body).encode(), {"Content-Type": "application/json"}, expect, sizes)


def read_body(raw: Any, sample: Sample) -> bytes:
    """Read a whole reply body, stamping the sample's end time (users/body.py: the loop turns meanwhile);
    RequestFailed if it is over users/body.MAX_BODY_BYTES."""
    try:
        whole = read_all(raw)
    except TooLarge as exc:
        raise RequestFailed(str(exc), kind="protocol") from None
    sample.end_s = time.time()
    return whole


class WorkloadUser(FastHttpUser):
    """Base of the per-class drivers; subclasses implement ``prepare`` and ``read`` for their endpoint."""

    abstract = True
    workload: ClassVar[str] = ""
    wait_time = constant(0)
    host = "http://127.0.0.1"
    """Placeholder: each request goes to the absolute URL the current stage assigns to the class."""
    concurrency = 1024
    max_retries = 0
    network_timeout = None  # type: ignore[assignment]  # Locust annotates a float; geventhttpclient takes None
    """No timeout per socket operation: every exchange runs under its request's own deadline (the class's
    request_timeout_s, one gevent.Timeout), which bounds a silent server as well. A socket with a timeout
    starts and cancels a gevent Timeout, in Python, for every wait of every ``recv`` (gevent's
    ``_primitive_wait``), 64 for a 64-token stream; one without waits on the socket alone."""
    connection_timeout = 10.0

    state: LoadState
    """The LoadState of the process this sender belongs to."""

    def __init__(self, environment: Environment) -> None:
        super().__init__(environment)
        # No cookie jar: one sender carries every arrival of its class, each a client of its own, so a
        # cookie one reply set (a balancer's affinity cookie, say) must not follow the next request; and
        # the stdlib jar took a lock and parsed headers twice per request (about 6% of the sender's Python
        # time at 150 ASR req/s, docs/benchmarks.md).
        self.client.client.cookiejar = None

    @classmethod
    def sender(cls, environment: Environment, state: LoadState) -> WorkloadUser:
        """This class's sender for a process: an instance Locust does not spawn, used for its requests."""
        user = cls(environment)
        user.state = state
        return user

    @task
    def idle(self) -> None:
        """Nothing: Locust never needs to spawn these users (the LoadState runs each stage's shares)."""
        gevent.sleep(1.0)

    def run_share(self, assignment: StageAssignment, share: Share) -> None:
        """Send this class's ``share`` of the stage (open loop), or its share of the request loops (closed)."""
        load = assignment.classes[self.workload]
        if load.load <= 0:
            return
        slots = BoundedSemaphore(load.max_in_flight)
        if load.arrival in OPEN_LOOP:
            self._open_loop(assignment, load, share, slots)
        else:
            self._closed_loop(assignment, load, share, slots)

    def _open_loop(self, a: StageAssignment, load: ClassLoad, share: Share, slots: BoundedSemaphore) -> None:
        offsets = arrival_offsets(load.arrival, load.load, a.duration_s, a.seed, self.workload, a.stage)
        items = item_order(len(self._requests()), len(offsets), a.seed, self.workload, a.stage)
        built: Built = {}
        awake_until = horizon = 0.0
        for k in share.of(len(offsets)):
            intended = a.start_s + float(offsets[k])
            if intended > awake_until:  # one wake takes a chain of arrivals: see PREPARE_AHEAD_S
                if not self.state.sleep_until(intended - PREPARE_AHEAD_S, a.key):
                    return
                now = time.time()
                awake_until, horizon = now + PREPARE_AHEAD_S, now + TAKE_AHEAD_MAX_S
            elif not self.state.is_active(a.key):
                return
            token = self.state.begin(self.workload, a.key, intended)  # in flight from now: see LoadState.begin
            self.state.spawn(self._one, a, load, slots, built, k, int(items[k]), intended, token)
            awake_until = min(max(awake_until, intended + PREPARE_AHEAD_S), horizon)

    def _closed_loop(self, a: StageAssignment, load: ClassLoad, share: Share, slots: BoundedSemaphore) -> None:
        seq = itertools.count()
        order = item_order(len(self._requests()), len(self._requests()), a.seed, self.workload, a.stage)
        built: Built = {}
        if not self.state.sleep_until(a.start_s, a.key):
            return

        def loop() -> None:
            while self.state.is_active(a.key) and time.time() < a.end_s:
                k = next(seq)
                now = time.time()
                token = self.state.begin(self.workload, a.key, now)
                self._one(a, load, slots, built, k, int(order[k % len(order)]), now, token)

        for _ in share.of(int(load.load)):
            self.state.spawn(loop)
        self.state.wait_stop(a.key, a.end_s)

    def _requests(self) -> list[RequestItem]:
        return self.state.request_sets[self.workload].items

    def _built(self, load: ClassLoad, built: Built, item: int) -> Prepared:
        """Request ``item`` of the stage: built the first time it is drawn, the same object after that."""
        request = built.get(item)
        if request is None:
            try:
                request = built[item] = self.prepare(load, self._requests()[item])
            except RequestFailed as exc:
                request = built[item] = exc
        if isinstance(request, RequestFailed):
            raise request
        return request

    def _one(self, a: StageAssignment, load: ClassLoad, slots: BoundedSemaphore, built: Built, seq: int,
             item: int, intended: float, token: int) -> None:
        """Take request ``item``, send it at ``intended``, record its sample whatever happens.

        ``token`` is the request's entry among the process's requests in flight (LoadState.begin).
        """
        sample = Sample(
            workload=self.workload, trial=a.trial, segment=a.segment, stage=a.stage, seq=seq, item=item,
            intended_s=intended, sent_s=intended, end_s=0.0, ok=False, worker=self.state.worker_id,
        )
        try:
            prepared = self._built(load, built, item)
            for name, value in prepared.sizes.items():
                setattr(sample, name, value)
            wait_until(intended)
            sample.slot_wait_s = 0.0 if slots.acquire(blocking=False) else _slot_wait(slots)
            try:
                self._timed_exchange(prepared, load, sample)
            finally:
                slots.release()
        except RequestFailed as exc:
            sample.ok, sample.error, sample.detail = False, exc.kind or "protocol", str(exc)
        except gevent.GreenletExit:
            sample.ok, sample.error, sample.detail = False, "cancelled", "the run stopped before the reply"
            raise
        finally:
            self.state.end(token)
            if not sample.end_s:
                sample.end_s = time.time()
            self.state.record(sample)

    def probe(self, load: ClassLoad, item: RequestItem) -> Sample:
        """Send the request of ``item`` now, outside any stage, read and judged as a stage's would be; its sample.

        What readiness sends (bench_plugin.run.readiness). It goes to Locust's statistics only if this user's
        client reports there: the campaign's probing user has its own, silent, request event.
        """
        now = time.time()
        sample = Sample(workload=self.workload, trial=0, segment=0, stage=-1, seq=0, item=-1, intended_s=now,
                        sent_s=now, end_s=0.0, ok=False, worker=self.state.worker_id)
        try:
            self._timed_exchange(self.prepare(load, item), load, sample, identified=False)
        except RequestFailed as exc:
            sample.ok, sample.error, sample.detail = False, exc.kind or "protocol", str(exc)
        sample.end_s = sample.end_s or time.time()
        return sample

    def prepare(self, load: ClassLoad, item: RequestItem) -> Prepared:
        """Build the request for ``item``, with the sample fields it fixes (``Prepared.sizes``)."""
        raise NotImplementedError

    def read(self, raw: Any, load: ClassLoad, prepared: Prepared, sample: Sample) -> None:
        """Read the reply body from geventhttpclient's response ``raw``; set ``sample.ok`` or raise RequestFailed."""
        raise NotImplementedError

    def _timed_exchange(self, prepared: Prepared, load: ClassLoad, sample: Sample, identified: bool = True) -> None:
        """_exchange under the request's deadline (the class's ``timeout_s``): RequestFailed of kind ``timeout``
        when it passes. The timer raises itself, told apart from any other timeout by identity, so the error and
        its message are built only for a request that ran out of time, not for every request."""
        timer = gevent.Timeout(load.timeout_s)
        try:
            with timer:
                self._exchange(prepared, load, sample, identified)
        except gevent.Timeout as fired:
            if fired is not timer:
                raise
            raise RequestFailed(f"no reply within {load.timeout_s:g} s", kind="timeout") from None

    def _exchange(self, prepared: Prepared, load: ClassLoad, sample: Sample, identified: bool = True) -> None:
        """POST ``prepared``; report the outcome in ``sample`` and to Locust (latency from the intended time).

        ``identified``: with an X-Request-Id, as every measured request has (unmeasured ones, such as a
        readiness probe, go without, so a server's log tells them apart)."""
        headers = {**prepared.headers, REQUEST_ID: request_id(sample)} if identified else dict(prepared.headers)
        sample.sent_s = time.time()
        with self.client.request("POST", prepared.url, name=prepared.name, catch_response=True, stream=True,
                                 data=prepared.body, headers=headers) as resp:  # type: ignore[arg-type]
            error = getattr(resp, "error", None)
            status = resp.status_code or None
            sample.status = status
            try:
                if error is not None or status is None or status >= 400:
                    raise RequestFailed(_error_detail(resp, error))
                # FastResponse keeps geventhttpclient's response, body unread, in _response.
                try:
                    self.read(resp._response, load, prepared, sample)
                    sample.server_queue_s, sample.server_compute_s = server_times(resp.headers)
                except (http.client.HTTPException, OSError) as exc:  # geventhttpclient's HTTPParseError is one
                    # the connection ended (or broke) before the reply did: a server that died mid-reply
                    raise RequestFailed(f"reply cut off while reading its body: {type(exc).__name__}: {exc}",
                                        kind="connection") from None
            except RequestFailed as exc:
                sample.ok = False
                sample.error = exc.kind or _error_kind(status, error)
                sample.detail = str(exc)[:500]
            finally:
                sample.end_s = sample.end_s or time.time()
                resp.request_meta["request_type"] = self.workload
                resp.request_meta["response_time"] = sample.latency_ms
                if sample.ok:
                    resp.success()
                else:
                    resp.failure(RequestFailed(sample.detail or sample.error or "failed"))


QUEUE_TIME_HEADER = "x-queue-time"
INFERENCE_TIME_HEADER = "x-inference-time"


def server_times(headers: Any) -> tuple[float | None, float | None]:
    """The server's own split of a reply's time, in seconds, where it says it: TEI's (and the reference servers')
    ``x-queue-time`` and ``x-inference-time`` headers, in milliseconds. None for a header absent or not a number."""
    if not headers:
        return None, None
    return _seconds(headers.get(QUEUE_TIME_HEADER)), _seconds(headers.get(INFERENCE_TIME_HEADER))


def _seconds(ms: Any) -> float | None:
    if ms is None:
        return None
    try:
        value = float(ms) / 1000.0
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) and value >= 0.0 else None


def _slot_wait(slots: BoundedSemaphore) -> float:
    """Wait for a slot when none was free; the seconds spent waiting."""
    began = time.time()
    slots.acquire()
    return time.time() - began


def _error_kind(status: int | None, error: Exception | None) -> str:
    if status and status >= 400:
        return f"http_{status}"
    if error is not None:
        text = f"{type(error).__name__} {error}".lower()
        if "timeout" in text or "timed out" in text:
            return "timeout"
        if isinstance(error, ConnectionError | OSError) or "connection" in text:
            return "connection"
    return "protocol"


def _error_detail(resp: ResponseContextManager, error: Exception | None) -> str:
    status = resp.status_code
    if status and status >= 400:
        return f"HTTP {status}: {_error_body(resp)[:300]}"
    return f"{type(error).__name__}: {error}" if error is not None else "no response"


ERROR_BODY_BYTES = 1 << 20
"""The most of an error reply's body read for its message (a server may send an endless one)."""


def _error_body(resp: ResponseContextManager) -> str:
    """The start of an error reply's body, as text (gzip or deflate undone)."""
    try:
        cached = getattr(resp, "_cached_content", None)  # the client read it already (it does for some statuses)
        if isinstance(cached, bytes):
            return cached.decode("utf-8", errors="replace")
        try:
            raw = read_all(resp._response, limit=ERROR_BODY_BYTES)
        except TooLarge:
            return f"(a body over {ERROR_BODY_BYTES >> 20} MiB)"
        encoding = str(resp.headers.get("content-encoding") or "").lower() if resp.headers else ""
        if encoding in ("gzip", "deflate"):
            raw = zlib.decompressobj(47).decompress(raw, 4096)  # 47: a gzip or zlib header, detected
        return raw.decode("utf-8", errors="replace")
    except Exception as exc:  # the body itself may be unreadable; the status still says enough
        return f"(body unreadable: {exc})"
