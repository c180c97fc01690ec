"""What reading an embedding reply costs the load generator's loop: json.loads against the users' typed decode.

    .venv/bin/python benchmarks/reply_parse.py [--trials 20]

For replies of OpenAI's embeddings shape (N vectors of D float32 values, as JSON floats the way Python's
json writes a vLLM reply, or as base64), in a process monkey-patched by gevent as Locust's are, it
measures side by side:

- the decode time of ``json.loads`` (what the plugin used before) and of the users' own decode
  (``bench_plugin.users.shapes.decode_embeddings`` with ``gevent.idle`` between pieces, as
  users/embedding.py calls it), median over ``--trials``;
- the longest the users' decode holds the event loop at once: the longest stretch between two turns of
  the loop while it runs, read by a loop hook (the same kind of hook the stall monitor uses);
- how late a sender leaves whose send time falls halfway through the decode: a greenlet waits for that
  time on the process's alarm (loadgen/alarm.py, as a request does) while the reply is decoded, once with
  each; the median and largest lateness over the trials.

Prints a markdown table (docs/benchmarks.md, "Reading a reply").
"""

from __future__ import annotations

from gevent import monkey

monkey.patch_all()

import argparse  # noqa: E402 (after the patching, as in a Locust process)
import base64  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import statistics  # noqa: E402
import struct  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from typing import Any  # noqa: E402

import gevent  # noqa: E402

from bench_plugin.loadgen.alarm import wait_until  # noqa: E402
from bench_plugin.users.shapes import decode_embeddings  # noqa: E402

SHAPES = ((16, 384, "float"), (16, 1024, "float"), (16, 1024, "base64"), (64, 1024, "float"),
          (64, 4096, "float"), (64, 4096, "base64"))
"""(vectors, dimensions, encoding): a MiniLM batch, bench-embedding-large's batch of 16 both ways, and larger ones."""


def reply(vectors: int, dims: int, encoding: str) -> bytes:
    """A reply of unit-scale float32 values, written as vLLM's server writes them."""
    rng = random.Random(vectors * 10_000 + dims)
    data = []
    for i in range(vectors):
        values = struct.unpack(f"<{dims}f", struct.pack(f"<{dims}f", *(rng.gauss(0, 0.03) for _ in range(dims))))
        vector: Any = base64.b64encode(struct.pack(f"<{dims}f", *values)).decode() if encoding == "base64" else values
        data.append({"index": i, "object": "embedding", "embedding": vector})
    return json.dumps({"object": "list", "data": data, "model": "m", "usage": {"prompt_tokens": 1}}).encode()


class Stretches:
    """The longest stretch the loop ran without polling while ``run`` ran (ms)."""

    def __init__(self) -> None:
        loop = gevent.get_hub().loop
        self.check = loop.check(ref=False, priority=loop.MAXPRI)
        self.prepare = loop.prepare(ref=False, priority=loop.MINPRI)
        self.since: float | None = None
        self.longest = 0.0

    def _turned(self) -> None:
        self.since = time.perf_counter()

    def _polling(self) -> None:
        if self.since is not None:
            self.longest = max(self.longest, (time.perf_counter() - self.since) * 1000)
        self.since = None

    def run(self, work: Callable[[], Any]) -> float:
        self.longest = 0.0
        self.check.start(self._turned)
        self.prepare.start(self._polling)
        try:
            gevent.sleep(0.002)  # a whole turn of the loop with the hooks in place
            self.longest = 0.0
            gevent.spawn(work).join()
            gevent.sleep(0.002)  # the loop turns again: the stretch the work ran in is closed by the hook
        finally:
            self.check.stop()
            self.prepare.stop()
        return self.longest


def lateness(decode: Callable[[], Any], halfway_s: float) -> float:
    """How late (ms) a sender due ``halfway_s`` after the decode starts leaves."""
    late: list[float] = []

    def sender(due: float) -> None:
        wait_until(due)
        late.append((time.time() - due) * 1000)

    sending = gevent.spawn(sender, time.time() + halfway_s)
    gevent.sleep(0)  # the sender waits for its time
    decode()
    sending.join()
    return late[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=20)
    args = parser.parse_args()
    stretches = Stretches()
    print("| reply (vectors x dims, encoding) | size | json.loads | the users' decode | its longest hold of the "
          "loop | a send due halfway: late with json.loads (median, max) | late with the users' decode (median, "
          "max) |")
    print("|---|---|---|---|---|---|---|")
    for vectors, dims, encoding in SHAPES:
        body = reply(vectors, dims, encoding)
        ours = lambda b=body: decode_embeddings(b, gevent.idle)  # noqa: E731
        whole, typed, holds, late_whole, late_typed = [], [], [], [], []
        for _ in range(args.trials):
            start = time.perf_counter()
            json.loads(body)
            whole.append(time.perf_counter() - start)
            start = time.perf_counter()
            ours()
            typed.append(time.perf_counter() - start)
            holds.append(stretches.run(ours))
            late_whole.append(lateness(lambda b=body: json.loads(b), statistics.median(whole) / 2))
            late_typed.append(lateness(ours, statistics.median(typed) / 2))
        print(f"| {vectors} x {dims}, {encoding} | {len(body) / 1e3:,.0f} KB "
              f"| {statistics.median(whole) * 1000:.2f} ms | {statistics.median(typed) * 1000:.2f} ms "
              f"| {statistics.median(holds):.2f} ms (max {max(holds):.2f}) "
              f"| {statistics.median(late_whole):.2f}, {max(late_whole):.2f} ms "
              f"| {statistics.median(late_typed):.2f}, {max(late_typed):.2f} ms |")


if __name__ == "__main__":
    main()
