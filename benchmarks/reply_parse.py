"""What parsing an embedding reply costs the load generator's loop: json.loads against users/jsonreply.py.

    .venv/bin/python benchmarks/reply_parse.py [--trials 20]

For replies of OpenAI's embeddings shape (N vectors of D random floats, as `json.dumps` writes them),
in a process monkey-patched by gevent as Locust's are, it measures side by side:

- the parse time of ``json.loads`` and of ``jsonreply.loads`` (pausing with ``gevent.idle()``), median
  over ``--trials``;
- how late a sender leaves whose send time falls halfway through the parse: a greenlet waits for
  that time with the users' own ``wait_until`` while the reply is parsed, once with each parser; the
  median and largest lateness over the trials.

Prints a markdown table (docs/benchmarks.md, "Send lag on a GPU host").
"""

from __future__ import annotations

from gevent import monkey

monkey.patch_all()

import argparse  # noqa: E402 (after the patching, as in a Locust process)
import json  # noqa: E402
import random  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from typing import Any  # noqa: E402

import gevent  # noqa: E402

from bench_plugin.users import jsonreply  # noqa: E402
from bench_plugin.users.base import wait_until  # noqa: E402

SHAPES = ((16, 384), (16, 1024), (64, 1024), (64, 4096))
"""(vectors, dimensions): a MiniLM batch, bench-embedding-large's batch of 16, and two larger ones."""


def reply(vectors: int, dims: int) -> bytes:
    rng = random.Random(vectors * 10_000 + dims)
    data = [{"object": "embedding", "index": i, "embedding": [rng.gauss(0, 1) for _ in range(dims)]}
            for i in range(vectors)]
    return json.dumps({"object": "list", "data": data, "model": "m", "usage": {"prompt_tokens": 1}}).encode()


def lateness(parse: Callable[[], Any], halfway_s: float) -> float:
    """How late (ms) a sender due ``halfway_s`` after the parse starts leaves."""
    late: list[float] = []

    def sender(due: float) -> None:
        wait_until(due)
        late.append((time.time() - due) * 1000)

    sending = gevent.spawn(sender, time.time() + halfway_s)
    gevent.sleep(0)  # the sender waits for its time
    parse()
    sending.join()
    return late[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=20)
    args = parser.parse_args()
    print("| reply (vectors x dims) | size | json.loads | in pieces | a send due halfway: late with json.loads "
          "(median, max) | late in pieces (median, max) |")
    print("|---|---|---|---|---|---|")
    for vectors, dims in SHAPES:
        body = reply(vectors, dims)
        whole, pieces, late_whole, late_pieces = [], [], [], []
        for _ in range(args.trials):
            start = time.perf_counter()
            json.loads(body)
            whole.append(time.perf_counter() - start)
            start = time.perf_counter()
            jsonreply.loads(body, gevent.idle)
            pieces.append(time.perf_counter() - start)
            halfway = statistics.median(whole) / 2
            late_whole.append(lateness(lambda b=body: json.loads(b), halfway))
            late_pieces.append(lateness(lambda b=body: jsonreply.loads(b, gevent.idle), halfway))
        print(f"| {vectors} x {dims} | {len(body) / 1e3:,.0f} KB | {statistics.median(whole) * 1000:.2f} ms | "
              f"{statistics.median(pieces) * 1000:.2f} ms | {statistics.median(late_whole):.2f}, "
              f"{max(late_whole):.2f} ms | {statistics.median(late_pieces):.2f}, {max(late_pieces):.2f} ms |")


if __name__ == "__main__":
    main()
