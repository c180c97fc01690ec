"""Reports: the campaign's answer and figures for people.

- html.write_report(results_dir, summary=None): report.html (self-contained, plots as inline SVG) and
  report.md, one page written twice; ``python -m bench_plugin.report RESULTS_DIR`` does the same from a shell.
- page (the document tree), document (the page built once, its sections in one order), page_html and
  page_markdown (its writers), page_text (the terminal's writer of a tree: the answer's and the plan's); one
  module per section, each with a ``section`` function: answer, verdict, envelope, plan, stage_tables,
  cut_short, latency_split, scheduling, disruption, stage_series, checks, errors, conditions.
- markdown: summary.md (figures per stage) and report.md from a summary alone.
- plots (figures against offered load), timeline (one trial on one clock), pod_panel (its pods panel),
  telemetry (its GPU panels), comparison (the words and numbers shown for figures, boundaries and verdicts),
  basis (what a percentile rests on), figures (look and SVG export), tables (HTML escaping), css, guide
  ("how to read this"); terminal (the answer a headless run prints, a page of its own); and side_by_side (two
  campaigns compared).

The report reads only the typed summary (bench_plugin.results.summary: ``Summary``, loaded with
``load_summary``) and the typed store readers (bench_plugin.results.store); it parses no JSON itself.

Nothing is imported here, so importing the package costs nothing; the modules that draw import matplotlib.
"""
