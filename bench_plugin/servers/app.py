"""Shared aiohttp pieces: OpenAI-style errors, health/models/metrics routes, run loop.

Every server is one aiohttp application built by :func:`create_app` plus its own
routes, and a :class:`Backend` that loads the model off the event loop. The HTTP
socket listens at once; ``/health`` answers 503 until the backend reports that the
model is built and warmed (vLLM/TEI semantics), so orchestrators can wait on it.
This module must stay torch-free (the synthetic server uses it).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import signal
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from aiohttp import web

from .metrics import ServerMetrics

log = logging.getLogger("bench_plugin.servers")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
# Bodies up to this size are accepted (a 30 s 48 kHz stereo WAV is ~5.8 MB).
MAX_BODY_BYTES = 64 * 1024 * 1024
# Seconds in-flight requests get to finish once a shutdown signal arrives: on SIGTERM the server stops
# accepting, closes its idle connections and finishes what it has (vLLM's and TEI's graceful shutdown),
# then stops the model; whoever sent the signal decides how long to wait before SIGKILL (the local
# backend: a disruption's grace_s, 10 s at a segment's end).
SHUTDOWN_GRACE_S = 30.0
# Status recorded (metrics, timing log) for a client that disconnected mid-response (nginx's code).
CLIENT_GONE_STATUS = 499


class ApiError(Exception):
    """A request failure reported to the client as OpenAI-style error JSON."""

    def __init__(
        self,
        message: str,
        *,
        status: int = 400,
        param: str | None = None,
        code: str | None = None,
        err_type: str = "invalid_request_error",
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.param = param
        self.code = code
        self.err_type = err_type

    def payload(self) -> dict[str, Any]:
        """The ``{"error": {...}}`` body OpenAI clients expect."""
        return {"error": {"message": self.message, "type": self.err_type, "param": self.param, "code": self.code}}

    def to_response(self) -> web.Response:
        """A JSON response carrying this error and its status."""
        return web.json_response(self.payload(), status=self.status)


class ClientDisconnected(Exception):
    """The client went away mid-stream; carries the response that was already started."""

    def __init__(self, response: web.StreamResponse) -> None:
        super().__init__("client disconnected")
        self.response = response


def post_to_loop(loop: asyncio.AbstractEventLoop, callback: Callable[..., object], *args: object) -> None:
    """``loop.call_soon_threadsafe`` for worker threads, tolerating a loop already closed at shutdown."""
    # RuntimeError means the event loop is closed: nobody is waiting for this result any more.
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(callback, *args)


class LoopRelay:
    """Runs callbacks from worker threads on one event loop, waking it once per burst.

    An LLM decode step hands a token to every sequence at once (64 at batch 64): one
    ``call_soon_threadsafe`` each would be 64 self-pipe writes and loop wake-ups per step,
    all competing with the engine thread for the GIL. Callbacks queued while a flush is
    already scheduled ride along with it, in order.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._lock = threading.Lock()
        self._pending: list[tuple[Callable[..., object], tuple[object, ...]]] = []

    def call(self, callback: Callable[..., object], *args: object) -> None:
        """Run ``callback(*args)`` on the loop soon (any thread)."""
        with self._lock:
            self._pending.append((callback, args))
            if len(self._pending) > 1:  # a flush is already scheduled and will take this one too
                return
        post_to_loop(self.loop, self._flush)

    def _flush(self) -> None:
        with self._lock:
            batch, self._pending = self._pending, []
        for callback, args in batch:
            callback(*args)


def model_not_found(name: str) -> ApiError:
    """The 404 answered when a request names a model this server does not serve."""
    return ApiError(f"The model `{name}` does not exist.", status=404, param="model", code="model_not_found")


class Backend(Protocol):
    """The model side of a server: loads in the background, then serves requests."""

    def start(self, on_ready: Callable[[], object], on_error: Callable[[BaseException], object]) -> None:
        """Begin building and warming the model; call exactly one callback when done.

        Callbacks may be called from any thread.
        """

    def stop(self) -> None:
        """Ask worker threads to finish; must not block for long."""


