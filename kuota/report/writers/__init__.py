"""The report's files, rendered from a :class:`~kuota.report.figures.schema.Report`: report.json (``json_file``),
report.csv (``csv_file``), report.md (``markdown_file``), report.html (``html_file``) and the charts
(``svg_charts``, the trends' lines in ``trends``)."""
