"""Web UI: the campaign in Locust's own web UI (``locust -f locustfiles/mixed.py --scenario ...`` without --headless).

Locust's modern UI takes extra tabs, each a table, through its documented extension points:
``template_args["extended_tabs"]`` / ``["extended_tables"]`` name them, and the JSON of
``/stats/requests`` (polled every 2 s) carries their rows under ``extended_stats``. Two tabs:

- GPU sharing, live (``bench-live``): per class, over the current stage's last 10 s and over the stage so far
  (live/view.py): requests, throughput against the offered rate, errors, P50/P95 latency and beside it the
  server's queue depth and running requests as its metrics last said, TTFT/TPOT P95 (llm), whether the SLOs
  and error budget hold, GPU utilisation and VRAM where telemetry runs.
- GPU sharing, campaign (``bench-campaign``): status, arm, repeat, trial, stage and time left, the
  window the live figures cover, the load generators, the verdict per arm so far, the report.

Start (``/swarm``) runs the campaign the command line named: the users and ramp-up fields do not
apply (each stage's load is open-loop arrivals, not users), which a banner above the form says; a host
typed into the form is refused, saying where endpoints come from (before, it was silently ignored); a
Start after the campaign has ended is answered with where its results are, never a silent
"swarming started". Stop ends it the way Ctrl-C does: everything measured is kept and the report is
written. ``/bench/live.json`` serves the snapshot itself, ``/bench/metrics`` the same in Prometheus's text
format (live/exposition.py); ``/bench/report`` the report once written.
Locust's own Statistics tab is reset at each stage start, so it too shows the current stage (its
buckets round to 10 ms above 100 ms: the tabs here use the exact samples).

Under Locust's header the banner says what Start does, links the report and keeps the campaign's status line
in view (``/bench/status.json``, polled by the banner itself: Locust's page stops polling its tables once its
test has stopped, so after a Stop only the banner says how, when and why the campaign ended); a collapsible
panel shows the
live charts (live/charts.py: ``/bench/charts`` fed by ``/bench/series.json``), which a table cannot be; and
the Host field is made read-only, since this campaign's endpoints come from its scenario.
"""

from __future__ import annotations

import html
import json
import logging
import time
from dataclasses import asdict
from pathlib import Path
from typing import Protocol

import gevent
from flask import Response, jsonify, request, send_file
from locust.env import Environment

from bench_plugin.live import exposition
from bench_plugin.live.charts import PAGE, POINT_S, History
from bench_plugin.live.view import SETTLE_S, ClassLive, Figures, LiveSnapshot
from bench_plugin.report.clock import clock
from bench_plugin.report.generators import decision_text
from bench_plugin.results.summary import GeneratorSizing
from bench_plugin.results.words import CampaignState
from bench_plugin.scenario import Scenario
from bench_plugin.telemetry.exposition import CONTENT_TYPE
from bench_plugin.users.base import WorkloadUser

logger = logging.getLogger(__name__)


class Fleet(Protocol):
    """What the tabs show of the load generators."""

    def summary_line(self) -> str:
        """The load generators in one line."""


class Shown(Protocol):
    """What the web UI reads of the running campaign (plugin.BenchPlugin is one): it never imports the plugin."""

    environment: Environment
    scenario: Scenario
    results_dir: Path
    no_report: bool
    finalized: bool
    stop_requested: str | None
    web_base_path: str
    """Locust's ``--web-base-path`` without its trailing slash ("" at the root)."""
    generators: GeneratorSizing | None
    """How the number of load-generating processes was decided (None: it was not)."""

    @property
    def fleet(self) -> Fleet:
        """The campaign's load generators."""

    def live_snapshot(self) -> LiveSnapshot:
        """The live view now."""

LIVE_TAB = "bench-live"
CAMPAIGN_TAB = "bench-campaign"

