"""Reports: a comparison or a result made readable.

- `terminal`: rich tables for the command line.
- `writer.write_report(run_dir, formats)`: a run folder's `report.md`, `report.html`
  (self-contained, plots inline) and `plots/*.png`; `writer.write_compare_report(a, b)` puts two
  runs side by side.
- What the report says: `sections` (the source article's sections, in its order) built from
  `speed`, `answers` and `rows`; `compare_runs` for two folders; `runs` reads a folder.
  `markdown` and `html` only draw that `document`; `plots` draws the PNGs (matplotlib, Agg).
- `verdict`: the quality verdict's figures and per-family table (from `sagemeter.evidence`).
"""