class ServerState:
    """Identity and readiness of one running server, shared by all routes."""

    def __init__(self, kind: str, model_name: str, device: str, metrics: ServerMetrics) -> None:
        self.kind = kind
        self.model_name = model_name
        self.device = device
        self.metrics = metrics
        self.created = int(time.time())
        self.ready = False
        self.exit_code = 0
        self.stop_event: asyncio.Event | None = None
        metrics.ready.set(0)

    def mark_ready(self) -> None:
        """Flip /health to 200 and announce readiness on stdout (on the event loop)."""
        self.ready = True
        self.metrics.ready.set(1)
        print(f"bench-server ready: {self.kind} {self.model_name} on {self.device}", flush=True)

    def fail(self, exc: BaseException) -> None:
        """Report a fatal loading error and stop the server with exit code 1."""
        print(f"bench-server error: {self.kind} failed to load: {exc!r}", file=sys.stderr, flush=True)
        self.exit_code = 1
        if self.stop_event is not None:
            self.stop_event.set()

    def check_model(self, body: dict[str, Any]) -> None:
        """Reject a request naming another model; a missing model field is accepted."""
        name = body.get("model")
        if name is None:
            return
        if not isinstance(name, str):
            raise ApiError("'model' must be a string", param="model")
        if name != self.model_name:
            raise model_not_found(name)


def _endpoint_label(request: web.Request) -> str:
    route = request.match_info.route
    resource = route.resource if route is not None else None
    return resource.canonical if resource is not None else "unmatched"


def _error_middleware(metrics: ServerMetrics) -> Any:
    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            response = await handler(request)
        except ApiError as exc:
            response = exc.to_response()
        except ClientDisconnected as exc:
            # Nothing more can be sent; aiohttp quietly finishes the dead response.
            metrics.requests.labels(_endpoint_label(request), str(CLIENT_GONE_STATUS)).inc()
            return exc.response
        except web.HTTPException as exc:
            if exc.status < 400:
                raise
            # aiohttp's own failures (unknown route, wrong method, body too large).
            code = "not_found" if exc.status == 404 else None
            message = f"{exc.reason}: {request.method} {request.path}"
            response = ApiError(message, status=exc.status, code=code).to_response()
        except Exception as exc:  # a genuine server fault: still answer JSON
            log.exception("internal error on %s", request.path)
            response = ApiError(f"internal server error: {exc!r}", status=500, err_type="server_error").to_response()
        metrics.requests.labels(_endpoint_label(request), str(response.status)).inc()
        return response

    return middleware


def create_app(state: ServerState) -> web.Application:
    """An application with the routes every server shares (health, models, metrics)."""
    app = web.Application(client_max_size=MAX_BODY_BYTES, middlewares=[_error_middleware(state.metrics)])

    async def health(_: web.Request) -> web.Response:
        if state.ready:
            return web.json_response({"status": "ready"})
        return web.json_response({"status": "loading"}, status=503)

    async def live(_: web.Request) -> web.Response:
        return web.json_response({"status": "alive"})

    async def models(_: web.Request) -> web.Response:
        card = {"id": state.model_name, "object": "model", "created": state.created, "owned_by": "bench-plugin"}
        return web.json_response({"object": "list", "data": [card]})

    async def metrics(_: web.Request) -> web.Response:
        body = state.metrics.render()
        return web.Response(body=body, headers={"Content-Type": state.metrics.content_type})

    app.router.add_get("/health", health)
    app.router.add_get("/health/live", live)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/metrics", metrics)
    return app


async def read_json_object(request: web.Request) -> dict[str, Any]:
    """The request body as a JSON object, or a 400 saying why it is not one."""
    raw = await request.read()
    if not raw:
        raise ApiError("request body is empty; expected a JSON object")
    try:
        body = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ApiError(f"request body is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise ApiError("request body must be a JSON object")
    return body


def serve(app: web.Application, state: ServerState, backend: Backend, host: str, port: int) -> int:
    """Listen on host:port, load the backend in the background, run until SIGTERM/SIGINT.

    Returns the process exit code: 0 after a signal, 1 if loading or binding failed.
    """
    return asyncio.run(_serve(app, state, backend, host, port))


async def _serve(app: web.Application, state: ServerState, backend: Backend, host: str, port: int) -> int:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    state.stop_event = stop
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    runner = web.AppRunner(app, handle_signals=False, access_log=None, shutdown_timeout=SHUTDOWN_GRACE_S)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port, reuse_address=True).start()
    except OSError as exc:
        print(f"bench-server error: cannot listen on {host}:{port}: {exc}", file=sys.stderr, flush=True)
        await runner.cleanup()
        return 1
    backend.start(
        on_ready=lambda: post_to_loop(loop, state.mark_ready),
        on_error=lambda exc: post_to_loop(loop, state.fail, exc),
    )
    await stop.wait()
    state.ready = False
    await runner.cleanup()  # drain: stop listening, close idle connections, let the requests in hand finish
    backend.stop()
    return state.exit_code
