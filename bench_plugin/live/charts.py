"""Live charts: the live view's figures over time, per class, for the web UI's charts panel.

Locust's web UI takes extra tabs only as tables (its ``extended_tabs``/``extended_tables`` extension points
render each cell as text), so the charts are a page of their own, ``/bench/charts``, that the web UI shows
in a panel under its header (live/webui.py). The page draws, per class, P95 latency over time with the SLO
as a dashed line (TTFT and TPOT P95 with theirs for the LLM), throughput against the offered rate, errors,
and GPU utilisation and memory where telemetry runs; each stage's start is a vertical mark named by arm,
repeat and stage. It polls ``/bench/series.json`` (History.to_json) every 2 s.

History keeps one point per distinct live window: every snapshot the web UI serves (its tables' and
/bench/metrics') is added, and a greenlet adds one every POINT_S seconds while nobody looks; /bench/series.json
adds none, so with the web UI open the chart's last point is exactly the window the live table showed last
(the browser test checks it by the window's end).
A point holds the window's figures, never a mix of stages: the window never crosses one (live/view.py).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from bench_plugin.live.view import LiveSnapshot
from bench_plugin.scenario import Scenario

POINT_S = 2.0
"""Seconds between two points the greenlet adds (the web UI polls as often)."""
MAX_POINTS = 20_000
"""Points kept (about 11 hours at one per 2 s); past it every other old point is dropped."""


@dataclass(frozen=True)
class ClassPoint:
    """One class's window figures at one moment."""

    p95_ms: float | None
    ttft_p95_ms: float | None
    tpot_p95_ms: float | None
    throughput_rps: float
    offered: float | None
    requests: int
    errors: int
    gpu_util: float | None
    vram_mib: float | None


@dataclass(frozen=True)
class Point:
    """The live window at one moment: its bounds (epoch s, by request end) and each class's figures."""

    start_s: float
    end_s: float
    classes: dict[str, ClassPoint]


@dataclass(frozen=True)
class Mark:
    """A stage began (epoch ``t``): the arm, repeat and stage it belongs to."""

    t: float
    arm: str
    repeat: int | None
    stage: str


@dataclass
class History:
    """The campaign's live figures over time, and where its stages began."""

    points: list[Point] = field(default_factory=list)
    marks: list[Mark] = field(default_factory=list)

    def add(self, snapshot: LiveSnapshot) -> None:
        """Keep ``snapshot``'s window, unless it is the one kept last (or nothing runs yet)."""
        pos = snapshot.position
        if pos.get("stage_start_s") is None:
            return
        mark = Mark(float(pos["stage_start_s"]), str(pos.get("arm")), pos.get("repeat"), str(pos.get("stage")))
        if not self.marks or self.marks[-1] != mark:
            self.marks.append(mark)
        if snapshot.window_end_s <= mark.t or (self.points and self.points[-1].end_s >= snapshot.window_end_s):
            return  # no request of this stage can have ended yet, or this window is kept already
        self.points.append(Point(snapshot.window_start_s, snapshot.window_end_s, {
            c.name: ClassPoint(c.window.p95_ms, c.window.ttft_p95_ms, c.window.tpot_p95_ms, c.window.throughput_rps,
                               c.offered, c.window.requests, c.window.errors, c.gpu_util, c.vram_mib)
            for c in snapshot.classes}))
        if len(self.points) > MAX_POINTS:
            old = len(self.points) // 2
            self.points[:old] = self.points[:old:2]

    def stale(self, window_end_s: float, older_than_s: float) -> bool:
        """Whether the newest point's window ended more than ``older_than_s`` before ``window_end_s``."""
        return not self.points or window_end_s - self.points[-1].end_s > older_than_s

    def to_json(self, scenario: Scenario) -> dict[str, Any]:
        """What the charts page draws: the points, the stage marks and each class's objectives (ms)."""
        slo = {name: scenario.classes.get(name).slo.model_dump(mode="json") for name in scenario.classes.names()}
        return {"points": [asdict(p) for p in self.points], "marks": [asdict(m) for m in self.marks], "slo": slo}


PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>bench_plugin: live charts</title>
<style>
body{font:13px sans-serif;margin:8px;color:#222;background:#fff}
h2{font-size:14px;margin:10px 0 2px}
.row{display:flex;flex-wrap:wrap;gap:12px}
.chart{border:1px solid #ddd;padding:4px}
.chart svg{display:block}
.legend{font-size:11px;color:#555}
#state{color:#555}
</style></head><body>
<div id="state">waiting for the campaign's first stage</div>
<div id="charts"></div>
<script>
const W = 420, H = 170, L = 52, R = 8, T = 8, B = 22, MIN_SPAN_S = 2;
const COLORS = {llm: '#1f77b4', embedding: '#ff7f0e', asr: '#2ca02c'};
const ENTITIES = {'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;'};
function esc(s) { return String(s).replace(/[&<>"]/g, (c) => ENTITIES[c]); }
function fmt(v) { return v === null || v === undefined ? '-' : (Math.abs(v) >= 100 ? v.toFixed(0) : v.toFixed(1)); }
function clock(t) { return new Date(t * 1000).toLocaleTimeString(); }
// lines: [{name, color, dash, points: [[t, v]...]}]; marks: [{t, label}]
function chart(id, title, unit, lines, marks, t0, t1) {
  const values = lines.flatMap((l) => l.points.map((p) => p[1])).filter((v) => v !== null);
  const top = values.length ? Math.max(...values) * 1.15 || 1 : 1;
  const x = (t) => L + (W - L - R) * (t1 > t0 ? (t - t0) / (t1 - t0) : 1);
  const y = (v) => T + (H - T - B) * (1 - v / top);
  let svg = `<svg id="${id}" width="${W}" height="${H}" role="img" aria-label="${esc(title)}">`;
  for (let k = 0; k <= 4; k++) {
    const v = top * k / 4;
    svg += `<line x1="${L}" x2="${W - R}" y1="${y(v)}" y2="${y(v)}" stroke="#eee"/>`;
    svg += `<text x="${L - 4}" y="${y(v) + 4}" text-anchor="end" font-size="10">${fmt(v)}</text>`;
  }
  for (const m of marks) {
    if (m.t < t0 || m.t > t1) continue;
    svg += `<line class="mark" x1="${x(m.t)}" x2="${x(m.t)}" y1="${T}" y2="${H - B}" stroke="#c33"` +
           ` stroke-dasharray="2,3"><title>${esc(m.label)}</title></line>`;
  }
  for (const l of lines) {
    const pts = l.points.filter((p) => p[1] !== null);
    if (!pts.length) continue;
    // a new stage starts a new line: its figures are never joined to the stage before
    const cut = (a, b) => !l.whole && marks.some((m) => m.t > a[0] && m.t <= b[0]);
    const d = pts.map((p, i) => `${i && !cut(pts[i - 1], p) ? 'L' : 'M'}${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`)
      .join('');
    const last = pts[pts.length - 1];
    const style = l.dash ? 'stroke-width="1.2" stroke-dasharray="6,4"' : 'stroke-width="2"';
    for (const [i, p] of pts.entries()) {  // a point alone in its stage is a dot, not an invisible line
      const alone = (i === 0 || cut(pts[i - 1], p)) && (i === pts.length - 1 || cut(p, pts[i + 1]));
      if (alone && !l.dash) svg += `<circle cx="${x(p[0]).toFixed(1)}" cy="${y(p[1]).toFixed(1)}" r="2.5"` +
                                   ` fill="${l.color}"/>`;
    }
    svg += `<path class="line" data-name="${esc(l.name)}" data-last="${last[1]}" data-last-t="${last[0]}"` +
           ` d="${d}" fill="none" stroke="${l.color}" ${style}/>`;
  }
  svg += `<text x="${L}" y="${H - 6}" font-size="10">${clock(t0)}</text>` +
         `<text x="${W - R}" y="${H - 6}" font-size="10" text-anchor="end">${clock(t1)}</text></svg>`;
  const key = (l) => `<span style="color:${l.color}">${l.dash ? '- -' : '&#9473;'} ${esc(l.name)}</span>`;
  const legend = lines.map(key).join(' &nbsp; ');
  return `<div class="chart"><h2>${esc(title)} (${esc(unit)})</h2>${svg}<div class="legend">${legend}</div></div>`;
}
function draw(data) {
  // a window shorter than MIN_SPAN_S (a stage's first seconds) is too short to read a rate or a P95 from
  const pts = data.points.filter((p) => p.end_s - p.start_s >= MIN_SPAN_S);
  if (!pts.length) return;
  const starts = data.marks.map((m) => m.t);
  const t0 = Math.min(pts[0].end_s, ...starts), t1 = Math.max(pts[pts.length - 1].end_s, ...starts);
  const marks = data.marks.map((m) => ({t: m.t, label: `${m.arm} repeat ${m.repeat}: ${m.stage}`}));
  const names = Object.keys(pts[pts.length - 1].classes);
  const series = (cls, key) => pts.map((p) => [p.end_s, p.classes[cls] ? p.classes[cls][key] : null]);
  const flat = (v) => (v === null || v === undefined ? [] : [[t0, v], [t1, v]]);  // an SLO: no stage cuts it
  let html = '';
  for (const cls of names) {
    const c = COLORS[cls] || '#555', slo = data.slo[cls] || {};
    html += `<div class="row" data-class="${esc(cls)}">`;
    const lat = [{name: `${cls} P95`, color: c, points: series(cls, 'p95_ms')},
                 {name: `${cls} P95 SLO`, color: c, dash: true, whole: true, points: flat(slo.p95_ms)}];
    if (cls === 'llm') {
      lat.push({name: 'TTFT P95', color: '#9467bd', points: series(cls, 'ttft_p95_ms')},
               {name: 'TTFT SLO', color: '#9467bd', dash: true, whole: true, points: flat(slo.ttft_p95_ms)},
               {name: 'TPOT P95', color: '#8c564b', points: series(cls, 'tpot_p95_ms')},
               {name: 'TPOT SLO', color: '#8c564b', dash: true, whole: true, points: flat(slo.tpot_p95_ms)});
    }
    html += chart(`p95-${cls}`, `${cls}: P95 latency, last 10 s of the stage`, 'ms', lat, marks, t0, t1);
    html += chart(`rate-${cls}`, `${cls}: throughput vs offered`, 'req/s',
                  [{name: 'served', color: c, points: series(cls, 'throughput_rps')},
                   {name: 'offered', color: '#777', dash: true, points: series(cls, 'offered')}], marks, t0, t1);
    html += chart(`errors-${cls}`, `${cls}: errors in the window`, 'requests',
                  [{name: 'errors', color: '#d62728', points: series(cls, 'errors')}], marks, t0, t1);
    if (pts.some((p) => p.classes[cls] && p.classes[cls].gpu_util !== null)) {
      html += chart(`gpu-${cls}`, `${cls}: GPU utilisation`, '%',
                    [{name: 'util', color: c, points: series(cls, 'gpu_util')}], marks, t0, t1);
      html += chart(`vram-${cls}`, `${cls}: GPU memory`, 'MiB',
                    [{name: 'VRAM', color: c, points: series(cls, 'vram_mib')}], marks, t0, t1);
    }
    html += '</div>';
  }
  document.getElementById('charts').innerHTML = html;
  const last = pts[pts.length - 1], m = data.marks.filter((k) => k.t < last.end_s).pop();
  document.getElementById('state').textContent = `${m ? `${m.arm} repeat ${m.repeat}, ${m.stage}; ` : ''}` +
    `last window ${clock(last.start_s)} to ${clock(last.end_s)}; dashed red: a stage starts`;
  document.body.dataset.lastEnd = String(last.end_s);
}
async function poll() {
  try { const r = await fetch('series.json', {cache: 'no-store'}); if (r.ok) draw(await r.json()); } catch (e) {}
  setTimeout(poll, 2000);
}
poll();
</script></body></html>
"""
"""The charts page (self-contained: no script or style from anywhere else)."""
