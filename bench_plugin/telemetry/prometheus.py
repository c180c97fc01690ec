"""Prometheus: each stage's DCGM GPU series from a Prometheus that scrapes dcgm-exporter, per workload class.

Use it where the GPUs are watched by dcgm-exporter and scraped by a Prometheus (a cluster with the
GPU operator), once per stage, after the stage ended::

    series = PrometheusSeries("http://prometheus.monitoring:9090")
    if not series.check(): ...                       # Availability: reachable, or a one-line reason
    result = series.query_stage(stage.started_s, stage.ended_s, 1.0, targets)
    recorder.add_stage_series(trial, segment, stage, "prometheus", result.rows, result.notes)

For each metric of promql.STAGE_METRICS it sends one range query (promql.py writes them) over the
stage's window through prometheus-api-client's ``PrometheusConnect.custom_query_range``, then gives
each returned series to every target whose label set selected it (promql.selects), as TelemetryRow:
``device`` is the target's device (or ``cuda:<gpu>``, ``<UUID>/<GPU_I_ID>`` from the labels),
``process`` is ``pod:<namespace>/<pod>`` where the series names a pod. A point is Prometheus's value
at ``start + k * step``: the newest sample at or before that moment (its lookback), so a point at
the window's start may come from the scrape just before it.

Nothing here raises for what a campaign meets in the field: a metric with no series for a class (a
dcgm-exporter without profiling counters, a MIG instance without power readings), a failed query and
an unreachable server each become a note, one line, in the result. custom_query_range sends start
and end rounded to whole seconds; the exact window goes in its ``params``, which it sends as given,
so a stage's points are the stage's own. The library is imported when a PrometheusSeries is made:
it comes with the ``prometheus`` extra, and the core install (load-generating pods) goes without it.
"""

from __future__ import annotations

import ast
import datetime as dt
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import requests

from bench_plugin.results.telemetry_rows import Availability, TelemetryRow
from bench_plugin.telemetry.exposition import LABEL_GPU, LABEL_MIG_ID, LABEL_UUID, LABEL_UUID_OLD
from bench_plugin.telemetry.promql import CHECK_QUERY, POD_PRECEDENCE, STAGE_METRICS, range_query, target_selects
from bench_plugin.telemetry.stage_series import ClassTarget, StageSeries

EXTRA_MISSING = "prometheus-api-client is not installed: pip install 'bench-plugin[prometheus]'"
MAX_POINTS = 11_000
"""Prometheus refuses a range query of more points per series than this (its query API's limit)."""
DEFAULT_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class _Series:
    labels: dict[str, str]
    points: list[tuple[float, float]]


def _load_client() -> tuple[Any, type[Exception]]:
    try:
        from prometheus_api_client.exceptions import PrometheusApiClientException
        from prometheus_api_client.prometheus_connect import PrometheusConnect
    except ImportError as exc:
        raise ImportError(EXTRA_MISSING) from exc
    return PrometheusConnect, PrometheusApiClientException


def _api_reason(text: str) -> str | None:
    """Prometheus's own error text from prometheus-api-client's ``HTTP Status Code N (b'<body>')`` message."""
    match = re.fullmatch(r"HTTP Status Code (\d+) \((b(['\"]).*\3)\)", text, re.S)
    if match is None:
        return None
    status = f"HTTP Status Code {match.group(1)}"
    try:
        body = json.loads(ast.literal_eval(match.group(2)).decode("utf-8", "replace"))
    except (ValueError, SyntaxError):  # not Prometheus's JSON (a proxy's page): the status says enough
        return status
    error = body.get("error") if isinstance(body, dict) else None
    return f"{status}: {error}" if error else status


def one_line(exc: BaseException) -> str:
    """An exception as one short line: the OS reason of a connection error, Prometheus's own error text."""
    text = str(exc)
    errno = re.search(r"\[Errno -?\d+\] ([^'\")]+)", text)
    line = errno.group(1) if errno else _api_reason(text) or text or type(exc).__name__
    line = " ".join(line.split())
    return line if len(line) <= 240 else line[:237] + "..."


def _timestamp(t: float) -> str:
    return f"{t:.3f}"


def _seconds(step_s: float) -> str:
    return f"{step_s:.3f}".rstrip("0").rstrip(".")


def _device(target: ClassTarget, labels: dict[str, str]) -> str:
    if target.device is not None:
        return target.device
    if labels.get(LABEL_MIG_ID):
        uuid = labels.get(LABEL_UUID) or labels.get(LABEL_UUID_OLD, "")
        return f"{uuid}/{labels[LABEL_MIG_ID]}"
    return f"cuda:{labels.get(LABEL_GPU, '?')}"


def _process(target: ClassTarget, labels: dict[str, str]) -> str | None:
    if target.pod is not None:
        return f"pod:{target.namespace}/{target.pod}"
    for dialect in POD_PRECEDENCE:
        if labels.get(dialect.pod):
            return f"pod:{labels.get(dialect.namespace, '')}/{labels[dialect.pod]}"
    return None


def _parse(data: Any) -> list[_Series]:
    """The ``result`` of a matrix answer as typed series; ValueError where it has another shape."""
    if not isinstance(data, list):
        raise ValueError(f"expected a list of series, got {type(data).__name__}")
    out = []
    for item in data:
        if not isinstance(item, dict) or not isinstance(item.get("metric"), dict) or "values" not in item:
            raise ValueError("a series without 'metric' and 'values': not a range query's answer")
        points = [(float(t), float(v)) for t, v in item["values"]]
        out.append(_Series({str(k): str(v) for k, v in item["metric"].items()}, points))
    return out