LIVE_COLUMNS = [
    ("cls", "Class"), ("offered", "Offered"), ("rate", "Req/s (window)"),
    ("requests", "Requests"), ("errors", "Errors"), ("p50", "P50 ms"), ("p95", "P95 ms"),
    ("queue", "Server queue"), ("running", "Server running"), ("ttft", "TTFT P95 ms"), ("tpot", "TPOT P95 ms"),
    ("slo", "SLO"),
    ("stagerequests", "Stage requests"), ("stagerate", "Stage req/s"), ("stagep95", "Stage P95 ms"),
    ("stageslo", "Stage SLO"),
    ("gpu", "GPU util %"), ("vram", "VRAM MiB"),
]
"""(key, heading) of the live table; keys are single words because the UI camel-cases keys."""

CAMPAIGN_COLUMNS = [("item", "Campaign"), ("value", "Now")]
WINDOW_ROW = "live window (by request end)"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _count(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def _offered(row: ClassLive) -> str:
    if row.offered is None:
        return "-"
    return f"{row.offered:g} req/s" if row.arrival != "closed" else f"{row.offered:g} loops (closed)"


def live_rows(snapshot: LiveSnapshot) -> list[dict[str, str]]:
    """The live tab's rows: one per class."""
    rows = []
    for row in snapshot.classes:
        w, st = row.window, row.stage
        rows.append({
            "cls": row.name, "offered": _offered(row), "rate": f"{w.throughput_rps:.2f}",
            "requests": str(w.requests), "errors": str(w.errors), "p50": _ms(w.p50_ms), "p95": _ms(w.p95_ms),
            "queue": _count(row.queue_depth), "running": _count(row.running),
            "ttft": _ms(w.ttft_p95_ms), "tpot": _ms(w.tpot_p95_ms), "slo": w.slo,
            "stagerequests": str(st.requests), "stagerate": f"{st.throughput_rps:.2f}", "stagep95": _ms(st.p95_ms),
            "stageslo": st.slo,
            "gpu": "-" if row.gpu_util is None else f"{row.gpu_util:.0f}",
            "vram": "-" if row.vram_mib is None else f"{row.vram_mib:.0f}",
        })
    return rows


def campaign_rows(snapshot: LiveSnapshot, load_generators: str, base: str = "") -> list[dict[str, str | float]]:
    """The campaign tab's rows: where it is, what the live figures cover, the verdict so far. The window's row
    also carries its exact bounds (``start``, ``end``: epoch seconds), which the table does not show."""
    pos = snapshot.position
    rows = [("status", status_line(snapshot))]
    if pos:
        rows += [("arm", f"{pos.get('arm')} (repeat {pos.get('repeat')})"),
                 ("trial", f"{pos.get('trial')} of {pos.get('of')}")]
        if pos.get("stage") is not None:
            left = pos.get("stage_left_s")
            rows.append(("stage", f"{pos['stage']}" + (f", {left:.0f} s left" if left is not None else "")))
    rows += [(WINDOW_ROW, window_label(snapshot)), ("load generators", load_generators)]
    rows += [(f"verdict: {arm}", text) for arm, text in snapshot.verdicts.items()]
    if snapshot.report:
        rows.append(("report", f"{base}/bench/report"))
    bounds = {"start": snapshot.window_start_s, "end": snapshot.window_end_s}
    return [{"item": item, "value": value, **(bounds if item == WINDOW_ROW else {})} for item, value in rows]


def generators_text(plugin: Shown) -> str:
    """The campaign tab's load generators: who is connected, and how their number was decided."""
    line = plugin.fleet.summary_line()
    return line if plugin.generators is None else f"{line} ({decision_text(plugin.generators)})"


def status_line(snapshot: LiveSnapshot) -> str:
    """``running``; once ended, how, when and why: ``failed at 09:00:10 +00:00: worker ... was lost``."""
    if snapshot.ended_s is None:
        return snapshot.status
    text = f"{snapshot.status} at {clock(snapshot.ended_s, date=False)}"
    return text + (f": {snapshot.reason}" if snapshot.reason and snapshot.status != CampaignState.COMPLETED else "")


def window_label(snapshot: LiveSnapshot) -> str:
    """What the window figures cover: ``last 10.0 s of stage high (07:20:01 +01:00 to 07:20:11 +01:00)``."""
    span = snapshot.window_end_s - snapshot.window_start_s
    stage = snapshot.position.get("stage") if snapshot.position else None
    of = f" of {stage}" if stage is not None else ""
    start, end = (clock(t, date=False) for t in (snapshot.window_start_s, snapshot.window_end_s))
    return f"last {span:.1f} s{of} ({start} to {end})"


def _banner(plugin: Shown, base: str) -> str:
    scenario = plugin.scenario
    arms = ", ".join(arm.name for arm in scenario.arms)
    text = (f"bench_plugin campaign <b>{html.escape(scenario.name)}</b> ({html.escape(arms)}; "
            f"{scenario.repeats} repeat(s)). Start runs it; Stop ends it and keeps what was measured. "
            "Users and ramp-up do not apply: each stage sends open-loop arrivals at the scenario's rates, and "
            "Locust's RPS counts requests (TTFT and TPOT are in the plugin's tabs). Live figures: tab "
            "<i>GPU sharing, live</i>, and the charts below. The report, once the campaign has ended: "
            f'<a href="{base}/bench/report" target="_blank">{base}/bench/report</a>.')
    charts = ('<details id="bench-plugin-charts" style="font:14px sans-serif;padding:4px 24px;'
              'border-bottom:1px solid #e0c97f"><summary>GPU sharing: live charts per class (P95 against the '
              'SLO, throughput against the offered rate, errors, GPU)</summary><iframe title="live charts" '
              f'src="{base}/bench/charts" style="width:100%;height:620px;border:0"></iframe></details>')
    # The Host field is not this campaign's (its endpoints come from the scenario): shown read-only.
    host = ("<script>new MutationObserver(() => { for (const i of document.querySelectorAll('input[name=host]')) "
            "{ if (!i.readOnly) { i.readOnly = true; i.title = 'endpoints come from the scenario (or --host, "
            "--<class>-host)'; } } }).observe(document.documentElement, {childList: true, subtree: true});</script>")
    # Locust's page stops polling its tables once its test has stopped (local mode: while the campaign is still
    # writing its end), so the campaign's own status is polled here, and stays in view however it ended.
    status = ('<div style="margin-top:4px">Campaign: <b id="bench-plugin-status">waiting</b></div><script>'
              f"(function poll() {{ fetch('{base}/bench/status.json', {{cache: 'no-store'}})"
              ".then((r) => r.ok ? r.json() : null).then((s) => { "
              "const b = document.getElementById('bench-plugin-status'); if (s && b) { b.textContent = s.text; "
              "b.style.color = s.ended && !s.completed ? '#b00020' : ''; } })"
              ".catch(() => {}).finally(() => setTimeout(poll, 2000)); })();</script>")
    return ('<div id="bench-plugin-banner" style="font:14px sans-serif;padding:8px 24px;background:#fff8e1;'
            f'border-bottom:1px solid #e0c97f">{text}{status}</div>{charts}{host}')


def attach(plugin: Shown) -> None:
    """Add the tabs, the routes and the Start guard to the environment's web UI (none in --headless)."""
    web_ui = plugin.environment.web_ui
    if web_ui is None:
        return
    web_ui.template_args["extended_tabs"] = [
        {"title": "GPU sharing, live", "key": LIVE_TAB}, {"title": "GPU sharing, campaign", "key": CAMPAIGN_TAB}]
    web_ui.template_args["extended_tables"] = [
        {"key": LIVE_TAB, "structure": [{"key": k, "title": t} for k, t in LIVE_COLUMNS]},
        {"key": CAMPAIGN_TAB, "structure": [{"key": k, "title": t} for k, t in CAMPAIGN_COLUMNS]}]
    app = web_ui.app
    assert app is not None
    history = History()
    base = plugin.web_base_path  # Locust's --web-base-path: the plugin's pages live under it, as Locust's own do

    @app.before_request
    def stop_button() -> None:
        """Note the web UI's Stop (Locust's POST /stop), so the campaign says why it stopped."""
        if request.method == "POST" and request.path.rstrip("/").endswith("/stop"):
            plugin.stop_requested = "the web UI's Stop button"

    def served() -> LiveSnapshot:
        """The snapshot now, kept in the charts' history (so a chart's last point is a window a table showed)."""
        snapshot = plugin.live_snapshot()
        history.add(snapshot)
        return snapshot

    def record() -> None:
        """A point every POINT_S while no table is polled (an open web UI's polls make the points then)."""
        while True:
            gevent.sleep(POINT_S / 2)
            try:
                if history.stale(time.time() - SETTLE_S, POINT_S):
                    served()
            except Exception:  # the charts must never stop a campaign
                logger.exception("the live charts could not take a point")

    gevent.spawn(record)

    @app.before_request
    def guard_start() -> Response | None:
        if request.method != "POST" or not request.path.endswith("/swarm"):
            return None
        if plugin.finalized:
            return jsonify({"success": False, "message": f"this campaign has ended: its results are in "
                            f"{plugin.results_dir}; start locust again for a new campaign"})
        host = (request.form.get("host") or "").strip()
        if host not in ("", plugin.environment.host or "", WorkloadUser.host):
            return jsonify({"success": False, "message": f"Host {host}: not used by this campaign, whose endpoints "
                            "come from its scenario (or --host / --<class>-host on the command line); clear the "
                            "field, or start locust again with --host"})
        return None

    @app.after_request
    def extend(response: Response) -> Response:
        if request.path.endswith("/stats/requests") and response.is_json:
            snapshot = served()
            extended = [{"key": LIVE_TAB, "data": live_rows(snapshot)},
                        {"key": CAMPAIGN_TAB, "data": campaign_rows(snapshot, generators_text(plugin), base)}]
            response.set_data(json.dumps({**(response.get_json() or {}), "extended_stats": extended}))
        elif (request.path.rstrip("/") == base and response.mimetype == "text/html"
              and not response.direct_passthrough):
            page = response.get_data(as_text=True)
            response.set_data(page.replace("<body>", "<body>" + _banner(plugin, base), 1))
        return response

    @app.route(f"{base}/bench/live.json")
    def live_json() -> Response:
        return jsonify(asdict(plugin.live_snapshot()))

    @app.route(f"{base}/bench/metrics")
    def metrics() -> Response:
        return Response(exposition.render(served(), plugin.scenario), mimetype=None, content_type=CONTENT_TYPE)

    @app.route(f"{base}/bench/charts")
    def charts_page() -> Response:
        return Response(PAGE, mimetype="text/html")

    @app.route(f"{base}/bench/status.json")
    def status() -> Response:
        """The campaign's status line (how, when and why it ended, once it has), for the banner."""
        snapshot = plugin.live_snapshot()
        return jsonify({"text": status_line(snapshot), "ended": snapshot.ended_s is not None,
                        "completed": snapshot.status == CampaignState.COMPLETED})

    @app.route(f"{base}/bench/series.json")
    def series() -> Response:
        return jsonify(history.to_json(plugin.scenario))

    @app.route(f"{base}/bench/report")
    def report() -> Response:
        path = Path(plugin.results_dir) / "report.html"
        if not path.is_file() and plugin.no_report:
            return Response(f"--no-report: render it with `bench-plugin report {plugin.results_dir}`", status=404,
                            mimetype="text/plain")
        if not plugin.finalized or not path.is_file():
            return Response("the report is written when the campaign ends", status=404, mimetype="text/plain")
        return send_file(path.resolve(), mimetype="text/html")


__all__ = ["CAMPAIGN_TAB", "LIVE_TAB", "Figures", "attach", "campaign_rows", "live_rows"]
