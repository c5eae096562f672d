"""Exporters, one per format, returning bytes; a writer does the I/O.

    data.load_run(dir) -> RunData                 the run directory, read once (partial runs too)
    plots.make_plots(data, limits) -> [Plot]      PNG + SVG bytes per picture
    html.render_html(data, plots) -> bytes        report.html, self-contained
    csv_export.export_csv(data) -> bytes
    json_export.export_json(data) -> bytes
    parquet_export.export_parquet(data) -> bytes  (needs pyarrow)
    writer.write_report(dir) -> [Path]            writes report.html and plots/*.png|svg
    writer.refresh_report(dir, force=False)       the same after each cell of a run: never raises
"""
