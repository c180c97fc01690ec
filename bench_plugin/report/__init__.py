"""Reports: the campaign's answer and figures for people.

- html.write_report(results_dir): report.html (self-contained, plots as inline SVG) and report.md;
  ``python -m bench_plugin.report RESULTS_DIR`` does the same from a shell.
- markdown: summary.md (figures per stage) and report.md (verdict first).
- plots (figures against offered load), timeline (one trial on one clock), telemetry (its GPU panels),
  tables (errors, conditions), comparison (summary.json's comparison section as typed records),
  store (what the report reads from results.sqlite), figures (look and SVG export), css; and
  side_by_side (two campaigns compared).

Nothing is imported here: bench_plugin.analysis imports the markdown module on every run, and must
not pay for matplotlib.
"""
