"""Variants of how the plugin sends, for benchmarks/loadgen_capacity.py --variant: each changes one thing.

The benchmark's locustfile (loadgen_locustfile.py) applies BENCH_VARIANT in every process it starts, so a
CPU-per-request run with a variant against one without says what that one thing costs per request, beside
bare Locust in the same run. Import changes nothing; ``apply`` does, in the calling process only.
"""

from __future__ import annotations

VARIANTS = {
    "no-alarm": "each request waits for its send time on gevent's own timer (to the millisecond, as bare "
                "Locust's waits) instead of the process's alarm (bench_plugin/loadgen/alarm.py)",
    "lead-20ms": "the arrival loop wakes 20 ms ahead of an arrival, not 5 (users/base.py's PREPARE_AHEAD_S), "
                 "and takes arrivals up to 50 ms past its wake: about a fifth as many of its own wakes at 150/s",
    "alarm-default-priority": "the alarm's watcher at the event loop's default priority (bench_plugin/loadgen/"
                              "alarm.py's PRIORITISED off): a turn of the loop that finds the timer expired and "
                              "replies ready wakes the due sends in whatever order the poll returned them",
    "whole-read": "an embedding reply of lists of numbers is read whole (every byte located by msgspec in one "
                  "step, then each list counted), not a vector at a time (users/shapes.py's _by_vector): the "
                  "loop turns only after the whole reply",
}
"""Name -> what it changes."""


def apply(name: str) -> None:
    """Change what variant ``name`` says (VARIANTS), in this process; SystemExit naming it if it is unknown."""
    from bench_plugin.loadgen import alarm
    from bench_plugin.users import base, shapes

    if name == "no-alarm":
        alarm.alarm = lambda: None  # wait_until then sleeps on gevent's timer, as where timerfd is missing
    elif name == "lead-20ms":
        base.PREPARE_AHEAD_S, base.TAKE_AHEAD_MAX_S = 0.020, 0.050
    elif name == "alarm-default-priority":
        alarm.PRIORITISED = False  # read when the process's alarm is made, at its first wait
    elif name == "whole-read":
        shapes._by_vector = lambda body, pause: None  # decode_embeddings then reads every reply whole
    else:
        raise SystemExit(f"BENCH_VARIANT {name!r} is not one of {', '.join(VARIANTS)}")
