"""The reference of benchmarks/loadgen_capacity.py: bare Locust FastHttpUsers at a fixed total rate, no plugin.

    BARE_SCENARIO=s.yaml BARE_RATE=300 BARE_USERS=8 BARE_DIR=DIR \\
        locust --headless -f benchmarks/loadgen_bare.py -u 8 -r 8 --host URL BareEmbedding

Each user sends the plugin's own requests (every item of the class's request set, in turn, built by the
plugin's user code: loadgen_workloads.plugin_requests), at the times BARE_ARRIVALS says, and reads each
reply with the parser the plugin uses (bench_plugin.users.shapes): BareEmbedding reads the body and
decodes it whole (``decode_embeddings``), BareLLM streams it, splits its lines and decodes each ``data:``
event but ``[DONE]`` (``decode_chunk``), BareASR reads the body and decodes it
(``decode_transcription``). That is the least a Locust user that checks its replies does per request.

BARE_ARRIVALS says when the users send, BARE_RATE requests a second in all:

- ``poisson`` (the default): one Poisson stream, as the plugin's open-loop arrivals are; each user's
  ``wait_time`` takes the stream's next arrival and sleeps until it on gevent's timer (to the millisecond,
  as Locust's own waits are). The two senders then do the same work: as many sends, as far apart.
- ``paced``: each user paced with Locust's ``constant_throughput``. The users drift into step, and more
  of their sends share a wake of the process with another than a Poisson stream's can (ASR at 150/s:
  25-37% of completions within 1 ms of the one before, against 24% from ``poisson``; docs/benchmarks.md,
  "The bare reference's arrivals"). Kept to show that difference (``loadgen_capacity.py --bare-arrivals
  paced``).

The users start held (once they are spawned, ``BARE_DIR/ready`` appears). The benchmark runs rounds:
SIGUSR2 opens the gate (the Poisson stream starts then; paced, each user then starts at a random point of
its pacing period, so the users do not start in one burst), SIGUSR1 closes it and writes
``BARE_DIR/round-<n>.json``: the epoch time at which each request of the round completed (and the
failures), from which the benchmark counts the requests of its measured window.
"""

from __future__ import annotations

import json
import os
import random
import signal
import time
from functools import cache
from pathlib import Path
from typing import Any

import gevent
from gevent.event import Event
from loadgen_workloads import plugin_requests
from locust import constant_throughput, events, task
from locust.contrib.fasthttp import FastHttpUser

from bench_plugin.users.base import Prepared
from bench_plugin.users.shapes import ShapeError, decode_chunk, decode_embeddings, decode_transcription

RATE = float(os.environ.get("BARE_RATE", "100"))
USERS = max(1, int(os.environ.get("BARE_USERS", "32")))
PERIOD_S = USERS / RATE
"""Each user's pacing period (paced)."""
ARRIVALS = os.environ.get("BARE_ARRIVALS", "poisson")
if ARRIVALS not in ("poisson", "paced"):
    raise SystemExit(f"loadgen_bare: BARE_ARRIVALS {ARRIVALS!r} is not poisson or paced")

GATE = Event()
"""Set while a round runs."""


class Round:
    """The requests of the current round: completion times and failures."""

    def __init__(self) -> None:
        self.number = 0
        self.done: list[float] = []
        self.failed = 0
        self.reasons: dict[str, int] = {}

    def fail(self, reason: str) -> None:
        self.failed += 1
        self.reasons[reason[:120]] = self.reasons.get(reason[:120], 0) + 1

    def close(self, directory: Path) -> None:
        """Close the gate and write the round's record."""
        GATE.clear()
        self.number += 1
        record = {"round": self.number, "done": self.done, "failed": self.failed, "reasons": self.reasons}
        partial = directory / f".round-{self.number}.json"
        partial.write_text(json.dumps(record))
        partial.replace(directory / f"round-{self.number}.json")  # whole when it appears
        self.done, self.failed, self.reasons = [], 0, {}


ROUND = Round()


