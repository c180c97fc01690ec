"""Reports: the campaign's answer and figures for people.

- html.write_report(results_dir, summary=None): report.html (self-contained, plots as inline SVG) and
  report.md; ``python -m bench_plugin.report RESULTS_DIR`` does the same from a shell.
- markdown: summary.md (figures per stage) and report.md (verdict first).
- plots (figures against offered load), timeline (one trial on one clock), pod_panel (its pods panel),
  telemetry (its GPU panels), scheduling (the pods' tables of the markdown), stage_series (per-stage
  GPU series from Prometheus), checks (measurement checks), tables (errors, conditions), comparison
  (the words and numbers shown for figures, boundaries and verdicts), figures (look and SVG export),
  css; and side_by_side (two campaigns compared).

The report reads only the typed summary (bench_plugin.results.summary: ``Summary``, loaded with
``load_summary``) and the typed store readers (bench_plugin.results.store); it parses no JSON itself.

Nothing is imported here: bench_plugin.report.outputs imports the markdown module on every run, and must
not pay for matplotlib.
"""
