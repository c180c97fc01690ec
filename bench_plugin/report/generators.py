"""The load generators in one line: how many processes sent the load, and how their number was decided.

``load generators: 5 processes under a master (auto: peak 2.30 cores at stage x4 (embedding 3,000 req/s), at
0.5 core a process; 16 cores, 3 for the servers, 1 for the master)``. Said by the launch when the campaign
starts (launch/record.py), and by summary.md, report.md and the terminal's answer from summary.json's
``load_generators``; the web UI's campaign tab says how the number was decided beside who is connected.
"""

from __future__ import annotations

from bench_plugin.results.summary import GeneratorSizing, LoadGenerators

PREFIX = "load generators: "
"""What the line starts with; the conditions' table says it without."""


def generators_phrase(generators: LoadGenerators | None) -> str | None:
    """How many processes sent the load and how their number was decided (the line without its prefix); None where
    nothing of them was recorded."""
    if generators is None:
        return None
    took_part = len(generators.processes) or None
    if generators.sizing is not None:
        return sizing_text(generators.sizing, took_part)
    if took_part is None:  # a master whose workers did not say where they ran (a bench-plugin from before)
        return "workers under a master"
    return _count(took_part, generators.master is not None)


def generators_line(generators: LoadGenerators | None) -> str | None:
    """The line for a campaign's recorded load generators; None where nothing of them was recorded."""
    text = generators_phrase(generators)
    return None if text is None else PREFIX + text


def sizing_text(sizing: GeneratorSizing, took_part: int | None = None) -> str:
    """A decision, with how many processes took part where known (else how many were asked for)."""
    n = took_part if took_part is not None else sizing.processes
    distributed = sizing.decided == "workers" or (sizing.processes or 0) > 1
    count = _count(n, distributed) if n is not None else "workers started by hand under a master"
    return f"{count} ({decision_text(sizing)})"


def sizing_line(sizing: GeneratorSizing, took_part: int | None = None) -> str:
    """The line for a decision (:func:`sizing_text` after the prefix)."""
    return PREFIX + sizing_text(sizing, took_part)


def _count(n: int, distributed: bool) -> str:
    if not distributed:
        return "1 process, the local runner" if n == 1 else f"{n} processes"
    return f"{n} process{'es' if n != 1 else ''} under a master"


def decision_text(sizing: GeneratorSizing) -> str:
    """How the number was decided, in words: ``auto: <why>``, ``--processes 2 given; the sizing gives 1: <why>``."""
    if sizing.decided == "auto":
        return f"auto: {sizing.why}"
    given = (f"--processes {sizing.processes} given" if sizing.decided == "given"
             else "--master, workers started by hand")
    if sizing.sized is not None and sizing.sized != sizing.processes:
        return f"{given}; the sizing gives {sizing.sized}: {sizing.why}"
    return given
