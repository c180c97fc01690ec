"""Server metrics through Prometheus: a class's engine series over a stage's window, from a Prometheus that
scrapes its server, read into the same ServerPoints a direct read gives (telemetry/server_poller.py).

For a class whose ``metrics_url`` is ``prometheus`` (its server reachable by the cluster's Prometheus, not by the
load generator), once a segment has ended and Prometheus has scraped its last stage (``--prometheus-lag``):

1. which engine: an instant query at the stage's end for the names any engine exports (telemetry/engines.py),
   with the class's target labels (promql.py: a pod's ``namespace`` and ``pod``, else the ``instance``);
2. per quantity, the first of the engine's ways to read it whose series are all there, one range query per
   series over the stage's window (a counter asked with and without ``_total``, as its exporter spelt it;
   label sets summed, a share's largest), scaled and summed like a direct read.

What is missing or failed is a note, one line, never an error. The points are Prometheus' values at
``start + k * step``, so a quantity's resolution is its scrape interval at best.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from bench_plugin.results.server_rows import ServerPoint
from bench_plugin.telemetry import engines
from bench_plugin.telemetry.prometheus import PrometheusSeries, one_line
from bench_plugin.telemetry.promql import LabelSet, names_query, server_query


def spellings(name: str) -> list[str]:
    """How an exporter may have written the series the page parser calls ``name``: with and without ``_total``."""
    bare = name.removesuffix("_total")
    return [bare, f"{bare}_total"]


def read_names(read: engines.Read) -> list[str]:
    """The series names one read may be stored under in Prometheus."""
    if read.part == "value":
        return spellings(read.name)
    return [f"{read.name}_{read.part}"]


def every_name(known: Sequence[engines.Engine] = engines.ENGINES) -> list[str]:
    """Every series name any engine is recognised or read by, in each spelling."""
    names: set[str] = set()
    for engine in known:
        for marker in engine.marker:
            names.update(spellings(marker))
        for alternatives in engine.reads.values():
            for reads in alternatives:
                for read in reads:
                    names.update(read_names(read))
    return sorted(names)


@dataclass
class ClassSeries:
    """One class's server series over one stage, from Prometheus."""

    points: list[ServerPoint] = field(default_factory=list)
    engine: str | None = None
    names: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def query_class(prometheus: PrometheusSeries, workload: str, labels: LabelSet, start_s: float, end_s: float,
                step_s: float) -> ClassSeries:
    """``workload``'s server series over ``[start_s, end_s]`` (see the module docstring); never raises for what
    Prometheus answers or fails to."""
    out = ClassSeries()
    where = ",".join(f"{k}={v}" for k, v in labels.items())
    try:
        found = {series.get("__name__", "") for series in prometheus.instant(names_query(every_name(), labels), end_s)}
    except prometheus.errors as exc:
        out.notes.append(f"{workload}: server series ({where}): query failed: {one_line(exc)}")
        return out
    page = engines.Page(totals=dict.fromkeys(found, 0.0), largest=dict.fromkeys(found, 0.0))
    engine = engines.recognise(page)
    if engine is None:
        out.notes.append(f"{workload}: no server series of a known engine ({engines.known_names()}) at {where}")
        return out
    out.engine = engine.name
    series: dict[float, dict[str, float]] = {}
    for quantity, alternatives in engine.reads.items():
        reads = next((r for r in alternatives if all(page.get(read) is not None for read in r)), None)
        if reads is None:
            continue
        summed: dict[float, float] = {}
        try:
            for read in reads:
                for t, value in prometheus.points(server_query(read_names(read), labels, read.largest), start_s,
                                                  end_s, step_s):
                    summed[t] = summed.get(t, 0.0) + value * read.scale
        except prometheus.errors as exc:
            out.notes.append(f"{workload}: {quantity}: query failed: {one_line(exc)}")
            continue
        out.names[str(quantity)] = "+".join(read.label() for read in reads)
        for t, value in summed.items():
            series.setdefault(t, {})[str(quantity)] = value
    out.points = [ServerPoint(t, workload, quantity, value) for t in sorted(series)
                  for quantity, value in series[t].items()]
    return out


def target_labels(url: str, pod: str | None) -> LabelSet:
    """The labels Prometheus gave a class's server as a target: its pod's (``namespace/name``), else its URL's
    ``instance`` (``host:port``)."""
    if pod:
        namespace, _, name = pod.partition("/")
        return {"namespace": namespace, "pod": name}
    return {"instance": urlsplit(url).netloc}


def query_stage(prometheus: PrometheusSeries, targets: Mapping[str, LabelSet], start_s: float, end_s: float,
                step_s: float) -> dict[str, ClassSeries]:
    """Each class's server series over one stage window."""
    return {workload: query_class(prometheus, workload, labels, start_s, end_s, step_s)
            for workload, labels in targets.items()}