class Stream:
    """The Poisson arrivals of the current round (ARRIVALS poisson): each call of ``take`` is the next one."""

    def __init__(self) -> None:
        self.random = random.Random(20261207)
        self.last_s = 0.0

    def open(self) -> None:
        """The round opens now: its first arrival follows."""
        self.last_s = time.time()

    def take(self) -> float:
        """The next arrival's epoch time."""
        self.last_s += self.random.expovariate(RATE)
        return self.last_s


STREAM = Stream()


def _open() -> None:
    STREAM.open()
    GATE.set()


@cache
def _requests(workload: str) -> list[Prepared]:
    """The requests every user of ``workload`` cycles through (built once per process)."""
    return plugin_requests(Path(os.environ["BARE_SCENARIO"]), workload)


class BareUser(FastHttpUser):
    """One user: held while the gate is closed, then one request per arrival it takes (or per pacing period)."""

    abstract = True
    workload = ""
    paced = staticmethod(constant_throughput(1.0 / PERIOD_S))
    max_retries = 0
    concurrency = 1
    """A user has one request in flight at a time."""
    stream = False
    """Whether the reply is read as it arrives (a stream) rather than whole by the client."""

    def on_start(self) -> None:
        """Build the requests before the first is sent; start at a random item."""
        self.requests = _requests(self.workload)
        self.next = random.randrange(len(self.requests))

    def wait_time(self) -> float:
        """Poisson: the time to the stream's next arrival (none while the gate is closed); paced: Locust's
        ``constant_throughput``."""
        if ARRIVALS == "paced":
            return self.paced(self)  # type: ignore[call-arg]
        return max(0.0, STREAM.take() - time.time()) if GATE.is_set() else 0.0

    @task
    def one(self) -> None:
        """Wait for the gate if it is closed (paced: then a random part of the period), else send one request."""
        if not GATE.is_set():
            GATE.wait()
            if ARRIVALS == "paced":
                gevent.sleep(random.uniform(0.0, PERIOD_S))
            return
        request = self.requests[self.next]
        self.next = (self.next + 1) % len(self.requests)
        # geventhttpclient sends bytes as they are; Locust's annotation says str or dict only.
        with self.client.post(request.name, data=request.body, headers=request.headers,  # type: ignore[arg-type]
                              stream=self.stream, catch_response=True) as resp:
            try:
                why = self.read(resp) if resp.status_code == 200 else f"HTTP {resp.status_code}"
            except ShapeError as exc:
                why = str(exc)
            if why:
                resp.failure(why)
                ROUND.fail(why)
            else:
                ROUND.done.append(time.time())

    def read(self, resp: Any) -> str | None:
        """Read and decode the reply of ``resp``; what is wrong with it, or None."""
        raise NotImplementedError


class BareEmbedding(BareUser):
    """POST /v1/embeddings; the reply read whole and decoded."""

    workload = "embedding"

    def read(self, resp: Any) -> str | None:
        decode_embeddings(resp.content)
        return None


class BareLLM(BareUser):
    """POST /v1/chat/completions, streamed: the body read as it arrives, split into lines, each event decoded."""

    workload = "llm"
    stream = True

    def read(self, resp: Any) -> str | None:
        done, pending = False, b""
        for piece in resp.iter_content(chunk_size=65536, decode_content=False):
            *lines, pending = (pending + piece).split(b"\n")
            for line in lines:
                if not line.startswith(b"data:"):
                    continue
                data = line[5:].strip()
                if data == b"[DONE]":
                    done = True
                else:
                    decode_chunk(data)
        return None if done else "stream ended without data: [DONE]"


class BareASR(BareUser):
    """POST /v1/audio/transcriptions (multipart WAV); the reply read whole and decoded."""

    workload = "asr"

    def read(self, resp: Any) -> str | None:
        decode_transcription(resp.content)
        return None


@events.init.add_listener
def _on_init(environment: Any, **_: Any) -> None:
    directory = Path(os.environ.get("BARE_DIR", "."))
    gevent.signal_handler(signal.SIGUSR2, _open)
    gevent.signal_handler(signal.SIGUSR1, ROUND.close, directory)
    environment.events.spawning_complete.add_listener(lambda **_: (directory / "ready").touch())
