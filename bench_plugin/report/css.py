"""The stylesheet of report.html, kept in Python so it ships inside the package and inlines into the page.

Only local fonts (the system's sans-serif), no web fonts, no images: the page must open offline. It is
laid out for reading on a laptop screen and for printing: one column, plots as wide as the text.
"""

CSS = """
:root { --fg: #1d1d1f; --muted: #5f6368; --line: #dadce0; --bg: #ffffff; --page: #f6f7f9; }
* { box-sizing: border-box; }
body { margin: 0; background: var(--page); color: var(--fg);
       font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", "Liberation Sans", Arial,
       sans-serif; }
main { max-width: 1180px; margin: 0 auto; padding: 20px 28px 40px; background: var(--bg); }
h1 { font-size: 26px; margin: 8px 0 12px; }
h2 { font-size: 21px; margin: 36px 0 10px; padding-top: 10px; border-top: 2px solid var(--line); }
h3 { font-size: 16px; margin: 18px 0 6px; }
dl.facts { display: flex; flex-wrap: wrap; gap: 6px 28px; margin: 0 0 10px; }
dl.facts div { display: flex; gap: 6px; }
dl.facts dt { color: var(--muted); }
dl.facts dd { margin: 0; font-weight: 600; }
nav { padding: 8px 0; border-bottom: 1px solid var(--line); }
nav a { color: #1a5fb4; text-decoration: none; }
nav a:hover { text-decoration: underline; }
figure.plot { margin: 18px 0 28px; }
figure.plot h3 { margin-bottom: 2px; }
figure.plot svg { display: block; }
figcaption { color: var(--muted); font-size: 14px; max-width: 900px; margin-top: 2px; }
table { border-collapse: collapse; margin: 8px 0 14px; font-size: 13.5px; }
th, td { border: 1px solid var(--line); padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f1f3f4; font-weight: 600; }
table.kv th { display: none; }
table.kv td code, table.servers td code { overflow-wrap: anywhere; }
table.servers td:nth-child(7) { white-space: nowrap; }
code { font: 12.5px/1.35 ui-monospace, "DejaVu Sans Mono", "Liberation Mono", monospace; background: #f1f3f4;
       padding: 1px 3px; border-radius: 3px; }
details { margin: 8px 0 14px; }
summary { cursor: pointer; font-weight: 600; }
.badge { display: inline-block; padding: 1px 8px; border-radius: 10px; font-weight: 600; font-size: 13px;
         white-space: nowrap; }
.badge.good { background: #d5f0d8; color: #135c1d; }
.badge.mixed { background: #fde8c4; color: #7a4a00; }
.badge.bad { background: #f8d0d0; color: #8a1212; }
.badge.none { background: #e8eaed; color: #3c4043; }
p.note { background: #fff8e1; border-left: 4px solid #f0b400; padding: 8px 12px; }
p.ok { background: #eef8ee; border-left: 4px solid #3a9a3a; padding: 8px 12px; }
.status-completed dd { color: inherit; }
p.how { color: var(--muted); font-size: 14px; max-width: 900px; margin: 4px 0 10px; }
.pct .n { color: var(--muted); font-size: 12px; margin-left: 2px; white-space: nowrap; }
.pct.low { color: var(--muted); font-style: italic; text-decoration: underline dotted #b06000; cursor: help; }
.pct.low .mark { color: #b06000; font-style: normal; font-weight: 700; }
p.low-rule { color: var(--muted); font-size: 13px; font-style: italic; margin-top: -6px; }
div.slowdown { min-width: 15em; }
ul.reasons { margin: 0; padding-left: 16px; min-width: 15em; }
ul.reasons li { margin: 0 0 2px; }
ul.reasons ul { margin: 2px 0 0; padding-left: 14px; list-style: circle; }
footer { margin-top: 40px; color: var(--muted); font-size: 13px; }
@media print { body { background: #fff; } main { padding: 0; } figure.plot { break-inside: avoid; } }
"""