class PrometheusSeries:
    """Reads the DCGM series of one stage window per workload class from a Prometheus server.

    ``url``: the server's base URL (``http://host:9090``). ``timeout_s``: per request. ``retries``:
    how often a request that could not connect, or got a 502/503/504, is tried again (quick backoff).
    Raises ImportError, one line naming the extra, where prometheus-api-client is not installed.
    """

    def __init__(self, url: str, *, timeout_s: float = DEFAULT_TIMEOUT_S, retries: int = 1) -> None:
        connect, self._api_error = _load_client()
        from urllib3.util.retry import Retry

        self.url = url.rstrip("/")
        self.timeout_s = timeout_s
        retry = Retry(total=retries, backoff_factor=0.25, status_forcelist=(502, 503, 504))
        self._client: Any = connect(url=self.url, retry=retry, timeout=timeout_s)

    def close(self) -> None:
        """Release the HTTP session."""
        self._client.close()

    def __enter__(self) -> PrometheusSeries:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def check(self) -> Availability:
        """Whether the server answers a query now, with a one-line reason where it does not; never raises."""
        try:
            self._client.custom_query(CHECK_QUERY)
        except (requests.RequestException, self._api_error, ValueError, KeyError, TypeError) as exc:
            return Availability(False, f"no Prometheus query API at {self.url}: {one_line(exc)}")
        return Availability(True)

    def query_stage(
        self, start_s: float, end_s: float, step_s: float, targets: Sequence[ClassTarget],
        *, metrics: Sequence[str] = STAGE_METRICS,
    ) -> StageSeries:
        """Each class's points of ``metrics`` over ``[start_s, end_s]`` (epoch s) every ``step_s`` s, with notes.

        Never raises for a missing series, a failed query or an unreachable server (each is a note);
        raises ValueError for a window that is empty or a step that is not positive (a caller's bug).
        """
        if not end_s > start_s or not step_s > 0:
            raise ValueError(f"a stage window needs start < end and a positive step: {start_s}, {end_s}, {step_s}")
        result = StageSeries(start_s, end_s, step_s, rows={t.workload: [] for t in targets})
        if not targets:
            result.notes.append("no class target given: nothing was queried")
            return result
        least = math.ceil((end_s - start_s) / MAX_POINTS * 1000) / 1000
        if step_s < least:
            result.step_s = least
            result.notes.append(f"step raised from {step_s:g} s to {least:g} s: Prometheus returns at most "
                                f"{MAX_POINTS} points per series")
        for i, metric in enumerate(metrics):
            try:
                series = self._range(range_query(metric, targets), start_s, end_s, result.step_s)
            except requests.RequestException as exc:  # the next queries would fail alike: say it once
                left = ", ".join(metrics[i:])
                result.notes.append(f"Prometheus at {self.url} unreachable: {one_line(exc)}; no series for {left}")
                return result
            except (self._api_error, ValueError, KeyError, TypeError) as exc:
                result.notes.append(f"{metric}: query failed: {one_line(exc)}")
                continue
            self._assign(metric, series, targets, result)
        return result

    def instant(self, query: str, at_s: float) -> list[dict[str, str]]:
        """The label sets of an instant query's answer at ``at_s``; raises what the client raises (the caller
        says it as a note)."""
        data = self._client.custom_query(query, params={"time": _timestamp(at_s)})
        if not isinstance(data, list):
            raise ValueError(f"expected a list of series, got {type(data).__name__}")
        return [{str(k): str(v) for k, v in item.get("metric", {}).items()} for item in data if isinstance(item, dict)]

    def points(self, query: str, start_s: float, end_s: float, step_s: float) -> list[tuple[float, float]]:
        """The points of a range query's single series (an aggregate: ``sum(...)``), [] where it has none."""
        series = self._range(query, start_s, end_s, step_s)
        return series[0].points if series else []

    @property
    def errors(self) -> tuple[type[Exception], ...]:
        """What a query may raise that is the server's or the network's doing, not the caller's."""
        return (requests.RequestException, self._api_error, ValueError, KeyError, TypeError)

    def _range(self, query: str, start_s: float, end_s: float, step_s: float) -> list[_Series]:
        start = dt.datetime.fromtimestamp(start_s, tz=dt.UTC)
        end = dt.datetime.fromtimestamp(end_s, tz=dt.UTC)
        # custom_query_range rounds start and end to whole seconds; params go out as given and win
        params = {"start": _timestamp(start_s), "end": _timestamp(end_s)}
        data = self._client.custom_query_range(query, start_time=start, end_time=end, step=_seconds(step_s),
                                               params=params)
        return _parse(data)

    @staticmethod
    def _assign(metric: str, series: list[_Series], targets: Sequence[ClassTarget], result: StageSeries) -> None:
        for target in targets:
            mine = [s for s in series if target_selects(target, s.labels)]
            if not any(s.points for s in mine):
                result.notes.append(f"{metric}: no series for {target.workload} ({target.describe()})")
                continue
            rows = result.rows[target.workload]
            dropped = 0
            for s in mine:
                device, process = _device(target, s.labels), _process(target, s.labels)
                for t, value in s.points:
                    if not math.isfinite(value):
                        dropped += 1
                        continue
                    rows.append(TelemetryRow(t, device, metric, value, process))
            if dropped:
                result.notes.append(f"{metric}: {dropped} points of {target.workload} that are not finite numbers "
                                    "(NaN, +Inf, -Inf) left out")
